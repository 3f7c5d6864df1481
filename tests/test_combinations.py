"""Classification and comparison (docs/rules.md §2-3), by example and against the independent
oracle in tests/oracle.py."""

import oracle
import pytest
from conftest import POOL, rank_strings, rulesets
from hypothesis import given, settings
from hypothesis import strategies as st

from service.rules import (
    SHANGHAI_LOCAL,
    SHANGHAI_PLATFORM,
    CombinationType,
    InvalidCombination,
    Ruleset,
    beats,
    classify,
    readings,
)


def engine_classify(cards, ruleset_name):
    try:
        c = classify(cards, Ruleset.by_name(ruleset_name))
    except InvalidCombination:
        return {"valid": False}
    return {"valid": True, "type": c.type.value, "rank": c.rank}


@pytest.mark.parametrize(
    "cards, kind, rank",
    [
        ("3333344444", "plane_with_pairs", "4"),
        ("AAA222KKAA", "plane_with_pairs", "2"),
        ("KKKAAA2233", "plane_with_pairs", "A"),
        ("JJJQQQKKK334455", "plane_with_pairs", "K"),
        ("23456", "straight", "6"),
        ("A23456789TJQK", "straight", "A"),
        ("222333", "plane", "3"),
        ("223344", "pair_chain", "4"),
        ("AA2233445566778899TTJJQQKK", "pair_chain", "A"),
        ("333RR", "full_house", "3"),
        ("22222222", "bomb", "2"),
    ],
)
def test_readings_beyond_the_vectors(cards, kind, rank):
    c = classify(cards)
    assert (c.type.value, c.rank) == (kind, rank)


def test_all_thirteen_ranks_have_two_readings_and_the_stronger_is_recorded():
    found = readings("A23456789TJQK")
    assert [r.rank for r in found] == ["K", "A"]
    assert classify("A23456789TJQK").rank == "A"


@pytest.mark.parametrize(
    "cards, rule",
    [
        ("", "no cards"),
        ("3334", "never single cards"),
        ("333345", "bomb"),
        ("BR", "no pair"),
        ("BBB", "hold 2"),
        ("333333333", "hold 8"),
        ("KA234", "consecutive"),
        ("3344", "at least 3"),
        ("QQQKKK3355", "plane_with_pairs"),
    ],
)
def test_invalid_sets_say_which_rule(cards, rule):
    with pytest.raises(InvalidCombination, match=rule):
        classify(cards)


def test_joker_bomb_only_in_the_platform_profile():
    assert classify("BBRR", SHANGHAI_PLATFORM).type is CombinationType.JOKER_BOMB
    with pytest.raises(InvalidCombination, match="shanghai-local"):
        classify("BBRR", SHANGHAI_LOCAL)


def test_bombs_order_by_size_then_rank():
    order = ["JJJJ", "KKKK", "88888", "333333", "3333333", "22222222", "BBRR"]
    for weaker, stronger in zip(order, order[1:]):
        assert beats(stronger, weaker) and not beats(weaker, stronger)


def test_non_bombs_need_the_same_length():
    assert not beats("45678", "3456789")
    assert beats("JJJQQQKKK334455", "777888999JJQQKK")
    assert not beats("QQQKKK3344", "777888999JJQQKK")


def test_wings_never_count():
    assert beats("QQQKKK3344", "JJJQQQAA22")
    assert not beats("JJJQQQAA22", "JJJQQQ3344")
    assert beats("AAA44", "KKK22") and not beats("QQQ22", "KKK33")


@pytest.mark.slow  # 800 cases through the brute-force oracle
@settings(max_examples=800)
@given(rank_strings(16), rulesets)
def test_classification_agrees_with_the_oracle(cards, ruleset):
    assert engine_classify(cards, ruleset) == oracle.classify(cards, ruleset)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(POOL), min_size=1, max_size=20), rulesets)
def test_classification_of_any_cards_agrees_with_the_oracle(cards, ruleset):
    text = "".join(cards)
    assert engine_classify(text, ruleset) == oracle.classify(text, ruleset)


@pytest.mark.slow  # 800 cases through the brute-force oracle
@settings(max_examples=800)
@given(rank_strings(12), rank_strings(12), rulesets)
def test_comparison_agrees_with_the_oracle(cards, over, ruleset):
    expected = oracle.beats(cards, over, ruleset)
    try:
        got = beats(cards, over, Ruleset.by_name(ruleset))
    except InvalidCombination:
        got = None
    assert got == expected
