"""Legal plays: generation against brute force, and the seat constraints (bomb limits, 报到 locks)."""

import oracle
import pytest
from conftest import POOL, rank_strings, rulesets
from hypothesis import given, settings
from hypothesis import strategies as st

from service.rules import (
    DECK,
    JOKER_UNIT,
    SHANGHAI_LOCAL,
    SHANGHAI_PLATFORM,
    IllegalPlay,
    InvalidCombination,
    InvalidNotation,
    Ruleset,
    can_play,
    classify,
    counts_of,
    legal_moves,
    legal_plays,
    parse_cards,
    parse_ranks,
    rank_index,
    readings,
    report_units,
    verify_play,
)

LEADS = [
    "3",
    "K",
    "2",
    "B",
    "44",
    "AA",
    "BB",
    "555",
    "34567",
    "A2345",
    "TJQKA",
    "334455",
    "333444",
    "33344",
    "KKK22",
    "3334445566",
    "4444",
    "55555",
    "22222222",
    "BBRR",
]


def ranks_of(plays):
    return [p.ranks for p in plays]


@pytest.mark.slow  # every sub-multiset of 150 hands
@settings(max_examples=150, deadline=None)
@given(rank_strings(10), rulesets)
def test_leads_are_exactly_the_valid_sub_multisets(hand, ruleset):
    plays = ranks_of(legal_plays(hand, ruleset=Ruleset.by_name(ruleset)))
    assert len(plays) == len(set(plays)), "each distinct play once"
    assert set(plays) == oracle.all_plays(hand, ruleset)


@pytest.mark.slow  # every sub-multiset of 150 hands
@settings(max_examples=150, deadline=None)
@given(rank_strings(10), st.sampled_from(LEADS), rulesets)
def test_replies_are_exactly_the_sub_multisets_that_beat(hand, lead, ruleset):
    rs = Ruleset.by_name(ruleset)
    try:
        lead_combination = classify(lead, rs)
    except InvalidCombination:
        return
    plays = ranks_of(legal_plays(hand, lead_combination, ruleset=rs))
    assert len(plays) == len(set(plays))
    assert set(plays) == oracle.all_replies(hand, lead, ruleset)


@settings(max_examples=200, deadline=None)
@given(st.permutations(POOL), st.integers(1, 33), st.sampled_from(LEADS + [None]), rulesets)
def test_every_generated_play_is_legal_in_a_big_hand(cards, size, lead, ruleset):
    rs = Ruleset.by_name(ruleset)
    hand = parse_ranks("".join(cards[:size]))
    lead_combination = classify(lead, rs) if lead and (lead != "BBRR" or rs.joker_bomb) else None
    for play in legal_plays(hand, lead_combination, ruleset=rs):
        assert all(n <= h for n, h in zip(play.counts, hand))
        assert verify_play(hand, play.counts, lead_combination, ruleset=rs) == play
        if lead_combination is None:
            assert classify(play.counts, rs) == play
        else:
            assert play.beats(lead_combination)


@settings(max_examples=100, deadline=None)
@given(st.permutations(DECK))
def test_legal_moves_map_to_cards_of_the_hand(deck):
    hand = deck[:33]
    for move in legal_moves(hand):
        remaining = list(hand)
        for card in move.cards:
            remaining.remove(card)
        assert counts_of(move.cards) == move.combination.counts


def test_a_farmer_at_the_bomb_limit_may_not_bomb():
    hand = "3333KKKKBBRR5"
    plays = ranks_of(legal_plays(hand, classify("4"), bombs_left=0))
    assert plays == ["5", "K", "B", "R"]
    assert "KKKK" in ranks_of(legal_plays(hand, classify("4"), bombs_left=1))
    with pytest.raises(IllegalPlay) as exc:
        verify_play(hand, "KKKK", classify("4"), bombs_left=0)
    assert exc.value.code == "bomb_limit_reached"
    with pytest.raises(IllegalPlay, match="bomb"):
        verify_play(hand, "BBRR", None, bombs_left=0)


def test_a_reported_rank_leaves_only_as_its_whole_bomb():
    hand = "3333333" + "456" + "7"
    locked = frozenset({rank_index("3")})
    leads = ranks_of(legal_plays(hand, locked=locked))
    assert "3333333" in leads
    assert not any("3" in p for p in leads if p != "3333333")
    replies = ranks_of(legal_plays(hand, classify("KKKK"), locked=locked))
    assert replies == ["3333333"]
    with pytest.raises(IllegalPlay) as exc:
        verify_play(hand, "3333", None, locked=locked)
    assert exc.value.code == "must_play_whole_reported_bomb"
    assert can_play(hand, "3333333", None, locked=locked)


def test_reported_jokers_leave_only_as_the_joker_bomb():
    hand = "BBRR345"
    leads = ranks_of(legal_plays(hand, locked=JOKER_UNIT))
    assert "BBRR" in leads and "B" not in leads and "BB" not in leads
    with pytest.raises(IllegalPlay, match="whole bomb"):
        verify_play(hand, "R", None, locked=JOKER_UNIT)


def test_nothing_beats_the_joker_bomb_and_it_beats_eight():
    hand = "BBRR22222222"
    assert ranks_of(legal_plays(hand, classify("BBRR"))) == []
    assert ranks_of(legal_plays(hand, classify("22222222"))) == ["BBRR"]
    assert "BBRR" not in ranks_of(legal_plays(hand, ruleset=SHANGHAI_LOCAL))


def test_verify_play_names_each_broken_rule():
    hand = "33445566"
    cases = [
        ("333", None, "cards_not_in_hand"),
        ("34", None, "invalid_combination"),
        ("44", classify("55"), "does_not_beat"),
    ]
    for cards, lead, code in cases:
        with pytest.raises(ValueError) as exc:
            verify_play(hand, cards, lead)
        assert exc.value.code == code
        assert not can_play(hand, cards, lead)


def test_a_refusal_names_the_cards_as_they_were_given():
    """Card codes for cards (the API's notation), a rank string for ranks (ddz rules')."""
    hand = parse_cards("S3 H3 S4 RJ")
    with pytest.raises(InvalidCombination, match=r"^S3 RJ: jokers go with other cards"):
        verify_play(hand, parse_cards("S3 RJ"))
    with pytest.raises(InvalidCombination, match=r"^3R: jokers go with other cards"):
        verify_play("334R", "R3")
    lead = parse_cards("C5 D5")
    with pytest.raises(IllegalPlay, match=r"^S3 H3 does not beat the pair C5 D5$"):
        verify_play(hand, parse_cards("S3 H3"), classify(lead), lead_cards=lead)
    with pytest.raises(IllegalPlay, match=r"^33 does not beat the pair 55$"):
        verify_play("334R", "33", classify("55"))


def test_verify_play_records_the_strongest_reading_that_beats():
    hand = "A23456789TJQK"
    weaker, stronger = readings(hand)
    assert verify_play(hand, hand) == stronger
    assert verify_play(hand, hand, weaker) == stronger
    with pytest.raises(IllegalPlay, match="does not beat"):
        verify_play(hand, hand, stronger)


def test_the_leader_has_every_play_and_a_follower_only_same_shape():
    hand = "3344556677"
    replies = ranks_of(legal_plays(hand, classify("334455")))
    assert replies == ["445566", "556677"]


@pytest.mark.parametrize(
    "hand, ruleset, units",
    [
        ("3333333" + "BBRR", SHANGHAI_PLATFORM, [{"3"}, {"B", "R"}]),
        ("3333333" + "BBRR", SHANGHAI_LOCAL, [{"3"}]),
        ("333333" + "44444444", SHANGHAI_PLATFORM, [{"4"}]),
        ("BBR", SHANGHAI_PLATFORM, []),
    ],
)
def test_report_units(hand, ruleset, units):
    found = report_units(parse_ranks(hand), ruleset)
    assert [{"3456789TJQKA2BR"[r] for r in unit} for unit in found] == units


def test_a_hand_no_two_decks_hold_is_refused():
    with pytest.raises(InvalidNotation, match="hold 8"):
        list(legal_plays("333333333"))
