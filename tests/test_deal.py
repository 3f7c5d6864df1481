"""The verifiable deal of docs/hand-record.md."""

import hashlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.rules import DECK, InvalidNotation, commitment, deal, parse_seed

KNOWN_SEED = bytes(range(32))


def test_known_answer():
    d = deal(KNOWN_SEED)
    assert [c.code for c in d.hands[0][:5]] == ["D7", "S4", "S3", "D2", "H7"]
    assert [c.code for c in d.bottom] == ["CT", "H9", "DJ", "D4", "S4", "D2", "H8", "SQ"]
    assert (d.marked_card.code, d.marked_seat) == ("D6", 0)
    assert d.marked_card in d.hands[0]
    assert d.commitment == hashlib.sha256(KNOWN_SEED).hexdigest()


@settings(max_examples=50)
@given(st.binary(min_size=32, max_size=32))
def test_the_deal_conserves_the_108_cards_and_is_a_function_of_the_seed(seed):
    d = deal(seed)
    assert [len(hand) for hand in d.hands] == [25, 25, 25, 25]
    assert len(d.bottom) == 8
    dealt = [card for hand in d.hands for card in hand] + list(d.bottom)
    assert Counter(dealt) == Counter(DECK)
    assert deal(seed) == d
    assert d.marked_card in d.hands[d.marked_seat]


def test_different_seeds_deal_differently():
    assert deal(KNOWN_SEED).hands != deal(bytes(32)).hands


def test_seed_notation():
    assert parse_seed(KNOWN_SEED.hex()) == KNOWN_SEED
    assert commitment(KNOWN_SEED) == hashlib.sha256(KNOWN_SEED).hexdigest()
    for bad in ["", "00", "zz" * 32, "0" * 63, "0" * 66]:
        with pytest.raises(InvalidNotation, match="seed"):
            parse_seed(bad)
    with pytest.raises(InvalidNotation):
        deal(b"short")
