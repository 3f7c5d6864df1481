"""Cards, ranks and their two notations (docs/rules.md §1).

A *card code* names one physical card (``S3``, ``HT``, ``BJ``); a *rank string* names a
multiset of ranks where suits do not matter (``TJQKA``, ``BBRR``). Inside the engine a
multiset of ranks is a *counts* tuple: ``counts[r]`` cards of rank index ``r``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import InvalidNotation

#: Rank characters in single-card order; a rank's index in this string is its rank index.
RANKS = "3456789TJQKA2BR"
SUITS = "SHCD"
NUM_RANKS = len(RANKS)

ACE = RANKS.index("A")
TWO = RANKS.index("2")
SMALL_JOKER = RANKS.index("B")
BIG_JOKER = RANKS.index("R")
#: Ranks that come in suits (3…2); the jokers are the two ranks above them.
SUITED_RANKS = range(SMALL_JOKER)

#: How many cards of each rank exist in the two decks.
COPIES = tuple(8 if r < SMALL_JOKER else 2 for r in range(NUM_RANKS))

_RANK_INDEX = {ch: i for i, ch in enumerate(RANKS)}

Counts = tuple[int, ...]


@dataclass(frozen=True, slots=True, order=True)
class Card:
    """One physical card. Two decks hold every card twice, so equal cards may be two cards."""

    rank: int
    suit: str  # one of SUITS, or "J" for the two jokers

    @classmethod
    def from_code(cls, code: object) -> Card:
        """Parses a card code: ``S3``, ``HT``, ``DA``, ``C2``, ``BJ`` or ``RJ``. Anything
        else, of any type, raises :class:`InvalidNotation` (compiled, a ``str`` parameter
        would raise ``TypeError`` first)."""
        card = _BY_CODE.get(code) if isinstance(code, str) else None
        if card is None:
            raise InvalidNotation(
                f"{code!r} is not a card code (suit SHCD + rank 3-9TJQKA2, or BJ/RJ)"
            )
        return card

    @property
    def code(self) -> str:
        if self.suit == "J":
            return RANKS[self.rank] + "J"
        return self.suit + RANKS[self.rank]

    @property
    def rank_char(self) -> str:
        return RANKS[self.rank]

    @property
    def is_joker(self) -> bool:
        return self.rank >= SMALL_JOKER

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"Card.from_code({self.code!r})"


def _all_cards() -> tuple[Card, ...]:
    suited = [Card(rank, suit) for rank in SUITED_RANKS for suit in SUITS]
    return tuple(suited) + (Card(SMALL_JOKER, "J"), Card(BIG_JOKER, "J"))


#: The 54 distinct cards of one deck, in canonical order (RLCard's: rank, then S H C D).
ONE_DECK = _all_cards()
_BY_CODE = {card.code: card for card in ONE_DECK}
#: The 108 cards of the two decks in the canonical order of docs/hand-record.md.
DECK = ONE_DECK + ONE_DECK


def rank_index(ch: str) -> int:
    try:
        return _RANK_INDEX[ch]
    except (KeyError, TypeError):
        raise InvalidNotation(f"{ch!r} is not a rank (one of {RANKS})") from None


def parse_ranks(text: str) -> Counts:
    """Parses a rank string (``"TJQKA"``, ``"33344"``) into counts. Order does not matter."""
    if not isinstance(text, str):
        raise InvalidNotation(f"a rank string must be a string, not {type(text).__name__}")
    counts = [0] * NUM_RANKS
    index = _RANK_INDEX
    for ch in text:
        r = index.get(ch)
        if r is None:
            raise InvalidNotation(f"{ch!r} in {text!r} is not a rank (one of {RANKS})")
        counts[r] += 1
    return tuple(counts)


def format_ranks(counts: Sequence[int]) -> str:
    """Writes counts as a rank string in single-card order: the inverse of :func:`parse_ranks`."""
    return "".join(RANKS[r] * n for r, n in enumerate(counts) if n)


def parse_cards(text: str | Iterable[str]) -> tuple[Card, ...]:
    """Parses card codes, given as one string (separated by spaces or commas) or as codes."""
    codes = text.replace(",", " ").split() if isinstance(text, str) else text
    return tuple(Card.from_code(code) for code in codes)


def format_cards(cards: Iterable[Card]) -> str:
    return " ".join(card.code for card in cards)


#: The counts of tuples of cards, by the tuple's identity (the entry keeps the tuple, so no
#: other object takes its id meanwhile). A hand's counts are asked again and again, by each
#: view of its seat and each check of a play from it, until the seat plays; counting its
#: cards took more than the rest of generating a reply.
_COUNTED: dict[int, tuple[tuple[Card, ...], Counts]] = {}
#: Tuples remembered at most; then the memory starts again.
_COUNTED_REMEMBERED = 1 << 12


def counts_of(cards: Iterable[Card]) -> Counts:
    counted = type(cards) is tuple
    if counted:
        known = _COUNTED.get(id(cards))
        if known is not None and known[0] is cards:
            return known[1]
    tally = [0] * NUM_RANKS
    for card in cards:
        tally[card.rank] += 1
    counts = tuple(tally)
    if counted:
        _remember(cards, counts)  # type: ignore[arg-type]
    return counts


def _remember(cards: tuple[Card, ...], counts: Counts) -> None:
    if len(_COUNTED) >= _COUNTED_REMEMBERED:
        _COUNTED.clear()
    _COUNTED[id(cards)] = (cards, counts)


#: The last :func:`take_out` of a tuple from a tuple, by the arguments' identity: a play's
#: check takes its cards out of the hand, then the event that records the play takes the
#: same cards out of the same hand (each scan of the hand was a twentieth of a turn).
_LAST_TAKEN: tuple[object, object, tuple[tuple[Card, ...], tuple[Card, ...]]] = (
    (),
    (),
    ((), ()),
)


def take_out(
    hand: Iterable[Card], cards: Iterable[Card]
) -> tuple[tuple[Card, ...], tuple[Card, ...]]:
    """The cards of ``hand`` left once each card of ``cards`` has taken out the first card
    equal to it, and the cards of ``cards`` that found none."""
    global _LAST_TAKEN
    last = _LAST_TAKEN
    if last[0] is hand and last[1] is cards:
        return last[2]
    remaining = list(hand)
    missing = []
    for card in cards:
        rank, suit = card.rank, card.suit
        for i, held in enumerate(remaining):
            # Card's equality spelled out: its __eq__, called for each card passed over,
            # took longer than the rest of a play's check.
            if held.rank == rank and held.suit == suit:
                del remaining[i]
                break
        else:
            missing.append(card)
    left = tuple(remaining)
    taken = (left, tuple(missing))
    if type(hand) is tuple and type(cards) is tuple:  # immutable: the same cards next time
        _LAST_TAKEN = (hand, cards, taken)
        known = _COUNTED.get(id(hand))
        if known is not None and known[0] is hand and not missing:
            # What is left of a counted hand is counted by difference: the seat's next
            # view asks for it, and counting its cards one by one cost several times more.
            _remember(left, tuple(map(operator.sub, known[1], counts_of(cards))))
    return taken


def check_possible(counts: Sequence[int]) -> None:
    """Raises :class:`InvalidNotation` when no two decks hold these ranks."""
    if len(counts) != NUM_RANKS:
        raise InvalidNotation(f"counts need {NUM_RANKS} entries, not {len(counts)}")
    for r, n in enumerate(counts):
        if n < 0 or n > COPIES[r]:
            raise InvalidNotation(
                f"rank {RANKS[r]} appears {n} times; the two decks hold {COPIES[r]}"
            )
