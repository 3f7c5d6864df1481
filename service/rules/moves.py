"""Legal plays: what a hand may lead, what beats a given play, and checking one play.

Plays are distinct by ranks (suits never matter). Generation works on counts and yields
shared, precomputed :class:`Combination` values; :func:`legal_moves` maps each to
concrete cards of the hand. Two constraints of a seat are inputs:

- ``bombs_left``: how many more ``bomb`` / ``joker_bomb`` plays the seat may make
  (``None`` = no limit, docs/rules.md §4.10);
- ``locked``: ranks reported by 报到, which may leave the hand only as their whole bomb
  (the jokers, locked together, only as ``joker_bomb``; docs/rules.md §4.8).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple, TypeVar

from .cards import (
    ACE,
    BIG_JOKER,
    NUM_RANKS,
    SMALL_JOKER,
    TWO,
    Card,
    Counts,
    check_possible,
    format_ranks,
    take_out,
)
from .combinations import (
    BOMB,
    FULL_HOUSE,
    HIGHEST_POSITION,
    JOKER_BOMB,
    JOKER_BOMB_COUNTS,
    LOWEST_POSITION,
    MIN_PLANE_WITH_PAIRS,
    PAIR,
    PLANE_WITH_PAIRS,
    SEQUENCE_BY_WIDTH,
    SINGLE,
    TRIPLE,
    Combination,
    CombinationType,
    NoCombination,
    _readings,
    as_counts,
    named,
    position_rank,
)
from .errors import RulesError
from .rulesets import DEFAULT_RULESET, Ruleset


class IllegalPlay(RulesError):
    """A play the rules forbid here; ``code`` names the rule."""

    code = "illegal_play"


class NotInHand(IllegalPlay):
    """A play of cards the hand does not hold; the message names them. They come from the
    play itself, so it tells the player nothing new."""

    def __init__(self, missing: str):
        super().__init__(f"the hand does not hold: {missing}", "cards_not_in_hand")


class Move(NamedTuple):
    """A play with the concrete cards that leave the hand."""

    combination: Combination
    cards: tuple[Card, ...]


def _counts(entries: dict[int, int]) -> Counts:
    counts = [0] * NUM_RANKS
    for r, n in entries.items():
        counts[r] += n
    return tuple(counts)


# Every combination that exists, built once; generation only picks from these tables.
_SIMPLE_WIDTH = {SINGLE: 1, PAIR: 2, TRIPLE: 3}
_SEQUENCE_WIDTH = {kind: width for width, (kind, _) in SEQUENCE_BY_WIDTH.items()}
SIMPLE_PLAYS = {
    kind: [
        Combination(kind, r, _counts({r: width})) if r <= last else None for r in range(NUM_RANKS)
    ]
    for kind, width, last in ((SINGLE, 1, BIG_JOKER), (PAIR, 2, BIG_JOKER), (TRIPLE, 3, TWO))
}
BOMB_PLAYS = [[Combination(BOMB, r, _counts({r: n})) for n in range(9)] for r in range(SMALL_JOKER)]
JOKER_BOMB_PLAY = Combination(JOKER_BOMB, BIG_JOKER, JOKER_BOMB_COUNTS)
FULL_HOUSE_PLAYS = [
    [
        Combination(FULL_HOUSE, t, _counts({t: 3, q: 2})) if q != t else None
        for q in range(NUM_RANKS)
    ]
    for t in range(SMALL_JOKER)
]


def _window_ranks(start: int, length: int) -> tuple[int, ...]:
    return tuple(position_rank(p) for p in range(start, start + length))


def _windows(length: int) -> list[int]:
    """Start positions of the windows of ``length`` consecutive positions. ``A`` never
    stands twice, and of the two thirteen-rank windows only the stronger (2…A) is kept:
    both hold the same ranks."""
    last = HIGHEST_POSITION - length + 1
    return [s for s in range(1, last + 1) if not (s == 1 and length >= 13)]


def sequence_play(width: int, start: int, length: int) -> Combination:
    """The sequence of ``width`` cards a rank over the window of ``length`` positions from
    ``start``."""
    kind = SEQUENCE_BY_WIDTH[width][0]
    return Combination(
        kind, start + length - 1, _counts(dict.fromkeys(_window_ranks(start, length), width))
    )


_WINDOW_STARTS = {length: _windows(length) for length in range(1, HIGHEST_POSITION)}
_SEQUENCES = {
    width: {
        length: {start: sequence_play(width, start, length) for start in _windows(length)}
        for length in range(shortest, 14)
    }
    for width, (_, shortest) in SEQUENCE_BY_WIDTH.items()
}
_PLANES_WITH_PAIRS: dict[tuple[int, int, int], tuple[Combination, tuple[int, ...]]] = {}


def plane_with_pairs_play(
    n: int, triples_start: int, pairs_start: int
) -> tuple[Combination, tuple[int, ...]]:
    """The combination of two windows, and the ranks they share (which need 5 cards)."""
    key = (n, triples_start, pairs_start)
    found = _PLANES_WITH_PAIRS.get(key)
    if found is None:
        triples = _window_ranks(triples_start, n)
        pairs = _window_ranks(pairs_start, n)
        counts = [0] * NUM_RANKS
        for r in triples:
            counts[r] += 3
        for r in pairs:
            counts[r] += 2
        combination = Combination(PLANE_WITH_PAIRS, triples_start + n - 1, tuple(counts))
        found = _PLANES_WITH_PAIRS[key] = (combination, tuple(set(triples) & set(pairs)))
    return found


POSITION_RANK = [0] + [position_rank(p) for p in range(1, HIGHEST_POSITION + 1)]

# Generation works on bit masks of ranks (bit r for rank index r) and of sequence positions
# (bit p for position p), and looks the plays a mask allows up in tables filled as masks
# come: in Python each rank a loop visits costs about as much as a table lookup, and a hand
# visited its ranks once per kind of play.

_SUITED = (1 << SMALL_JOKER) - 1
_TRIPLE_RANKS = (1 << (TWO + 1)) - 1  # no triple of jokers
_THREE_TO_KING = (1 << ACE) - 1


#: Entries each table below keeps at most; then it starts again. Their keys are few (masks
#: of 15 ranks, or a seat's hand until it plays), but a process that serves many hands
#: took hours to fill the larger ones, its memory growing all that while; at this size
#: they are full within minutes (docs/scaling.md).
_REMEMBERED = 1 << 12

_K = TypeVar("_K")
_V = TypeVar("_V")


def _remember(table: dict[_K, _V], key: _K, value: _V) -> _V:
    if len(table) >= _REMEMBERED:
        table.clear()
    table[key] = value
    return value


#: The masks of each counts, as :func:`_rank_masks` gives them: a seat's hand is asked for
#: its plays at each of its turns until it plays.
_MASKS: dict[Counts, tuple[int, int, int, int]] = {}


def _rank_masks(available: Counts) -> tuple[int, int, int, int]:
    """The ranks of which the hand holds at least one, two, three and four cards."""
    masks = _MASKS.get(available)
    if masks is not None:
        return masks
    one = two = three = four = 0
    bit = 1
    for n in available:
        if n:
            one |= bit
            if n >= 2:
                two |= bit
                if n >= 3:
                    three |= bit
                    if n >= 4:
                        four |= bit
        bit <<= 1
    return _remember(_MASKS, available, (one, two, three, four))


def _positions(ranks: int) -> int:
    """The sequence positions of the ranks: 3…K at 3…13, ``A`` at 1 and 14, ``2`` at 2."""
    return (
        (ranks & _THREE_TO_KING) << 3
        | (ranks >> ACE & 1) * (1 << LOWEST_POSITION | 1 << HIGHEST_POSITION)
        | (ranks >> TWO & 1) << 2
    )


def _above(rank_or_position: int) -> int:
    """The mask of the bits above ``rank_or_position``."""
    return -1 << max(0, rank_or_position + 1)


#: The rank indices of each mask, ascending.
_RANKS_IN: dict[int, tuple[int, ...]] = {}


def _ranks_in(mask: int) -> tuple[int, ...]:
    ranks = _RANKS_IN.get(mask)
    if ranks is None:
        ranks = tuple(r for r in range(mask.bit_length()) if mask >> r & 1)
        _remember(_RANKS_IN, mask, ranks)
    return ranks


#: The singles, pairs or triples of the ranks of each mask, by kind then mask.
_SIMPLE_IN: dict[CombinationType, dict[int, tuple[Combination, ...]]] = {
    kind: {} for kind in SIMPLE_PLAYS
}


def _simple(kind: CombinationType, ranks: int) -> tuple[Combination, ...]:
    """The ``kind`` plays of the ranks (each ``None`` in ``SIMPLE_PLAYS`` is left out by the
    caller's mask)."""
    found = _SIMPLE_IN[kind].get(ranks)
    if found is None:
        row = SIMPLE_PLAYS[kind]
        found = tuple(row[r] for r in _ranks_in(ranks))  # type: ignore[misc]
        _remember(_SIMPLE_IN[kind], ranks, found)
    return found


def _full_houses(two: int, three: int) -> list[Combination]:
    """A triple of each rank of ``three`` with a pair of each other rank of ``two``."""
    found: list[Combination] = []
    for t in _ranks_in(three & _TRIPLE_RANKS):
        row = FULL_HOUSE_PLAYS[t]
        found += [row[q] for q in _ranks_in(two & ~(1 << t))]  # type: ignore[misc]
    return found


#: Windows start at position 1 only when shorter than 13 (see :func:`_windows`).
_FROM_TWO = ~(1 << LOWEST_POSITION)
#: ``_SEQUENCE_AT[width][length][start]``: the sequence of ``_SEQUENCES`` (None where no
#: window starts).
_SEQUENCE_AT = {
    width: {
        length: [starts.get(s) for s in range(HIGHEST_POSITION + 1)]
        for length, starts in by_length.items()
    }
    for width, by_length in _SEQUENCES.items()
}


def _window_starts(have: int, length: int) -> int:
    """The start positions, as bits, of the windows of ``length`` positions all in ``have``."""
    starts = have
    for shift in range(1, length):
        starts &= have >> shift
    return starts & _FROM_TWO if length >= 13 else starts


#: Every sequence of a width that the positions held allow, by length then start, by
#: (width, positions).
_ALL_SEQUENCES: dict[tuple[int, int], tuple[Combination, ...]] = {}


def _all_sequences(width: int, have: int) -> tuple[Combination, ...]:
    found = _ALL_SEQUENCES.get((width, have))
    if found is None:
        sequences: list[Combination] = []
        for length, row in _SEQUENCE_AT[width].items():
            starts = _window_starts(have, length)
            if not starts:
                break  # no window of this length, so none longer
            sequences += [row[s] for s in _ranks_in(starts)]  # type: ignore[misc]
        found = _remember(_ALL_SEQUENCES, (width, have), tuple(sequences))
    return found


def _sequences(width: int, have: int, length: int, above: int) -> list[Combination]:
    """The sequences of ``length`` positions of ``have`` with top position above ``above``."""
    row = _SEQUENCE_AT[width].get(length)
    if row is None:
        return []
    starts = _window_starts(have, length) & _above(above - length + 1)
    return [row[s] for s in _ranks_in(starts)]  # type: ignore[misc]


def _planes_with_pairs(
    available: Sequence[int], two: int, three: int, n: int | None = None, above: int = 0
) -> list[Combination]:
    """By number of triples, then the triples' start, then the pairs' start."""
    triples = _positions(three)
    if not triples & triples >> 1:
        return []  # no two triples in a row: most hands
    pairs = _positions(two)
    found: list[Combination] = []
    for n_ in range(MIN_PLANE_WITH_PAIRS, 14) if n is None else (n,):
        triple_starts = _window_starts(triples, n_) & _above(above - n_ + 1)
        if not triple_starts:
            if n is None:
                break  # no run of n_ triples, so none longer
            continue
        pair_starts = _ranks_in(_window_starts(pairs, n_))
        for ts in _ranks_in(triple_starts):
            for ps in pair_starts:
                combination, shared = plane_with_pairs_play(n_, ts, ps)
                if all(available[r] >= 5 for r in shared):
                    found.append(combination)
    return found


def _bombs(
    counts: Counts, locked: AbstractSet[int], over: Combination | None, four: int
) -> Iterator[Combination]:
    """The bombs of the ranks of ``four`` (its count of four or more, every size) and of
    the reported ranks (whole), that beat ``over``."""
    for r in locked:
        if r < SMALL_JOKER and counts[r] >= 4:
            four |= 1 << r
    for r in _ranks_in(four):
        n = counts[r]
        for size in (n,) if r in locked else range(4, n + 1):
            bomb = BOMB_PLAYS[r][size]
            if over is None or bomb.beats(over):
                yield bomb


def available_counts(counts: Counts, locked: AbstractSet[int]) -> Counts:
    """What the hand holds for plays other than the whole reported bombs."""
    if not locked:
        return counts
    return tuple(0 if r in locked else n for r, n in enumerate(counts))


def legal_plays(
    hand: str | Counts | Sequence[Card],
    lead: Combination | None = None,
    *,
    ruleset: Ruleset = DEFAULT_RULESET,
    bombs_left: int | None = None,
    locked: AbstractSet[int] = frozenset(),
) -> Iterator[Combination]:
    """Every distinct play the hand can make: any combination when ``lead`` is ``None``
    (each at its strongest reading), otherwise every one that beats ``lead``."""
    counts = as_counts(hand)
    most = max(counts)
    if most > 8 or counts[SMALL_JOKER] > 2 or counts[BIG_JOKER] > 2:
        check_possible(counts)
    available = available_counts(counts, locked)
    masks = _rank_masks(available)
    if lead is None:
        yield from _leads(available, *masks)
    elif lead.type is not JOKER_BOMB and lead.type is not BOMB:
        yield from _replies(available, lead, *masks)
    if bombs_left is not None and bombs_left <= 0:
        return
    if lead is not None and lead.type is JOKER_BOMB:
        return
    if most >= 4:
        yield from _bombs(counts, locked, lead, masks[3])
    if ruleset.joker_bomb and counts[SMALL_JOKER] == 2 and counts[BIG_JOKER] == 2:
        yield JOKER_BOMB_PLAY


def _leads(available: Counts, one: int, two: int, three: int, four: int) -> list[Combination]:
    return [
        *_simple(SINGLE, one),
        *_simple(PAIR, two),
        *_simple(TRIPLE, three & _TRIPLE_RANKS),
        *_all_sequences(1, _positions(one)),
        *_all_sequences(2, _positions(two)),
        *_all_sequences(3, _positions(three)),
        *_full_houses(two, three),
        *_planes_with_pairs(available, two, three),
    ]


def _replies(
    available: Counts, lead: Combination, one: int, two: int, three: int, four: int
) -> Sequence[Combination]:
    kind, top = lead.type, lead.top
    if kind is SINGLE:
        return _simple(SINGLE, one & _above(top))
    if kind is PAIR:
        return _simple(PAIR, two & _above(top))
    if kind is TRIPLE:
        return _simple(TRIPLE, three & _TRIPLE_RANKS & _above(top))
    if kind is FULL_HOUSE:
        return _full_houses(two, three & _above(top))
    if kind is PLANE_WITH_PAIRS:
        return _planes_with_pairs(available, two, three, lead.size // 5, top)
    width = _SEQUENCE_WIDTH[kind]
    have = _positions((one, two, three)[width - 1])
    return _sequences(width, have, lead.size // width, top)


def pick_cards(hand: Sequence[Card], counts: Counts) -> tuple[Card, ...]:
    """Concrete cards of the hand for a multiset of ranks (the first of each rank, in the
    hand's own order). Raises :class:`IllegalPlay` when the hand lacks them."""
    need = list(counts)
    left = sum(need)
    picked = []
    for card in hand:
        if need[card.rank]:
            need[card.rank] -= 1
            picked.append(card)
            left -= 1
            if not left:
                break  # the rest of the hand has nothing to give
    if any(need):
        raise NotInHand(format_ranks(need))
    return tuple(picked)


def legal_moves(
    hand: Sequence[Card],
    lead: Combination | None = None,
    *,
    ruleset: Ruleset = DEFAULT_RULESET,
    bombs_left: int | None = None,
    locked: AbstractSet[int] = frozenset(),
) -> Iterator[Move]:
    """:func:`legal_plays`, each with the concrete cards of ``hand`` it would play."""
    by_rank: list[list[Card]] = [[] for _ in range(NUM_RANKS)]
    for card in hand:
        by_rank[card.rank].append(card)
    plays = legal_plays(
        tuple(len(cards) for cards in by_rank),
        lead,
        ruleset=ruleset,
        bombs_left=bombs_left,
        locked=locked,
    )
    for combination in plays:
        cards: list[Card] = []
        for r, n in enumerate(combination.counts):
            if n:
                cards += by_rank[r][:n]
        yield Move(combination, tuple(cards))


def verify_play(
    hand: str | Counts | Sequence[Card],
    cards: str | Counts | Sequence[Card],
    lead: Combination | None = None,
    *,
    ruleset: Ruleset = DEFAULT_RULESET,
    bombs_left: int | None = None,
    locked: AbstractSet[int] = frozenset(),
    lead_cards: Sequence[Card] = (),
) -> Combination:
    """Checks one play and returns the reading it is recorded as (the strongest one that
    beats ``lead``). Raises a :class:`~service.rules.errors.RulesError` naming the rule,
    and the cards as given (card codes for cards; ``lead_cards``, the cards of ``lead``,
    name it so too)."""
    held = as_counts(hand)
    played = as_counts(cards)
    missing = _not_held(hand, cards, held, played)
    if missing:
        raise NotInHand(missing)
    found = _readings(played, ruleset)
    if not found:
        raise NoCombination(cards, ruleset)
    for r in locked:
        if played[r] and played != _whole_reported_bomb(held, r):
            raise IllegalPlay(
                "a reported rank leaves the hand only as its whole bomb (the four jokers as joker_bomb)",
                "must_play_whole_reported_bomb",
            )
    if lead is not None:
        found = [reading for reading in found if reading.beats(lead)]
        if not found:
            beaten = named(lead_cards) if lead_cards else lead.ranks
            raise IllegalPlay(
                f"{named(cards)} does not beat the {lead.type} {beaten}", "does_not_beat"
            )
    combination = found[-1]
    if bombs_left is not None and bombs_left <= 0 and combination.type.is_bomb:
        raise IllegalPlay(
            "this seat has played all the bombs its limit allows", "bomb_limit_reached"
        )
    return combination


def _not_held(
    hand: str | Counts | Sequence[Card],
    cards: str | Counts | Sequence[Card],
    held: Counts,
    played: Counts,
) -> str:
    """The cards of the play the hand lacks, in the play's order ("S3, S3"): with concrete
    cards on both sides suits count too (S3 is not C3); else the ranks ("33")."""
    if hand and cards and isinstance(hand[0], Card) and isinstance(cards[0], Card):
        # Taking the few cards of a play out beats a Counter of the whole hand.
        _, missing = take_out(hand, cards)  # type: ignore[arg-type]
        return ", ".join(card.code for card in missing) if missing else ""
    return format_ranks([max(p - h, 0) for p, h in zip(played, held)])


def can_play(
    hand: str | Counts | Sequence[Card],
    cards: str | Counts | Sequence[Card],
    lead: Combination | None = None,
    **constraints: Any,
) -> bool:
    """Whether :func:`verify_play` accepts the play."""
    try:
        verify_play(hand, cards, lead, **constraints)
    except RulesError:
        return False
    return True


def _whole_reported_bomb(held: Counts, r: int) -> Counts:
    if r >= SMALL_JOKER:
        return JOKER_BOMB_COUNTS
    return tuple(held[r] if i == r else 0 for i in range(NUM_RANKS))
