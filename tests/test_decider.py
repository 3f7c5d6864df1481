"""The match decider (docs/rules.md §4-5) in given-events / when-command / then-events form.

``given(*events)`` folds past events into a state, ``when(state, command)`` asks the decider
for the events a command causes, and ``refused(state, command)`` checks that the command is
refused without touching the state and returns the ``GameError.code``.

Most scenarios deal crafted hands: the decider trusts the ``hand_dealt`` event of the past,
so a test writes one with exactly the cards it needs (always all 108 cards: 4 × 25 + 8).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from decimal import Decimal

import pytest

from service.game import (
    Bid,
    CreateMatch,
    DealHand,
    Disconnect,
    Event,
    GameError,
    MatchSettings,
    Pass,
    Play,
    Report,
    Resume,
    ShowHand,
    State,
    TakeSeat,
    can,
    decide,
    evolve,
    initial_state,
    replay,
)
from service.game.events import (
    BOT,
    PLAYER,
    BidMade,
    Disconnected,
    HandDealt,
    HandEnded,
    HandShown,
    LandlordChosen,
    MatchCreated,
    Passed,
    Played,
    Reported,
    Resumed,
    SeatTaken,
)
from service.rules import DECK, Card, legal_plays, parse_cards, parse_ranks, pick_cards, rank_index
from service.rules import deal as rules_deal

PLAYERS = ("alice", "bob", "carol", "dave")
SEED = bytes.fromhex("5eed" * 16)
RULESETS = ("shanghai-platform", "shanghai-local")


# --------------------------------------------------------------------------
# given / when / then
# --------------------------------------------------------------------------


def given(*events: Event) -> State:
    """The state after these past events."""
    return replay(events)


def when(state: State, command) -> list[Event]:
    """The events the command causes (raises GameError when refused)."""
    events = decide(state, command)
    assert can(state, command)
    return events


def refused(state: State, command) -> str:
    """The command is refused: no events, the state unchanged, ``can`` says no. Returns the code."""
    before = dict(state.__dict__)
    with pytest.raises(GameError) as info:
        decide(state, command)
    assert state.__dict__ == before
    assert not can(state, command)
    return info.value.code


def after(state: State, *commands) -> State:
    """The state after the commands (each must be accepted)."""
    for command in commands:
        for event in decide(state, command):
            state = evolve(state, event)
    return state


def then(state: State, events: list[Event]) -> State:
    return replay(events, state)


def table(ruleset=None, **options) -> MatchSettings:
    return MatchSettings.build(ruleset=ruleset, **options)


def seated(ruleset=None, *, bots=(), **options) -> list[Event]:
    """A match with four seats taken: players, or bots at the seats in ``bots``."""
    events: list[Event] = [MatchCreated("match-1", table(ruleset, **options))]
    for seat in range(4):
        events.append(
            SeatTaken(seat, None, True) if seat in bots else SeatTaken(seat, PLAYERS[seat], False)
        )
    return events


def craft(
    hands: dict[int, str],
    bottom: str = "",
    *,
    marked_seat: int = 0,
    marked: str | None = None,
    seed: bytes = SEED,
) -> HandDealt:
    """A deal with the given ranks in the given hands (and bottom), the rest of the two decks
    spread round-robin, rank by rank, so that no filler builds up a bomb or a 报到.
    ``marked`` is the rank of the marked card in ``marked_seat``'s hand (default: its first
    non-joker card)."""
    pool = sorted(DECK)

    def take(ranks: str) -> list[Card]:
        out = []
        for ch in ranks.replace(" ", ""):
            card = next(c for c in pool if c.rank == rank_index(ch))
            pool.remove(card)
            out.append(card)
        return out

    dest = [take(hands.get(seat, "")) for seat in range(4)] + [take(bottom)]
    size = [25, 25, 25, 25, 8]
    assert all(len(d) <= n for d, n in zip(dest, size))
    i = 0
    for card in pool:
        while len(dest[i % 5]) >= size[i % 5]:
            i += 1
        dest[i % 5].append(card)
        i += 1
    assert [len(d) for d in dest] == size
    assert Counter(c for d in dest for c in d) == Counter(DECK)
    holder = dest[marked_seat]
    card = next(c for c in holder if (c.rank_char == marked if marked else not c.is_joker))
    return HandDealt(
        hashlib.sha256(seed).hexdigest(),
        seed.hex(),
        tuple(tuple(d) for d in dest[:4]),
        tuple(dest[4]),
        card,
        marked_seat,
    )


def split33(ranks: str) -> tuple[str, str]:
    """A landlord's 33 cards as (25 dealt, 8 bottom)."""
    ranks = ranks.replace(" ", "")
    assert len(ranks) == 33
    return ranks[:25], ranks[25:]


def cards(state: State, seat: int, ranks: str) -> tuple[Card, ...]:
    """Concrete cards of the seat's hand with these ranks."""
    return pick_cards(state.hands[seat], parse_ranks(ranks.replace(" ", "")))


def play(state: State, ranks: str, seat: int | None = None, by: str = PLAYER) -> Play:
    seat = state.turn if seat is None else seat
    return Play(seat, cards(state, seat, ranks), by)


def by_for(state: State, seat: int) -> str:
    return BOT if state.is_system(seat) else PLAYER


def pass_until(state: State, seat: int) -> State:
    """Every other seat passes until ``seat`` is to act."""
    while state.turn != seat:
        state = after(state, Pass(state.turn, by_for(state, state.turn)))
    return state


def lead_lowest(state: State) -> State:
    """The seat to act leads its lowest card that is not locked by 报到."""
    seat = state.turn
    card = min(
        c
        for c in state.hands[seat]
        if c.rank not in (state.locked if seat == state.landlord else ())
    )
    return after(state, Play(seat, (card,), by_for(state, seat)))


def bids(*values: tuple[int, int]) -> list[Event]:
    return [BidMade(seat, value) for seat, value in values]


def amounts(*values) -> list[str]:
    return [f"{Decimal(v):.2f}" for v in values]


def assert_zero_sum(settlement: dict) -> None:
    total = sum(Decimal(v) for v in settlement["net"]) + Decimal(settlement["house"])
    assert total == 0
    assert sum(Decimal(v) for v in settlement["gross"]) == 0
    assert sum(Decimal(v) for v in settlement["after_cap"]) == 0


# --------------------------------------------------------------------------
# Crafted deals
# --------------------------------------------------------------------------

#: A pair chain 3…A (24 cards).
PC = "33445566778899TTJJQQKKAA"

#: Seat 0 (marked) holds PC + a straight 3…J once it has the bottom: two plays win.
#: Seat 1 holds a 2 and PC: after beating a single with the 2 it wins with PC.
DEAL_A = craft({0: PC + "3", 1: "2" + PC}, bottom="456789TJ")

#: Seat 0 (marked): a bomb 3333, a pair chain 4…A, a straight 7…J and a pair of 2s.
_C_HAND, _C_BOTTOM = split33("3333" + "445566778899TTJJQQKKAA" + "789TJ" + "22")
DEAL_C = craft({0: _C_HAND}, bottom=_C_BOTTOM)

#: Three bombs for every seat, and the four jokers with seat 1.
DEAL_BOMBS = craft(
    {0: "3333 4444 5555", 1: "6666 7777 8888 BBRR", 2: "9999 TTTT JJJJ", 3: "QQQQ KKKK AAAA"}
)

#: Seat 0 (marked, the marked card a small joker: 明王) holds eight 3s and seven 4s (N = 2).
#: Seat 1 wins after 报到 打 with 2, a pair chain 5…A, 222 and 4.
DEAL_REPORT = craft(
    {0: "33333333 4444444 B", 1: "4 2 5566778899TTJJQQKKAA 222"},
    marked_seat=0,
    marked="B",
)


def landlord_a(ruleset=None, *, bots=(), **options) -> State:
    """DEAL_A, seat 0 bids 1 and the others pass: seat 0 is landlord at 1, playing."""
    state = given(
        *seated(ruleset, bots=bots, **options),
        DEAL_A,
        *bids((0, 1), (1, 0), (2, 0), (3, 0)),
        LandlordChosen(0, 1, DEAL_A.bottom),
    )
    assert state.phase == "playing" and state.turn == 0
    return state


# --------------------------------------------------------------------------
# Creating the match and seating (§4.1)
# --------------------------------------------------------------------------


def test_create_match():
    t = table()
    assert when(initial_state, CreateMatch("match-1", t)) == [MatchCreated("match-1", t)]
    state = given(MatchCreated("match-1", t))
    assert state.phase == "seating"
    assert refused(state, CreateMatch("match-1", t)) == "match_exists"


def test_a_player_takes_a_free_seat():
    state = given(MatchCreated("match-1", table()))
    assert when(state, TakeSeat(2, "alice")) == [SeatTaken(2, "alice", False)]


def test_a_bot_takes_a_seat():
    state = given(MatchCreated("match-1", table()))
    assert when(state, TakeSeat(1, bot=True)) == [SeatTaken(1, None, True)]


def test_seat_taken():
    state = given(MatchCreated("match-1", table()), SeatTaken(2, "alice", False))
    assert refused(state, TakeSeat(2, "bob")) == "seat_taken"
    state = given(MatchCreated("match-1", table()), SeatTaken(2, None, True))
    assert refused(state, TakeSeat(2, "bob")) == "seat_taken"


def test_a_player_cannot_take_two_seats():
    state = given(MatchCreated("match-1", table()), SeatTaken(0, "alice", False))
    assert refused(state, TakeSeat(1, "alice")) == "already_seated"


def test_a_seat_takes_a_player_or_a_bot():
    state = given(MatchCreated("match-1", table()))
    assert refused(state, TakeSeat(0, "alice", bot=True)) == "invalid_command"
    assert refused(state, TakeSeat(0)) == "invalid_command"
    assert refused(state, TakeSeat(4, "alice")) == "invalid_seat"
    assert refused(state, TakeSeat(-1, "alice")) == "invalid_seat"


def test_seating_before_the_match_exists_is_wrong_phase():
    assert refused(initial_state, TakeSeat(0, "alice")) == "wrong_phase"


def test_four_seats_taken_is_the_dealing_phase():
    events = seated(bots=(3,))
    assert given(*events[:4]).phase == "seating"
    state = given(*events)
    assert state.phase == "dealing"
    assert refused(state, TakeSeat(0, "erin")) == "wrong_phase"


def test_no_deal_before_four_seats():
    state = given(*seated()[:4])
    assert refused(state, DealHand(SEED)) == "wrong_phase"


# --------------------------------------------------------------------------
# The deal (§4.2-3, docs/hand-record.md)
# --------------------------------------------------------------------------


def reference_deal(seed: bytes):
    """docs/hand-record.md's algorithm, written out independently of the service."""
    deck = [suit + rank for rank in "3456789TJQKA2" for suit in "SHCD"] + ["BJ", "RJ"]
    deck = deck * 2

    def words():
        k = 0
        while True:
            block = hashlib.sha256(seed + k.to_bytes(8, "big")).digest()
            for i in range(0, 32, 4):
                yield int.from_bytes(block[i : i + 4], "big")
            k += 1

    stream = words()

    def uniform(n):
        limit = 2**32 - 2**32 % n
        while True:
            u = next(stream)
            if u < limit:
                return u % n

    for i in range(107, 0, -1):
        j = uniform(i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    m = uniform(100)
    return [deck[s:100:4] for s in range(4)], deck[100:], deck[m], m % 4


@pytest.mark.parametrize("seed", [bytes(32), SEED, bytes(range(32)), bytes.fromhex("ff" * 32)])
def test_the_deal_is_a_function_of_the_seed_with_its_commitment(seed):
    state = given(*seated())
    [event] = when(state, DealHand(seed))
    assert isinstance(event, HandDealt)
    assert event.commitment == hashlib.sha256(seed).hexdigest()
    assert event.seed == seed.hex()
    hands, bottom, marked, marked_seat = reference_deal(seed)
    assert [[c.code for c in hand] for hand in event.hands] == hands
    assert [c.code for c in event.bottom] == bottom
    assert (event.marked_card.code, event.marked_seat) == (marked, marked_seat)
    assert event.marked_card in event.hands[event.marked_seat]
    assert [len(h) for h in event.hands] == [25, 25, 25, 25] and len(event.bottom) == 8
    assert Counter(c for h in event.hands for c in h) + Counter(event.bottom) == Counter(DECK)
    d = rules_deal(seed)
    assert (event.hands, event.bottom, event.marked_card, event.marked_seat) == (
        d.hands,
        d.bottom,
        d.marked_card,
        d.marked_seat,
    )


def test_after_the_deal_the_marked_card_holder_bids_first():
    state = given(*seated())
    state = then(state, when(state, DealHand(SEED)))
    assert state.phase == "bidding"
    assert state.turn == state.marked_seat
    other = (state.marked_seat + 1) % 4
    assert refused(state, Bid(other, 1)) == "not_your_turn"
    assert when(state, Bid(state.marked_seat, 1)) == [BidMade(state.marked_seat, 1)]


def test_a_seed_is_32_bytes_and_a_hand_is_dealt_once():
    state = given(*seated())
    assert refused(state, DealHand(b"short")) == "invalid_command"
    assert refused(state, DealHand(SEED.hex())) == "invalid_command"
    state = then(state, when(state, DealHand(SEED)))
    assert refused(state, DealHand(SEED)) == "wrong_phase"


# --------------------------------------------------------------------------
# Bidding (§4.4-5)
# --------------------------------------------------------------------------


def dealt(deal: HandDealt = DEAL_A, ruleset=None, **options) -> State:
    return given(*seated(ruleset, **options), deal)


def test_bidding_goes_in_seat_order_from_the_marked_card_holder_wrapping_around():
    deal = craft({}, marked_seat=2)
    state = dealt(deal)
    assert state.turn == 2
    for seat, value in ((2, 0), (3, 1), (0, 0)):
        for other in range(4):
            if other != seat:
                assert refused(state, Bid(other, value)) == "not_your_turn"
        state = then(state, when(state, Bid(seat, value)))
    assert state.turn == 1
    events = when(state, Bid(1, 2))
    assert events == [BidMade(1, 2), LandlordChosen(1, 2, deal.bottom)]


def test_a_bid_must_exceed_the_highest_so_far():
    state = after(dealt(), Bid(0, 2))
    assert refused(state, Bid(1, 2)) == "bid_too_low"
    assert refused(state, Bid(1, 1)) == "bid_too_low"
    assert when(state, Bid(1, 3))[0] == BidMade(1, 3)
    assert when(state, Bid(1, 0)) == [BidMade(1, 0)]


@pytest.mark.parametrize("value", [4, -1, 5, True, "1", 1.0, None])
def test_a_bid_is_1_2_3_or_0(value):
    assert refused(dealt(), Bid(0, value)) == "invalid_bid"


def test_each_seat_bids_once_and_the_highest_bidder_is_landlord():
    state = after(dealt(), Bid(0, 1), Bid(1, 0), Bid(2, 2))
    events = when(state, Bid(3, 0))
    assert events == [BidMade(3, 0), LandlordChosen(2, 2, DEAL_A.bottom)]
    state = then(state, events)
    assert (state.landlord, state.bid) == (2, 2)
    assert state.bids == (1, 0, 2, 0)
    assert refused(state, Bid(0, 3)) == "wrong_phase"


def test_a_bid_of_three_ends_bidding_at_once():
    # given: seat 0 (marked) passes, seat 1 bids 3
    state = after(dealt(), Bid(0, 0))
    # when
    events = when(state, Bid(1, 3))
    # then: seats 2 and 3 never got their turn, and this is no 头撂
    assert events == [BidMade(1, 3), LandlordChosen(1, 3, DEAL_A.bottom)]
    state = then(state, events)
    assert state.bids == (0, 3, None, None)
    assert (state.landlord, state.bid, state.first_bid_three) == (1, 3, False)
    assert state.phase == "playing"
    assert refused(state, Bid(2, 0)) == "wrong_phase"


def test_all_four_pass_the_marked_card_holder_is_landlord_at_one():
    deal = craft({}, marked_seat=3)
    state = after(dealt(deal), Bid(3, 0), Bid(0, 0), Bid(1, 0))
    events = when(state, Bid(2, 0))
    assert events == [BidMade(2, 0), LandlordChosen(3, 1, deal.bottom)]
    state = then(state, events)
    assert (state.landlord, state.bid, state.turn) == (3, 1, 3)


def test_first_bidder_bids_three_is_toulia_and_opens_show_hand():
    state = dealt()
    events = when(state, Bid(0, 3))
    assert events == [BidMade(0, 3), LandlordChosen(0, 3, DEAL_A.bottom)]
    state = then(state, events)
    assert state.first_bid_three
    assert state.phase == "show_hand" and state.turn == 0
    assert refused(state, play(state, "3")) == "wrong_phase"


def test_the_landlord_takes_the_bottom():
    state = after(dealt(), Bid(0, 0), Bid(1, 1), Bid(2, 0))
    [_, chosen] = when(state, Bid(3, 0))
    assert chosen == LandlordChosen(1, 1, DEAL_A.bottom)
    state = then(state, [BidMade(3, 0), chosen])
    assert len(state.hands[1]) == 33
    assert Counter(state.hands[1]) == Counter(DEAL_A.hands[1]) + Counter(DEAL_A.bottom)
    assert [len(state.hands[s]) for s in (0, 2, 3)] == [25, 25, 25]
    assert state.turn == 1 and state.lead is None


# --------------------------------------------------------------------------
# 摊打 (§4.7)
# --------------------------------------------------------------------------


def test_show_hand_only_after_toulia():
    # bidding phase
    assert refused(dealt(), ShowHand(0, True)) == "wrong_phase"
    # landlord chosen without 头撂: play begins, no 摊打
    state = landlord_a()
    assert refused(state, ShowHand(0, True)) == "wrong_phase"
    # seat 1 bids 3 after seat 0 passed: not 头撂 either
    state = after(dealt(), Bid(0, 0), Bid(1, 3))
    assert state.phase == "playing"
    assert refused(state, ShowHand(1, True)) == "wrong_phase"


@pytest.mark.parametrize("value", [True, False])
def test_show_hand_after_toulia(value):
    state = after(dealt(), Bid(0, 3))
    [event] = when(state, ShowHand(0, value))
    assert event == HandShown(0, value, state.hands[0] if value else ())
    state = then(state, [event])
    assert state.show_hand is value
    assert state.phase == "playing" and state.turn == 0


def test_only_the_landlord_decides_show_hand():
    state = after(dealt(), Bid(0, 3))
    assert refused(state, ShowHand(1, True)) == "not_your_turn"
    assert refused(state, ShowHand(0, "yes")) == "invalid_command"
    assert refused(state, Pass(0)) == "wrong_phase"


# --------------------------------------------------------------------------
# 报到 (§4.8)
# --------------------------------------------------------------------------


def chosen_landlord(deal: HandDealt, ruleset=None, *, seat=0, bid=1, **options) -> State:
    """``seat`` (the marked seat) bids ``bid``, the others pass; 3 is 头撂."""
    events = [BidMade(seat, bid)]
    if bid != 3:
        events += [BidMade((seat + k) % 4, 0) for k in (1, 2, 3)]
    return given(*seated(ruleset, **options), deal, *events, LandlordChosen(seat, bid, deal.bottom))


@pytest.mark.parametrize("ruleset", RULESETS)
def test_seven_of_a_rank_may_report(ruleset):
    deal = craft({0: "3333333", 1: "3"})
    state = chosen_landlord(deal, ruleset)
    assert state.phase == "report" and state.turn == 0
    assert refused(state, play(state, "4")) == "wrong_phase"
    [event] = when(state, Report(0, "decline"))
    assert event == Reported(0, "decline", 0, (), ())


def test_six_of_a_rank_may_not_report():
    deal = craft({0: "333333", 1: "33"})
    state = chosen_landlord(deal)
    assert state.phase == "playing"
    assert refused(state, Report(0, "play")) == "wrong_phase"


def test_the_bottom_counts_for_report():
    deal = craft({0: "33333", 1: "3"}, bottom="33")
    assert sum(c.rank_char == "3" for c in deal.hands[0]) == 5
    assert chosen_landlord(deal).phase == "report"


def test_four_jokers_report_only_under_shanghai_platform():
    deal = craft({0: "BBRR"})
    state = chosen_landlord(deal, "shanghai-platform")
    assert state.phase == "report"
    [event] = when(state, Report(0, "play"))
    assert event.units == 1 and sorted(c.code for c in event.cards) == ["BJ", "BJ", "RJ", "RJ"]
    assert chosen_landlord(deal, "shanghai-local").phase == "playing"


@pytest.mark.parametrize("ruleset, units", [("shanghai-platform", 5), ("shanghai-local", 4)])
def test_report_units(ruleset, units):
    hand, bottom = split33("3333333 4444444 5555555 6666666 BBRR 7")
    deal = craft({0: hand, 1: "3456"}, bottom=bottom)
    state = chosen_landlord(deal, ruleset)
    [event] = when(state, Report(0, "play"))
    assert event.units == units
    assert len(event.cards) == 28 + (4 if units == 5 else 0)


def test_report_takes_play_no_play_or_decline_from_the_landlord():
    state = chosen_landlord(DEAL_REPORT)
    assert state.phase == "report"
    assert refused(state, Report(0, "maybe")) == "invalid_report"
    assert refused(state, Report(1, "play")) == "not_your_turn"


def test_report_comes_after_show_hand():
    state = chosen_landlord(DEAL_REPORT, bid=3)
    assert state.phase == "show_hand"
    assert refused(state, Report(0, "play")) == "wrong_phase"
    state = then(state, when(state, ShowHand(0, False)))
    assert state.phase == "report"


@pytest.mark.parametrize("unit, landlord_gain", [("1.00", "96.00"), ("0.50", "48.00")])
def test_report_no_play_ends_the_hand_as_a_landlord_win(unit, landlord_gain):
    # given: 明王 (marked small joker), 头撂 (bid 3), 摊打: M = 2 × 4/3 × 2 = 16/3; N = 2
    state = chosen_landlord(DEAL_REPORT, bid=3, unit=unit)
    state = then(state, when(state, ShowHand(0, True)))
    assert state.phase == "report"
    # when
    events = when(state, Report(0, "no_play"))
    # then: the reported cards are shown, and the hand ends at once
    reported, ended = events
    assert reported.value == "no_play" and reported.units == 2
    assert sorted(reported.locked) == [rank_index("3"), rank_index("4")]
    assert Counter(c.rank_char for c in reported.cards) == Counter({"3": 8, "4": 7})
    assert isinstance(ended, HandEnded)
    assert ended.seed == DEAL_REPORT.seed
    result = ended.result.to_json()
    assert result["winner"] == "landlord" and result["landlord"] == 0 and result["bid"] == 3
    assert result["factors"] == {
        "marked_joker": True,
        "first_bid_three": True,
        "show_hand": True,
        "report": "no_play",
        "report_units": 2,
        "bombs": 0,
    }
    assert result["multiplier"] == "16/3"
    # landlord wins unit × bid × M × 3 × N; each farmer loses unit × bid × M × N
    farmer = -Decimal(landlord_gain) / 3
    assert result["settlement"]["gross"] == amounts(landlord_gain, farmer, farmer, farmer)
    assert_zero_sum(result["settlement"])
    state = then(state, events)
    assert state.phase == "ended"
    assert refused(state, Play(0, state.hands[0][:1])) == "match_ended"


def report_play(state: State) -> State:
    state = then(state, when(state, Report(0, "play")))
    assert state.report == "play" and state.phase == "playing"
    return state


@pytest.mark.parametrize(
    "ranks", ["3", "33", "333", "3333", "3333333", "33344", "44", "4444", "444444"]
)
def test_report_play_reported_ranks_only_as_whole_bombs(ranks):
    state = report_play(chosen_landlord(DEAL_REPORT))
    assert refused(state, play(state, ranks)) == "must_play_whole_reported_bomb"


def test_report_play_whole_reported_bombs_are_played():
    state = report_play(chosen_landlord(DEAL_REPORT))
    [event] = when(state, play(state, "33333333"))
    assert (event.combination, event.rank) == ("bomb", "3")
    state = pass_until(then(state, [event]), 0)
    [event] = when(state, play(state, "4444444"))
    assert (event.combination, event.rank) == ("bomb", "4")


def test_report_play_jokers_only_as_joker_bomb():
    state = report_play(chosen_landlord(craft({0: "BBRR"})))
    assert refused(state, play(state, "BB")) == "must_play_whole_reported_bomb"
    assert refused(state, play(state, "R")) == "must_play_whole_reported_bomb"
    [event] = when(state, play(state, "BBRR"))
    assert event.combination == "joker_bomb"


def test_report_decline_leaves_the_ranks_free():
    state = chosen_landlord(DEAL_REPORT)
    state = then(state, when(state, Report(0, "decline")))
    assert state.report == "decline" and not state.locked
    [event] = when(state, play(state, "33"))
    assert event.combination == "pair"


def farmer_1_down_to_its_last_card(state):
    """From the landlord's lead on DEAL_REPORT: seat 1 takes every trick until it holds one 4."""
    state = lead_lowest(state)
    state = after(state, play(state, "2", 1))
    state = pass_until(state, 1)
    state = after(state, play(state, "5566778899TTJJQQKKAA", 1))
    state = pass_until(state, 1)
    state = after(state, play(state, "222", 1))
    return pass_until(state, 1)


def test_a_declined_report_is_no_factor_of_the_result():
    # given: 明王 ×2; seat 0 landlord at 1, eligible for 报到, declines it
    state = chosen_landlord(DEAL_REPORT)
    state = farmer_1_down_to_its_last_card(then(state, when(state, Report(0, "decline"))))
    # when: seat 1 plays its last card
    _, ended = when(state, play(state, "4", 1))
    # then: the result's factors say no 报到 (null, as docs/hand-record.md has it), and
    # the landlord pays as after any loss
    factors = ended.result.to_json()["factors"]
    assert (factors["report"], factors["report_units"]) == (None, 0)
    assert ended.result.to_json()["multiplier"] == "2"
    assert ended.result.to_json()["settlement"]["gross"] == amounts(-6, 2, 2, 2)


def test_a_hand_ended_stored_before_version_2_reads_a_decline_as_no_report():
    # given: the same hand, its hand_ended as schema version 1 wrote it ("decline")
    state = chosen_landlord(DEAL_REPORT)
    state = farmer_1_down_to_its_last_card(then(state, when(state, Report(0, "decline"))))
    _, ended = when(state, play(state, "4", 1))
    old = json.loads(json.dumps(ended.payload()))
    old["result"]["factors"]["report"] = "decline"
    # when: it is read back
    read = Event.from_payload("hand_ended", 1, old)
    # then: it is today's event, equal to the one written now
    assert read == ended and read.version == 2
    # and an old event of a hand with a real 报到 is read unchanged
    played = json.loads(json.dumps(ended.payload()))
    played["result"]["factors"].update(report="play", report_units=2)
    assert Event.from_payload("hand_ended", 1, played).result.to_json() == played["result"]


def test_report_play_lost_by_the_landlord_costs_the_landlord_nothing():
    # given: 明王 ×2, 报到 打 ×2; seat 0 landlord at 1
    state = farmer_1_down_to_its_last_card(report_play(chosen_landlord(DEAL_REPORT)))
    # when: seat 1 plays its last card
    played, ended = when(state, play(state, "4", 1))
    # then: the farmers win, and the landlord pays nothing
    assert played.seat == 1
    result = ended.result.to_json()
    assert result["winner"] == "farmers"
    assert result["factors"]["report"] == "play" and result["factors"]["report_units"] == 2
    assert result["multiplier"] == "4"
    assert result["settlement"]["gross"] == amounts(0, 0, 0, 0)
    assert result["settlement"]["net"] == amounts(0, 0, 0, 0)
    assert_zero_sum(result["settlement"])


# --------------------------------------------------------------------------
# Play and pass (§4.9)
# --------------------------------------------------------------------------


def test_the_landlord_leads():
    state = landlord_a()
    assert refused(state, play(state, "2", 1)) == "not_your_turn"
    assert refused(state, Pass(1)) == "not_your_turn"
    [event] = when(state, play(state, "3"))
    assert event == Played(0, cards(state, 0, "3"), "single", "3")


def test_the_leader_cannot_pass():
    assert refused(landlord_a(), Pass(0)) == "leader_cannot_pass"


def test_cards_not_in_hand():
    state = landlord_a()
    assert refused(state, Play(0, parse_cards("S2"))) == "cards_not_in_hand"  # no 2 held
    # three 3s held, four played
    assert (
        refused(state, Play(0, cards(state, 0, "333") + parse_cards("S3"))) == "cards_not_in_hand"
    )


def test_cards_not_in_hand_by_card_code():
    """A card code the seat does not hold is refused, even when it holds that rank in
    another suit (the two decks hold each code twice, the hand only what was dealt)."""
    state = landlord_a()
    held = {c.code for c in state.hands[0]}
    missing = next(c for c in DECK if c.rank_char == "3" and c.code not in held)
    assert refused(state, Play(0, (missing,))) == "cards_not_in_hand"


@pytest.mark.parametrize(
    "ranks", ["3334", "34", "3345", "3456", "44556", "QQKKAA3", "333444"[:5] + "5"]
)
def test_invalid_combination(ranks):
    state = landlord_a()
    assert refused(state, play(state, ranks)) == "invalid_combination"


def test_does_not_beat():
    state = landlord_a()
    state = after(state, play(state, "44"))
    assert refused(state, play(state, "33", 1)) == "does_not_beat"
    assert refused(state, play(state, "2", 1)) == "does_not_beat"  # another type
    assert refused(state, play(state, "44", 1)) == "does_not_beat"  # not strictly higher
    assert when(state, play(state, "55", 1))[0].combination == "pair"


def test_a_sequence_is_beaten_only_by_the_same_length():
    state = landlord_a()
    state = after(state, play(state, "334455"))
    assert refused(state, play(state, "44556677", 1)) == "does_not_beat"
    assert when(state, play(state, "445566", 1))[0].rank == "6"


def test_three_passes_return_the_lead_to_the_last_player():
    state = landlord_a()
    state = after(state, play(state, "KK"))
    events = []
    for seat in (1, 2, 3):
        [event] = when(state, Pass(seat))
        assert event == Passed(seat)
        state = then(state, [event])
        events.append(event)
    assert state.turn == 0 and state.lead is None
    assert refused(state, Pass(0)) == "leader_cannot_pass"
    # the leader may play anything, lower or of another type
    assert when(state, play(state, "3"))[0].combination == "single"
    assert when(state, play(state, "334455"))[0].combination == "pair_chain"


def test_fewer_than_three_passes_keep_the_play_to_beat():
    state = landlord_a()
    state = after(state, play(state, "3"), Play(1, cards(state, 1, "2")), Pass(2), Pass(3))
    assert state.turn == 0 and state.lead is not None
    assert refused(state, play(state, "4")) == "does_not_beat"
    state = then(state, when(state, Pass(0)))
    assert state.turn == 1 and state.lead is None  # seat 1 played last: it leads


def test_the_landlord_emptying_its_hand_wins():
    state = landlord_a()
    state = pass_until(after(state, play(state, PC)), 0)
    events = when(state, play(state, "3456789TJ"))
    played, ended = events
    assert played.combination == "straight" and isinstance(ended, HandEnded)
    assert ended.seed == DEAL_A.seed
    result = ended.result.to_json()
    assert result["winner"] == "landlord" and result["landlord"] == 0 and result["bid"] == 1
    assert result["factors"] == {
        "marked_joker": False,
        "first_bid_three": False,
        "show_hand": False,
        "report": None,
        "report_units": 0,
        "bombs": 0,
    }
    assert result["multiplier"] == "1"
    assert result["settlement"]["gross"] == amounts(3, -1, -1, -1)
    assert result["settlement"]["penalty"] == amounts(0, 0, 0, 0)
    assert_zero_sum(result["settlement"])
    state = then(state, events)
    assert state.phase == "ended" and state.winner == "landlord" and state.seed == DEAL_A.seed


def test_a_farmer_emptying_its_hand_wins_for_all_farmers():
    state = landlord_a(unit="2.00")
    state = after(state, play(state, "3"), Play(1, cards(state, 1, "2")))
    state = pass_until(state, 1)
    played, ended = when(state, play(state, PC))
    assert played.seat == 1
    result = ended.result.to_json()
    assert result["winner"] == "farmers"
    assert result["settlement"]["gross"] == amounts(-6, 2, 2, 2)
    assert ended.seed == DEAL_A.seed
    assert_zero_sum(result["settlement"])


@pytest.mark.parametrize(
    "bombs_double, multiplier, landlord_gain", [(True, "2", 6), (False, "1", 3)]
)
def test_each_bomb_doubles_when_bombs_double(bombs_double, multiplier, landlord_gain):
    state = chosen_landlord(DEAL_C, bombs_double=bombs_double)
    assert state.phase == "playing" and len(state.hands[0]) == 33
    for ranks in ("3333", "445566778899TTJJQQKKAA", "789TJ"):
        state = pass_until(after(state, play(state, ranks)), 0)
    _, ended = when(state, play(state, "22"))
    result = ended.result.to_json()
    assert result["factors"]["bombs"] == 1
    assert result["multiplier"] == multiplier
    gain = Decimal(landlord_gain)
    assert result["settlement"]["gross"] == amounts(gain, -gain / 3, -gain / 3, -gain / 3)


def test_toulia_show_hand_and_marked_joker_multiply():
    deal = craft({0: PC + "B", 1: "2" + PC}, bottom="3456789T", marked="B")
    state = chosen_landlord(deal, bid=3)
    state = after(state, ShowHand(0, True))
    assert state.phase == "playing"
    state = after(state, play(state, "3"), Play(1, cards(state, 1, "2")))
    state = pass_until(state, 1)
    _, ended = when(state, play(state, PC))
    result = ended.result.to_json()
    # 明王 ×2, 头撂 ×4/3, 摊打 ×2 = 16/3; S = 1 × 3 × 16/3 = 16
    assert result["multiplier"] == "16/3"
    assert result["settlement"]["gross"] == amounts(-48, 16, 16, 16)


# --------------------------------------------------------------------------
# Bomb limits (§4.10)
# --------------------------------------------------------------------------


def bombs_in_a_row(state: State, seat: int, bombs: list[str], limit: int | None) -> State:
    """The landlord leads a single; ``seat`` bombs, everyone passes, it bombs again…
    Every bomb up to ``limit`` is accepted, the next one refused."""
    assert state.turn == state.landlord
    state = pass_until(lead_lowest(state), seat)
    for n, bomb in enumerate(bombs):
        command = play(state, bomb, seat)
        if limit is not None and n == limit:
            assert state.bombs_left(seat) == 0
            assert refused(state, command) == "bomb_limit_reached"
            return state
        assert state.bombs_left(seat) == (None if limit is None else limit - n)
        [event] = when(state, command)
        assert event.combination in ("bomb", "joker_bomb")
        state = pass_until(then(state, [event]), seat)
    assert limit is None or limit >= len(bombs)
    return state


def platform_bids_1_2_3() -> State:
    """Seat 0 bids 1, seat 1 bids 2, seat 2 bids 3: seat 3 never gets a turn."""
    state = given(
        *seated("shanghai-platform"),
        DEAL_BOMBS,
        *bids((0, 1), (1, 2), (2, 3)),
        LandlordChosen(2, 3, DEAL_BOMBS.bottom),
    )
    assert state.phase == "playing" and state.landlord == 2 and state.bids == (1, 2, 3, None)
    return state


def platform_passed() -> State:
    """Seats 0 and 1 pass, seat 2 bids 3: seat 3 never gets a turn."""
    state = given(
        *seated("shanghai-platform"),
        DEAL_BOMBS,
        *bids((0, 0), (1, 0), (2, 3)),
        LandlordChosen(2, 3, DEAL_BOMBS.bottom),
    )
    assert state.phase == "playing" and state.bids == (0, 0, 3, None)
    return state


def test_platform_farmer_who_bid_one_bombs_once():
    state = bombs_in_a_row(platform_bids_1_2_3(), 0, ["3333", "4444"], 1)
    # at its limit it still plays what is no bomb
    assert when(state, Play(0, (min(state.hands[0]),)))[0].combination == "single"


def test_platform_farmer_who_bid_two_bombs_twice():
    bombs_in_a_row(platform_bids_1_2_3(), 1, ["6666", "7777", "8888"], 2)


def test_platform_farmer_who_never_bid_has_no_limit():
    state = bombs_in_a_row(platform_bids_1_2_3(), 3, ["QQQQ", "KKKK", "AAAA"], None)
    assert state.bombs_played[3] == 3 and state.bombs_left(3) is None


def test_platform_farmer_who_passed_bombs_once():
    bombs_in_a_row(platform_passed(), 0, ["3333", "4444"], 1)
    bombs_in_a_row(platform_passed(), 1, ["6666", "7777"], 1)


def test_platform_joker_bomb_counts_towards_the_limit():
    bombs_in_a_row(platform_passed(), 1, ["BBRR", "6666"], 1)
    bombs_in_a_row(platform_bids_1_2_3(), 1, ["6666", "BBRR", "7777"], 2)


def test_the_landlord_has_no_bomb_limit():
    state = platform_bids_1_2_3()
    bombs = ["9999", "TTTT", "JJJJ"]
    for bomb in bombs:
        assert state.bombs_left(2) is None
        state = pass_until(after(state, play(state, bomb, 2)), 2)
    assert state.bombs_played[2] == 3


def test_bomb_limits_count_per_seat():
    # given: landlord 2 leads; seat 0 (bid 1: one bomb), seat 1 (bid 2: two) and seat 3
    # (never bid: no limit) each bomb once
    state = lead_lowest(platform_bids_1_2_3())
    state = after(state, Pass(3), play(state, "3333", 0))
    state = after(state, play(state, "6666", 1), Pass(2))
    state = after(state, play(state, "QQQQ", 3))
    assert state.bombs_played == (1, 1, 0, 1) and state.bombs == 3
    assert (state.bombs_left(0), state.bombs_left(1), state.bombs_left(2), state.bombs_left(3)) == (
        0,
        1,
        None,
        None,
    )
    state = after(state, Pass(0), Pass(1), Pass(2))
    state = after(state, play(state, "A", 3))
    # when / then: seat 0 is at its limit, seat 1 is not
    assert refused(state, play(state, "4444", 0)) == "bomb_limit_reached"
    state = after(state, Pass(0))
    [event] = when(state, play(state, "7777", 1))
    assert event.combination == "bomb"


def local_landlord(bid: int) -> State:
    events = [BidMade(0, bid)] + ([] if bid == 3 else bids((1, 0), (2, 0), (3, 0)))
    state = given(
        *seated("shanghai-local"), DEAL_BOMBS, *events, LandlordChosen(0, bid, DEAL_BOMBS.bottom)
    )
    if bid == 3:
        state = after(state, ShowHand(0, False))
    assert state.phase == "playing" and state.landlord == 0
    return state


@pytest.mark.parametrize("bid, limit", [(1, 1), (2, 2), (3, None)])
def test_local_bomb_limit_by_the_landlord_bid(bid, limit):
    for farmer, bombs in ((1, ["6666", "7777", "8888"]), (3, ["QQQQ", "KKKK", "AAAA"])):
        bombs_in_a_row(local_landlord(bid), farmer, bombs, limit)


def test_local_passed_farmer_after_bid_three_has_no_limit():
    # under shanghai-platform a farmer who passed bombs once; under shanghai-local the
    # landlord's bid of 3 lifts every limit
    state = given(
        *seated("shanghai-local"),
        DEAL_BOMBS,
        *bids((0, 0), (1, 0), (2, 3)),
        LandlordChosen(2, 3, DEAL_BOMBS.bottom),
    )
    bombs_in_a_row(state, 0, ["3333", "4444", "5555"], None)


def test_local_four_jokers_are_no_bomb():
    state = pass_until(lead_lowest(local_landlord(3)), 1)
    assert refused(state, play(state, "BBRR", 1)) == "invalid_combination"


# --------------------------------------------------------------------------
# Disconnect and resume (§5 会员掉线)
# --------------------------------------------------------------------------


def test_a_disconnected_seat_is_played_by_the_system():
    state = dealt()
    assert when(state, Disconnect(0)) == [Disconnected(0, "left")]
    state = after(state, Disconnect(0, "deadline"))
    assert state.disconnected[0]
    assert refused(state, Bid(0, 1)) == "seat_under_system_control"
    assert when(state, Bid(0, 1, BOT)) == [BidMade(0, 1, BOT)]


def test_the_system_does_not_act_for_a_connected_player():
    state = dealt()
    assert refused(state, Bid(0, 1, BOT)) == "seat_not_under_system_control"
    state = landlord_a()
    assert refused(state, play(state, "3", by=BOT)) == "seat_not_under_system_control"
    assert refused(dealt(), Bid(0, 1, "robot")) == "invalid_command"


def test_system_plays_and_passes_for_a_disconnected_seat():
    state = after(landlord_a(), Disconnect(0), Disconnect(1))
    assert refused(state, play(state, "3")) == "seat_under_system_control"
    [event] = when(state, play(state, "3", by=BOT))
    assert event.by == BOT
    state = then(state, [event])
    assert refused(state, Pass(1)) == "seat_under_system_control"
    assert when(state, Pass(1, BOT)) == [Passed(1, BOT)]


def test_show_hand_and_report_by_the_system():
    state = after(chosen_landlord(DEAL_REPORT, bid=3), Disconnect(0))
    assert refused(state, ShowHand(0, False)) == "seat_under_system_control"
    state = then(state, when(state, ShowHand(0, False, BOT)))
    assert refused(state, Report(0, "decline")) == "seat_under_system_control"
    [event] = when(state, Report(0, "decline", BOT))
    assert event.by == BOT


def test_resume_gives_control_back():
    state = after(dealt(), Disconnect(0))
    assert when(state, Resume(0)) == [Resumed(0)]
    state = after(state, Resume(0))
    assert not state.disconnected[0]
    assert refused(state, Bid(0, 1, BOT)) == "seat_not_under_system_control"
    assert when(state, Bid(0, 1)) == [BidMade(0, 1)]


def test_disconnect_and_resume_errors():
    state = after(dealt(), Disconnect(2))
    assert refused(state, Disconnect(2)) == "already_disconnected"
    assert refused(state, Resume(1)) == "not_disconnected"
    assert refused(state, Disconnect(1, "tired")) == "invalid_command"
    assert refused(state, Disconnect(4)) == "invalid_seat"
    assert refused(state, Resume(4)) == "invalid_seat"


def test_bot_seats():
    state = given(*seated(bots=(0,)), DEAL_A)
    assert refused(state, Disconnect(0)) == "bot_seat"
    assert refused(state, Resume(0)) == "not_disconnected"
    assert refused(state, Bid(0, 1)) == "seat_under_system_control"
    assert when(state, Bid(0, 1, BOT)) == [BidMade(0, 1, BOT)]


def test_no_disconnect_outside_a_hand():
    state = given(*seated())
    assert refused(state, Disconnect(0)) == "wrong_phase"
    assert refused(state, Resume(0)) == "wrong_phase"


def test_the_first_seat_to_disconnect_pays_the_penalty_and_a_later_one_none():
    # given: DEAL_C, landlord 0 at 1; seat 2 disconnects first (and comes back), seat 3 later
    state = chosen_landlord(DEAL_C)
    state = after(state, Disconnect(2), Resume(2), Disconnect(3, "deadline"), Disconnect(2))
    assert state.first_disconnect == 2
    for ranks in ("3333", "445566778899TTJJQQKKAA", "789TJ"):
        state = pass_until(after(state, play(state, ranks)), 0)
    # when
    _, ended = when(state, play(state, "22"))
    # then: one bomb (M = 2, S = 2); the penalty is 3 × unit × bid × M without bombs = 3
    result = ended.result.to_json()
    assert result["first_disconnect"] == 2
    s = result["settlement"]
    assert s["gross"] == amounts(6, -2, -2, -2)
    assert s["penalty"] == amounts(0, 0, 3, 0)
    assert s["net"] == amounts(6, -2, -5, -2)
    assert s["house"] == "3.00"
    assert_zero_sum(s)


def test_the_penalty_stands_when_the_disconnected_seat_wins():
    state = after(landlord_a(), Disconnect(1))
    state = after(state, play(state, "3"), Play(1, cards(state, 1, "2"), BOT))
    state = after(state, Resume(1))
    state = pass_until(state, 1)
    _, ended = when(state, play(state, PC, 1))
    s = ended.result.to_json()["settlement"]
    assert ended.result.to_json()["winner"] == "farmers"
    assert s["gross"] == amounts(-3, 1, 1, 1)
    assert s["penalty"] == amounts(0, 3, 0, 0)
    assert s["net"] == amounts(-3, -2, 1, 1)
    assert_zero_sum(s)


def test_the_penalty_counts_every_factor_but_bombs():
    # 明王 and 头撂 count for the penalty: 3 × 1 × 3 × (2 × 4/3) = 24
    deal = craft({0: PC + "B", 1: "2" + PC}, bottom="3456789T", marked="B")
    state = after(given(*seated(), deal), Disconnect(2), Bid(0, 3), ShowHand(0, False))
    state = after(state, play(state, "3"), Play(1, cards(state, 1, "2")))
    state = pass_until(state, 1)
    _, ended = when(state, play(state, PC))
    s = ended.result.to_json()["settlement"]
    assert ended.result.to_json()["multiplier"] == "8/3"
    assert s["gross"] == amounts(-24, 8, 8, 8)
    assert s["penalty"] == amounts(0, 0, 24, 0)
    assert_zero_sum(s)


# --------------------------------------------------------------------------
# After the end; cap and rake (§5)
# --------------------------------------------------------------------------


def ended_a(**options) -> tuple[State, HandEnded]:
    state = landlord_a(**options)
    state = pass_until(after(state, play(state, PC)), 0)
    events = when(state, play(state, "3456789TJ"))
    return then(state, events), events[-1]


@pytest.mark.parametrize(
    "command",
    [
        Bid(0, 1),
        Bid(1, 0),
        ShowHand(0, True),
        Report(0, "play"),
        Pass(1),
        Pass(0),
        Play(0, parse_cards("S3")),
        Disconnect(1),
        Resume(1),
        TakeSeat(0, "erin"),
        DealHand(SEED),
    ],
    ids=lambda c: c.name,
)
def test_commands_after_the_end_are_refused(command):
    state, _ = ended_a()
    assert state.phase == "ended"
    assert refused(state, command) == "match_ended"


def test_create_match_after_the_end():
    state, _ = ended_a()
    assert refused(state, CreateMatch("match-1", table())) == "match_exists"


def test_the_cap_scales_every_transfer_rounding_toward_zero():
    # S = 1, the landlord would win 3.00; cap 2.00 scales by 2/3: each farmer −0.666… → −0.66
    _, ended = ended_a(cap="2.00", rake="0.05")
    s = ended.result.to_json()["settlement"]
    assert s["gross"] == amounts(3, -1, -1, -1)
    assert s["after_cap"] == amounts("1.98", "-0.66", "-0.66", "-0.66")
    assert s["rake"] == amounts("0.10", 0, 0, 0)  # 5 % of 1.98 = 0.099, half-up
    assert s["net"] == amounts("1.88", "-0.66", "-0.66", "-0.66")
    assert s["house"] == "0.10"
    assert_zero_sum(s)


def test_the_cap_when_the_farmers_win():
    state = landlord_a(cap="2.00", unit="1.00")
    state = after(state, play(state, "3"), Play(1, cards(state, 1, "2")))
    state = pass_until(state, 1)
    _, ended = when(state, play(state, PC))
    s = ended.result.to_json()["settlement"]
    assert s["after_cap"] == amounts("-1.98", "0.66", "0.66", "0.66")
    assert_zero_sum(s)


def test_no_scaling_under_the_cap():
    _, ended = ended_a(cap="3.00")
    assert ended.result.to_json()["settlement"]["after_cap"] == amounts(3, -1, -1, -1)


# --------------------------------------------------------------------------
# Whole hands: refusals, serialisation, replay, zero-sum
# --------------------------------------------------------------------------


def random_command(state: State, rng: random.Random):
    """A uniformly random legal decision of the seat to act (what a bot may do)."""
    seat = state.turn
    by = by_for(state, seat)
    if state.phase == "bidding":
        return Bid(seat, rng.choice([0] + [v for v in (1, 2, 3) if v > state.highest_bid]), by)
    if state.phase == "show_hand":
        return ShowHand(seat, rng.random() < 0.5, by)
    if state.phase == "report":
        return Report(seat, rng.choice(["play", "no_play", "decline"]), by)
    options = list(
        legal_plays(
            state.hands[seat],
            state.lead,
            ruleset=state.table.ruleset,
            bombs_left=state.bombs_left(seat),
            locked=state.locked if seat == state.landlord else frozenset(),
        )
    )
    if state.lead is not None:
        options.append(None)
    choice = rng.choice(options)
    return (
        Pass(seat, by)
        if choice is None
        else Play(seat, pick_cards(state.hands[seat], choice.counts), by)
    )


def play_out(
    events: list[Event], rng: random.Random, disconnects: float = 0.0
) -> tuple[list[Event], State]:
    """Plays a hand from these events to its end with random legal decisions; before each
    turn a player's seat disconnects or resumes with probability ``disconnects``."""
    log = list(events)
    state = replay(log)
    while state.phase != "ended":
        seat = rng.randrange(4)
        if rng.random() < disconnects and not state.seats[seat].bot:
            command = (
                Resume(seat)
                if state.disconnected[seat]
                else Disconnect(seat, rng.choice(["left", "deadline"]))
            )
        else:
            command = random_command(state, rng)
        for event in decide(state, command):
            state = evolve(state, event)
            log.append(event)
    return log, state


def simulated_hands(count: int = 24):
    """Whole hands of random play on both rulesets and a few table settings, some with
    player seats that disconnect and resume."""
    for i in range(count):
        rng = random.Random(i)
        ruleset = RULESETS[i % 2]
        options = dict(
            unit=rng.choice(["1.00", "0.50", "2.00"]),
            cap=rng.choice([None, "5.00"]),
            rake=rng.choice(["0.00", "0.05"]),
            bombs_double=rng.random() < 0.7,
        )
        bots = tuple(s for s in range(4) if rng.random() < 0.4)
        log = seated(ruleset, bots=bots, **options)
        log += decide(replay(log), DealHand(rng.randbytes(32)))
        yield play_out(log, rng, disconnects=0.05)


@pytest.fixture(scope="module")
def hands():
    return list(simulated_hands())


def test_events_round_trip_through_json_and_payload(hands):
    for log, _ in hands:
        for event in log:
            document = event.to_json()
            assert document["type"] == event.type and document["version"] == event.version
            assert json.loads(json.dumps(document)) == document
            assert Event.from_json(json.loads(json.dumps(document))) == event
            payload = json.loads(json.dumps(event.payload()))
            assert Event.from_payload(event.type, event.version, payload) == event


def test_unknown_event_type_or_version():
    event = BidMade(0, 1)
    with pytest.raises(GameError) as info:
        Event.from_payload("bidding", 1, event.payload())
    assert info.value.code == "unknown_event"
    with pytest.raises(GameError) as info:
        Event.from_payload("bid", 99, event.payload())
    assert info.value.code == "unknown_event"


def test_replaying_the_events_rebuilds_an_equal_state(hands):
    for log, final in hands:
        assert replay(log) == final
        loaded = [Event.from_json(json.loads(json.dumps(e.to_json()))) for e in log]
        assert replay(loaded) == final
        # and every prefix: evolve is pure
        state = initial_state
        for n, event in enumerate(log):
            before = dict(state.__dict__)
            new = evolve(state, event)
            assert state.__dict__ == before
            assert new.version == n + 1
            state = new
        assert state == final


def test_every_hand_ends_with_a_zero_sum_settlement_and_its_seed(hands):
    for log, final in hands:
        assert final.phase == "ended"
        ended = log[-1]
        assert isinstance(ended, HandEnded)
        dealt_event = next(e for e in log if isinstance(e, HandDealt))
        assert ended.seed == dealt_event.seed
        assert hashlib.sha256(bytes.fromhex(ended.seed)).hexdigest() == dealt_event.commitment
        assert sum(isinstance(e, HandEnded) for e in log) == 1
        s = ended.result.to_json()["settlement"]
        assert_zero_sum(s)
        for i in range(4):
            assert Decimal(s["net"][i]) == Decimal(s["after_cap"][i]) - Decimal(
                s["rake"][i]
            ) - Decimal(s["penalty"][i])
        cap = final.table.cap
        if cap is not None:
            assert sum(Decimal(v) for v in s["after_cap"] if Decimal(v) > 0) <= cap
        first = next((e.seat for e in log if isinstance(e, Disconnected)), None)
        assert ended.result.to_json()["first_disconnect"] == first
        assert [Decimal(p) > 0 for p in s["penalty"]] == [seat == first for seat in range(4)]
        # the hand ended because a seat played its last card, or by 报到 不打
        if final.report != "no_play":
            last_play = log[-2]
            assert isinstance(last_play, Played) and final.hands[last_play.seat] == ()
            winner = "landlord" if last_play.seat == final.landlord else "farmers"
            assert ended.result.to_json()["winner"] == winner


def test_refused_commands_leave_the_state_unchanged(hands):
    """At every step of whole hands, random commands: each is either accepted (and ``can``
    agrees) or refused with a GameError that leaves the state as it was."""
    rng = random.Random(7)
    codes = Counter()
    for log, _ in hands[:8]:
        state = initial_state
        for event in log:
            state = evolve(state, event)
            if state.phase in ("new", "seating", "dealing"):
                continue
            for _ in range(4):
                seat = rng.randrange(4)
                by = rng.choice([PLAYER, BOT])
                own = list(state.hands[seat])
                command = rng.choice(
                    [
                        Bid(seat, rng.randrange(-1, 5), by),
                        ShowHand(seat, rng.random() < 0.5, by),
                        Report(seat, rng.choice(["play", "no_play", "decline", "later"]), by),
                        Play(seat, tuple(rng.sample(own, min(len(own), rng.randrange(1, 6)))), by),
                        Pass(seat, by),
                        Disconnect(seat),
                        Resume(seat),
                    ]
                )
                before = dict(state.__dict__)
                try:
                    events = decide(state, command)
                except GameError as exc:
                    codes[exc.code] += 1
                    assert not can(state, command)
                else:
                    assert can(state, command)
                    assert events and replay(events, state).version == state.version + len(events)
                assert state.__dict__ == before
    assert {"not_your_turn", "wrong_phase"} <= set(codes)
