import pytest
from conftest import rank_strings
from hypothesis import given
from hypothesis import strategies as st

from service.rules import (
    DECK,
    Card,
    InvalidNotation,
    format_cards,
    format_ranks,
    parse_cards,
    parse_ranks,
)
from service.rules.cards import ONE_DECK


def test_card_codes_round_trip_for_every_card():
    for card in ONE_DECK:
        assert Card.from_code(card.code) == card
        assert str(card) == card.code
    assert [c.code for c in ONE_DECK[:5]] == ["S3", "H3", "C3", "D3", "S4"]
    assert [c.code for c in ONE_DECK[-2:]] == ["BJ", "RJ"]


def test_deck_holds_every_code_twice():
    assert len(DECK) == 108
    assert all(DECK.count(card) == 2 for card in ONE_DECK)


def test_jokers():
    assert Card.from_code("BJ").is_joker and Card.from_code("BJ").rank_char == "B"
    assert Card.from_code("RJ").rank > Card.from_code("BJ").rank > Card.from_code("S2").rank


@pytest.mark.parametrize(
    "code", ["", "S", "S1", "s3", "X3", "S10", "BJJ", "JB", "SJ ", "HB", "SR", None, 3]
)
def test_malformed_card_codes_say_what_is_wrong(code):
    with pytest.raises(InvalidNotation, match="card code") as exc:
        Card.from_code(code)
    assert isinstance(exc.value, ValueError)


@given(st.lists(st.sampled_from(DECK), max_size=40))
def test_card_lists_round_trip(cards):
    assert parse_cards(format_cards(cards)) == tuple(cards)


def test_parse_cards_accepts_commas_and_lists():
    assert parse_cards("S3, HT,BJ") == parse_cards(["S3", "HT", "BJ"])


@given(rank_strings(30))
def test_rank_strings_round_trip(text):
    counts = parse_ranks(text)
    assert parse_ranks(format_ranks(counts)) == counts
    assert sorted(format_ranks(counts)) == sorted(text)


def test_rank_strings_are_written_in_single_card_order():
    assert format_ranks(parse_ranks("R2A3B")) == "3A2BR"


@pytest.mark.parametrize("text", ["1", "10", "t", "S3", "3 4", "X"])
def test_malformed_rank_strings_say_which_character(text):
    with pytest.raises(InvalidNotation, match="is not a rank"):
        parse_ranks(text)
