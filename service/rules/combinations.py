"""The ten combinations (docs/rules.md §2) and how one beats another (§3).

A :class:`Combination` is a multiset of ranks read as one type. Strength is kept as
``top``: for sequences (``straight``, ``pair_chain``, ``plane``, ``plane_with_pairs``) the
top *position*, where ``A`` is 1 or 14, ``2`` is 2 and ``3``…``K`` are 3…13; for every
other type the rank index (``3`` = 0 … ``R`` = 14) of the rank that decides strength.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple

from .cards import (
    ACE,
    BIG_JOKER,
    COPIES,
    NUM_RANKS,
    RANKS,
    SMALL_JOKER,
    TWO,
    Card,
    Counts,
    counts_of,
    format_cards,
    format_ranks,
    parse_ranks,
)
from .errors import InvalidCombination
from .rulesets import DEFAULT_RULESET, Ruleset


class CombinationType(str, Enum):
    SINGLE = "single"
    PAIR = "pair"
    TRIPLE = "triple"
    STRAIGHT = "straight"
    PAIR_CHAIN = "pair_chain"
    PLANE = "plane"
    FULL_HOUSE = "full_house"
    PLANE_WITH_PAIRS = "plane_with_pairs"
    BOMB = "bomb"
    JOKER_BOMB = "joker_bomb"

    def __str__(self) -> str:
        return self.value

    @property
    def is_bomb(self) -> bool:
        return self is CombinationType.BOMB or self is CombinationType.JOKER_BOMB


SINGLE = CombinationType.SINGLE
PAIR = CombinationType.PAIR
TRIPLE = CombinationType.TRIPLE
STRAIGHT = CombinationType.STRAIGHT
PAIR_CHAIN = CombinationType.PAIR_CHAIN
PLANE = CombinationType.PLANE
FULL_HOUSE = CombinationType.FULL_HOUSE
PLANE_WITH_PAIRS = CombinationType.PLANE_WITH_PAIRS
BOMB = CombinationType.BOMB
JOKER_BOMB = CombinationType.JOKER_BOMB

SEQUENCE_TYPES = frozenset({STRAIGHT, PAIR_CHAIN, PLANE, PLANE_WITH_PAIRS})
#: Sequences by the number of cards of each rank, with their shortest length in ranks.
SEQUENCE_BY_WIDTH = {1: (STRAIGHT, 5), 2: (PAIR_CHAIN, 3), 3: (PLANE, 2)}
MIN_PLANE_WITH_PAIRS = 2
LOWEST_POSITION, HIGHEST_POSITION = 1, 14
JOKER_BOMB_COUNTS: Counts = (0,) * SMALL_JOKER + (2, 2)


def position_rank(position: int) -> int:
    """The rank index at a sequence position (1 and 14 are both ``A``)."""
    if position in (LOWEST_POSITION, HIGHEST_POSITION):
        return ACE
    if position == 2:
        return TWO
    return position - 3


def position_char(position: int) -> str:
    return RANKS[position_rank(position)]


class Combination(NamedTuple):
    """One reading of a multiset of ranks as a combination."""

    type: CombinationType
    top: int
    counts: Counts

    @property
    def size(self) -> int:
        """The number of cards."""
        return sum(self.counts)

    @property
    def rank(self) -> str | None:
        """The rank character that decides strength (``None`` for ``joker_bomb``)."""
        if self.type is JOKER_BOMB:
            return None
        if self.type in SEQUENCE_TYPES:
            return position_char(self.top)
        return RANKS[self.top]

    @property
    def ranks(self) -> str:
        """The rank string, in single-card order."""
        return format_ranks(self.counts)

    def beats(self, other: Combination) -> bool:
        """Whether this reading beats ``other`` (docs/rules.md §3)."""
        mine, theirs = self.type, other.type
        if theirs is JOKER_BOMB:
            return False
        if mine is JOKER_BOMB:
            return True
        if mine is BOMB:
            if theirs is not BOMB:
                return True
            return (self.size, self.top) > (other.size, other.top)
        return mine is theirs and self.top > other.top and self.size == other.size

    def __str__(self) -> str:
        return f"{self.type.value} {self.ranks}"


def sequence_tops(ranks: Sequence[int]) -> list[int]:
    """Top positions of every way the (sorted, distinct, joker-free) ranks fill consecutive
    positions; empty when they do not. Two answers only when all thirteen ranks are there."""
    has_ace = False
    positions = []
    for r in ranks:
        if r == ACE:
            has_ace = True
        else:
            positions.append(2 if r == TWO else r + 3)
    if not positions:
        return [HIGHEST_POSITION] if has_ace else []
    positions.sort()
    low, high = positions[0], positions[-1]
    if high - low + 1 != len(positions):
        return []
    if not has_ace:
        return [high]
    tops = []
    if low == 2:
        tops.append(high)
    if high == 13:
        tops.append(HIGHEST_POSITION)
    return tops


def _readings(counts: Counts, ruleset: Ruleset) -> list[Combination]:
    present = [r for r in range(NUM_RANKS) if counts[r]]
    if not present:
        return []
    if len(present) == 1:
        r = present[0]
        n = counts[r]
        if n == 1:
            return [Combination(SINGLE, r, counts)]
        if n == 2:
            return [Combination(PAIR, r, counts)]
        if r >= SMALL_JOKER or n > COPIES[r]:
            return []
        return [Combination(TRIPLE if n == 3 else BOMB, r, counts)]
    if present[-1] >= SMALL_JOKER:
        return _readings_with_jokers(counts, present, ruleset)
    width = counts[present[0]]
    if width in SEQUENCE_BY_WIDTH and all(counts[r] == width for r in present):
        kind, shortest = SEQUENCE_BY_WIDTH[width]
        if len(present) >= shortest:
            return [Combination(kind, top, counts) for top in sequence_tops(present)]
        return []
    if len(present) == 2:
        a, b = present
        if (counts[a], counts[b]) == (3, 2):
            return [Combination(FULL_HOUSE, a, counts)]
        if (counts[a], counts[b]) == (2, 3):
            return [Combination(FULL_HOUSE, b, counts)]
    return _plane_with_pairs(counts, present)


def _readings_with_jokers(
    counts: Counts, present: list[int], ruleset: Ruleset
) -> list[Combination]:
    if counts == JOKER_BOMB_COUNTS:
        return [Combination(JOKER_BOMB, BIG_JOKER, counts)] if ruleset.joker_bomb else []
    # With jokers and other cards, only a triple carrying a joker pair is a combination.
    if len(present) == 2 and present[0] < SMALL_JOKER:
        triple, joker = present
        if counts[triple] == 3 and counts[joker] == 2:
            return [Combination(FULL_HOUSE, triple, counts)]
    return []


def _plane_with_pairs(counts: Counts, present: list[int]) -> list[Combination]:
    triples = [r for r in present if counts[r] == 3 or counts[r] == 5]
    pairs = [r for r in present if counts[r] == 2 or counts[r] == 5]
    if (
        len(triples) < MIN_PLANE_WITH_PAIRS
        or len(triples) != len(pairs)
        or 3 * len(triples) + 2 * len(pairs) != sum(counts)
        or not sequence_tops(pairs)
    ):
        return []
    return [Combination(PLANE_WITH_PAIRS, top, counts) for top in sequence_tops(triples)]


class NoCombination(InvalidCombination):
    """Cards with no reading, named in their caller's notation (see :func:`named`). The
    message is worked out only when shown: classifying is on every hot path (move checks,
    bots), explaining is not."""

    def __init__(self, cards: str | Counts | Sequence[Card], ruleset: Ruleset):
        ValueError.__init__(self, cards)
        self.cards = cards
        self.ruleset = ruleset

    def __str__(self) -> str:
        return why_invalid(self.cards, self.ruleset)


def named(cards: str | Counts | Sequence[Card]) -> str:
    """Cards as their caller wrote them, for a message: card codes (``S3 H3``) for cards,
    as the API and the hand record name them; else a rank string (``33``)."""
    if cards and isinstance(cards[0], Card):
        return format_cards(cards)  # type: ignore[arg-type]
    return format_ranks(as_counts(cards))


def as_counts(cards: str | Counts | Sequence[Card]) -> Counts:
    """Counts from a rank string, a counts tuple, or a sequence of :class:`Card`."""
    if isinstance(cards, str):
        return parse_ranks(cards)
    # No typing.cast here: on this path of every play check, its call is a cost.
    if type(cards) is tuple and len(cards) == NUM_RANKS and type(cards[0]) is int:
        return cards
    return counts_of(cards)  # type: ignore[arg-type]


def readings(
    cards: str | Counts | Sequence[Card], ruleset: Ruleset = DEFAULT_RULESET
) -> list[Combination]:
    """Every reading of the cards as a combination, weakest first; empty when there is none."""
    return _readings(as_counts(cards), ruleset)


def classify(
    cards: str | Counts | Sequence[Card], ruleset: Ruleset = DEFAULT_RULESET
) -> Combination:
    """The strongest reading of the cards (the one recorded when leading).

    Raises :class:`InvalidCombination` saying which rule the cards break.
    """
    found = _readings(as_counts(cards), ruleset)
    if not found:
        raise NoCombination(cards, ruleset)
    return found[-1]


def beats(
    cards: str | Counts | Sequence[Card],
    over: str | Counts | Sequence[Card] | Combination,
    ruleset: Ruleset = DEFAULT_RULESET,
) -> bool:
    """Whether ``cards`` beat ``over``: ``over`` is read at its strongest, ``cards`` in
    whichever reading beats it. Raises :class:`InvalidCombination` if either is none."""
    lead = over if isinstance(over, Combination) else classify(over, ruleset)
    found = _readings(as_counts(cards), ruleset)
    if not found:
        raise NoCombination(cards, ruleset)
    return any(reading.beats(lead) for reading in found)


def why_invalid(cards: str | Counts | Sequence[Card], ruleset: Ruleset = DEFAULT_RULESET) -> str:
    """Which rule of docs/rules.md §2 a set of cards that is no combination breaks; the
    cards are named as given (see :func:`named`)."""
    counts = as_counts(cards)
    text = named(cards)
    present = [r for r in range(NUM_RANKS) if counts[r]]
    if not present:
        return "no cards: a play is at least one card"
    for r in present:
        if counts[r] > COPIES[r]:
            return f"{text}: rank {RANKS[r]} appears {counts[r]} times, but the two decks hold {COPIES[r]}"
    jokers = counts[SMALL_JOKER] + counts[BIG_JOKER]
    if counts == JOKER_BOMB_COUNTS:
        return f"{text}: the four jokers are no joker_bomb under {ruleset.name}"
    if jokers == 3 and jokers == sum(counts):
        return f"{text}: jokers never form a triple"
    if counts[SMALL_JOKER] and counts[BIG_JOKER] and jokers == sum(counts):
        return f"{text}: a small and a big joker are no pair (and there is no rocket)"
    big = [r for r in present if counts[r] >= 4]
    if big and not all(counts[r] == 5 for r in big):
        return f"{text}: four or more of one rank are a bomb, which takes no other cards"
    if jokers and len(present) > 1:
        return f"{text}: jokers go with other cards only as the pair of a full_house"
    widths = {counts[r] for r in present}
    if len(widths) == 1 and min(widths) in SEQUENCE_BY_WIDTH:
        kind, shortest = SEQUENCE_BY_WIDTH[min(widths)]
        if len(present) < shortest:
            return f"{text}: a {kind.value} needs at least {shortest} consecutive ranks"
        return f"{text}: a {kind.value} needs consecutive ranks (A is below 2 or above K, 2 only below 3)"
    if sorted(counts[r] for r in present) in ([1, 3], [1, 1, 3]):
        return f"{text}: a triple may carry a pair, never single cards"
    if all(counts[r] in (2, 3, 5) for r in present) and any(counts[r] != 2 for r in present):
        return (
            f"{text}: a plane_with_pairs needs n >= 2 consecutive triples and n consecutive pairs"
        )
    return f"{text}: not one of the combinations single, pair, triple, straight, pair_chain, plane, full_house, plane_with_pairs, bomb, joker_bomb"
