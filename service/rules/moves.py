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

from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple, cast

from .cards import (
    BIG_JOKER,
    NUM_RANKS,
    SMALL_JOKER,
    TWO,
    Card,
    Counts,
    check_possible,
    format_ranks,
)
from .combinations import (
    BOMB,
    FULL_HOUSE,
    HIGHEST_POSITION,
    JOKER_BOMB,
    JOKER_BOMB_COUNTS,
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
_POSITIONS_DOWN = range(HIGHEST_POSITION, 0, -1)


def _run_lengths(available: Sequence[int], width: int) -> list[int]:
    """``runs[p]``: how many consecutive positions from ``p`` have ``width`` cards."""
    runs = [0] * (HIGHEST_POSITION + 2)
    for p in _POSITIONS_DOWN:
        if available[POSITION_RANK[p]] >= width:
            runs[p] = runs[p + 1] + 1
    return runs


def _sequences(
    available: Sequence[int], width: int, length: int | None = None, above: int = 0
) -> Iterator[Combination]:
    """Sequences of ``width`` cards a rank the hand can make, of one length or all, with
    top position above ``above``."""
    runs = _run_lengths(available, width)
    # No sequence is longer than the hand's longest run: most hands have no long runs, and
    # trying every window of every length was most of the time of a lead.
    longest = max(runs)
    by_length = _SEQUENCES[width]
    if length is None:
        lengths: Iterable[int] = range(SEQUENCE_BY_WIDTH[width][1], min(longest, 13) + 1)
    elif length <= longest and length in by_length:
        lengths = (length,)
    else:
        return
    for length_ in lengths:
        for start, combination in by_length[length_].items():
            if runs[start] >= length_ and start + length_ - 1 > above:
                yield combination


def _planes_with_pairs(
    available: Sequence[int], n: int | None = None, above: int = 0
) -> Iterator[Combination]:
    triple_runs = _run_lengths(available, 3)
    # As for sequences: the triples' longest run bounds the planes' length.
    longest = max(triple_runs)
    if longest < MIN_PLANE_WITH_PAIRS:
        return
    pair_runs = _run_lengths(available, 2)
    lengths = range(MIN_PLANE_WITH_PAIRS, min(longest, 13) + 1) if n is None else (n,)
    for n_ in lengths:
        starts = _WINDOW_STARTS[n_]
        pair_starts = [s for s in starts if pair_runs[s] >= n_]
        if not pair_starts:
            continue
        for ts in starts:
            if ts + n_ - 1 <= above or triple_runs[ts] < n_:
                continue
            for ps in pair_starts:
                combination, shared = plane_with_pairs_play(n_, ts, ps)
                if all(available[r] >= 5 for r in shared):
                    yield combination


def _bombs(
    counts: Counts, locked: AbstractSet[int], over: Combination | None = None
) -> Iterator[Combination]:
    for r in range(SMALL_JOKER):
        n = counts[r]
        if n < 4:
            continue
        sizes = (n,) if r in locked else range(4, n + 1)
        for size in sizes:
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
    if max(counts) > 8 or counts[SMALL_JOKER] > 2 or counts[BIG_JOKER] > 2:
        check_possible(counts)
    available = available_counts(counts, locked)
    bombs_ok = bombs_left is None or bombs_left > 0
    if lead is None:
        yield from _leads(available)
    elif lead.type is not JOKER_BOMB and lead.type is not BOMB:
        yield from _replies(available, lead)
    if not bombs_ok or (lead is not None and lead.type is JOKER_BOMB):
        return
    yield from _bombs(counts, locked, lead)
    if ruleset.joker_bomb and counts[SMALL_JOKER] == 2 and counts[BIG_JOKER] == 2:
        yield JOKER_BOMB_PLAY


def _leads(available: Counts) -> Iterator[Combination]:
    for kind, need in _SIMPLE_WIDTH.items():
        yield from _simple(available, kind, need)
    for width in SEQUENCE_BY_WIDTH:
        yield from _sequences(available, width)
    yield from _full_houses(available)
    yield from _planes_with_pairs(available)


def _simple(
    available: Counts, kind: CombinationType, need: int, above: int = -1
) -> Iterator[Combination]:
    row = SIMPLE_PLAYS[kind]
    for r in range(above + 1, NUM_RANKS):
        play = row[r]
        if available[r] >= need and play is not None:
            yield play


def _full_houses(available: Counts, above: int = -1) -> Iterator[Combination]:
    pairs = [q for q in range(NUM_RANKS) if available[q] >= 2]
    for t in range(above + 1, SMALL_JOKER):
        if available[t] >= 3:
            row = FULL_HOUSE_PLAYS[t]
            for q in pairs:
                play = row[q]
                if play is not None:  # q == t
                    yield play


def _replies(available: Counts, lead: Combination) -> Iterator[Combination]:
    kind = lead.type
    if kind in _SIMPLE_WIDTH:
        yield from _simple(available, kind, _SIMPLE_WIDTH[kind], lead.top)
    elif kind is FULL_HOUSE:
        yield from _full_houses(available, lead.top)
    elif kind is PLANE_WITH_PAIRS:
        yield from _planes_with_pairs(available, lead.size // 5, lead.top)
    else:
        width = _SEQUENCE_WIDTH[kind]
        yield from _sequences(available, width, lead.size // width, lead.top)


def pick_cards(hand: Sequence[Card], counts: Counts) -> tuple[Card, ...]:
    """Concrete cards of the hand for a multiset of ranks (the first of each rank, in the
    hand's own order). Raises :class:`IllegalPlay` when the hand lacks them."""
    need = list(counts)
    picked = []
    for card in hand:
        if need[card.rank]:
            need[card.rank] -= 1
            picked.append(card)
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
) -> Combination:
    """Checks one play and returns the reading it is recorded as (the strongest one that
    beats ``lead``). Raises a :class:`~service.rules.errors.RulesError` naming the rule."""
    held = as_counts(hand)
    played = as_counts(cards)
    missing = _not_held(hand, cards, held, played)
    if missing:
        raise NotInHand(missing)
    found = _readings(played, ruleset)
    if not found:
        raise NoCombination(played, ruleset)
    for r in locked:
        if played[r] and played != _whole_reported_bomb(held, r):
            raise IllegalPlay(
                "a reported rank leaves the hand only as its whole bomb (the four jokers as joker_bomb)",
                "must_play_whole_reported_bomb",
            )
    if lead is not None:
        found = [reading for reading in found if reading.beats(lead)]
        if not found:
            raise IllegalPlay(f"{format_ranks(played)} does not beat {lead}", "does_not_beat")
    combination = found[-1]
    if combination.type.is_bomb and bombs_left is not None and bombs_left <= 0:
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
        # list.remove beats a Counter of the whole hand for the few cards of a play.
        remaining = list(cast("Sequence[Card]", hand))
        missing = []
        for card in cast("Sequence[Card]", cards):
            try:
                remaining.remove(card)
            except ValueError:
                missing.append(card.code)
        return ", ".join(missing)
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
