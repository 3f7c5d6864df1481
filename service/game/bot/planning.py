"""Planning: splitting a hand into few plays (:func:`plan`) and what that costs.

The search is memoised over the sequences (straights, pair chains, planes, planes with
pairs) in order of start position, trying the most promising few at each step within a
node budget; the cards left are grouped into bombs, full houses (each triple carries one
of the lowest pairs), triples, pairs and singles. Each play costs about 1, less when it
is strong (high cards win tricks back); a bomb costs less than nothing. Bombs a farmer
may no longer play are split. The plan's cost estimates the tricks the hand still has
to win.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Literal, NamedTuple, overload

from ...rules import Combination
from ...rules.cards import BIG_JOKER, NUM_RANKS, SMALL_JOKER, Counts
from ...rules.combinations import PAIR, SEQUENCE_BY_WIDTH, SINGLE, TRIPLE

# The rules' own tables and loops: a plan's plays are then the very values legal_plays
# yields, and the planner cannot drift from the rules on what a window holds or what a
# reported rank leaves free.
from ...rules.moves import (
    BOMB_PLAYS,
    FULL_HOUSE_PLAYS,
    JOKER_BOMB_PLAY,
    POSITION_RANK,
    SIMPLE_PLAYS,
    available_counts,
    plane_with_pairs_play,
    sequence_play,
)

# --------------------------------------------------------------------------------------
# Costs: roughly "tricks still to win"; strong plays cost less, bombs less than nothing.
# --------------------------------------------------------------------------------------


def rank_value(r: int) -> int:
    """A rank index on the scale of sequence positions: 3…K = 3…13, A 14, 2 15, B 16, R 17."""
    return r + 3


def _play_cost(value: int) -> float:
    s = value / 17.0
    return 1.0 - 0.5 * s * s


#: Cost of a single / pair / triple / full house by the rank index deciding it.
_RANK_COST = [_play_cost(rank_value(r)) for r in range(NUM_RANKS)]
#: Cost of a sequence by its top position.
_POS_COST = [_play_cost(p) for p in range(16)]
BOMB_COST = -0.3
JOKER_BOMB_COST = -0.5


def _bomb_cost(size: int) -> float:
    return BOMB_COST - 0.02 * (size - 4)


# --------------------------------------------------------------------------------------
# The plan: a decomposition of the hand into few plays.
# --------------------------------------------------------------------------------------


class Plan(NamedTuple):
    cost: float
    combos: tuple[Combination, ...]

    @property
    def bombs(self) -> list[Combination]:
        return [c for c in self.combos if c.type.is_bomb]

    @property
    def others(self) -> list[Combination]:
        return [c for c in self.combos if not c.type.is_bomb]


#: _SEQ[width][start][length] -> (combination, cost). Unlike legal_plays, which keeps
#: only the stronger of the two windows of all thirteen ranks, the search also tries the
#: one from A (start 1).
_SEQ = {
    w: {
        s: {
            n: (sequence_play(w, s, n), _POS_COST[s + n - 1])
            for n in range(shortest, 14)
            if s + n - 1 <= 14
        }
        for s in range(1, 15)
    }
    for w, (_, shortest) in SEQUENCE_BY_WIDTH.items()
}


#: Planes with pairs by (number of triples, start position of the triples).
_PWP: dict[tuple[int, int], list[tuple[Combination, float]]] = {}
for _n in range(2, 7):
    for _ts in range(1, 16 - _n):
        for _ps in range(1, 16 - _n):
            _combo = plane_with_pairs_play(_n, _ts, _ps)[0]
            if max(_combo.counts) <= 8:
                _PWP.setdefault((_n, _ts), []).append((_combo, _POS_COST[_combo.top]))


def _split_bomb(n: int) -> tuple[int, int, int]:
    """How a rank held ``n`` (≥ 4) times is played when it may not be a bomb:
    (triples, pairs, singles)."""
    return {4: (0, 2, 0), 5: (1, 1, 0), 6: (2, 0, 0), 7: (2, 0, 1), 8: (2, 1, 0)}[n]


class _Context(NamedTuple):
    bomb_cap: int | None  # bombs the seat may still play (None: no limit)
    locked: frozenset[int]  # reported ranks (whole bombs only)
    joker_bomb: bool  # BBRR is a bomb in this ruleset


@overload
def _leaf(counts: Counts, ctx: _Context, build: Literal[False] = False) -> float: ...
@overload
def _leaf(
    counts: Counts, ctx: _Context, build: Literal[True]
) -> tuple[float, list[Combination]]: ...


def _leaf(
    counts: Counts, ctx: _Context, build: bool = False
) -> float | tuple[float, list[Combination]]:
    """Cost (and, with ``build``, the plays) of grouping cards without sequences."""
    bombs: list[tuple[int, int]] = []  # (size, rank); rank BIG_JOKER for the joker bomb
    singles: list[int] = []
    pairs: list[int] = []
    triples: list[int] = []
    locked = ctx.locked
    jokers_bomb = counts[SMALL_JOKER] == 2 and counts[BIG_JOKER] == 2 and ctx.joker_bomb
    free_bombs: list[tuple[int, int]] = []
    for r in range(SMALL_JOKER):
        n = counts[r]
        if not n:
            continue
        if n >= 4:
            if r in locked:
                bombs.append((n, r))
            else:
                free_bombs.append((n, r))
        elif n == 3:
            triples.append(r)
        elif n == 2:
            pairs.append(r)
        else:
            singles.append(r)
    if jokers_bomb:
        if BIG_JOKER in locked:
            bombs.append((9, BIG_JOKER))
        else:
            free_bombs.append((9, BIG_JOKER))
    else:
        for r in (SMALL_JOKER, BIG_JOKER):
            if counts[r] == 2:
                pairs.append(r)
            elif counts[r] == 1:
                singles.append(r)
    cap = ctx.bomb_cap
    if cap is not None and len(free_bombs) > cap:
        free_bombs.sort(reverse=True)
        for n, r in free_bombs[cap:]:
            if r == BIG_JOKER:
                pairs += [SMALL_JOKER, BIG_JOKER]
                continue
            t, p, s = _split_bomb(n)
            triples += [r] * t
            pairs += [r] * p
            singles += [r] * s
        free_bombs = free_bombs[:cap]
        pairs.sort()
        triples.sort()
    bombs += free_bombs
    cost = 0.0
    for n, r in bombs:
        cost += JOKER_BOMB_COST if r == BIG_JOKER else _bomb_cost(n)
    for r in singles:
        cost += _RANK_COST[r]
    for r in triples:
        cost += _RANK_COST[r]
    # Each triple carries one of the lowest pairs as a full house.
    for r in pairs[len(triples) :]:
        cost += _RANK_COST[r]
    if not build:
        return cost
    combos: list[Combination] = []
    for n, r in bombs:
        combos.append(JOKER_BOMB_PLAY if r == BIG_JOKER else BOMB_PLAYS[r][n])
    carried = pairs[: len(triples)]
    # Give the lowest pairs to the lowest triples; a pair of the triple's own rank (a split
    # bomb) cannot go with it, so pair them up avoiding that.
    carried_left = list(carried)
    for t in triples:
        q = next((q for q in carried_left if q != t), None)
        if q is None:
            combos.append(_held(SIMPLE_PLAYS[TRIPLE][t]))
        else:
            carried_left.remove(q)
            combos.append(_held(FULL_HOUSE_PLAYS[t][q]))
    for q in carried_left + pairs[len(triples) :]:
        combos.append(_held(SIMPLE_PLAYS[PAIR][q]))
    for r in singles:
        combos.append(_held(SIMPLE_PLAYS[SINGLE][r]))
    return cost, combos


def _held(combo: Combination | None) -> Combination:
    """A play of the rules' tables for cards the hand holds: the tables have None only
    where no such play exists (a full house of one rank, a triple of jokers)."""
    assert combo is not None
    return combo


def subtract(counts: Counts, delta: Counts) -> Counts:
    return tuple([a - b for a, b in zip(counts, delta)])


#: For a sequence longer than its minimum, the counts an end rank may have: dropping that
#: end from the sequence must not be clearly better (a pair, a bomb left whole, …).
_END_OK = {
    1: frozenset({1, 3, 5, 6, 7, 8}),
    2: frozenset({2, 5, 6, 7, 8}),
    3: frozenset({3, 5, 6, 7, 8}),
}


def _group_cost(n: int, r: int) -> float:
    """Roughly what ``n`` cards of rank ``r`` cost when grouped without sequences."""
    if n == 0:
        return 0.0
    if n >= 4:
        return _bomb_cost(n)
    if n == 2:
        return 0.5 * _RANK_COST[r]  # a pair often rides on a triple
    return _RANK_COST[r]


_GROUP_COST = [[_group_cost(n, r) for r in range(NUM_RANKS)] for n in range(9)]


class _Search:
    """Best decomposition by a search over sequences ordered by start position."""

    def __init__(self, ctx: _Context, budget: int, width: int = 6):
        self.ctx = ctx
        self.memo: dict[tuple[Counts, int], tuple[float, tuple[Combination, int] | None]] = {}
        self.budget = budget
        self.width = width
        self.nodes = 0

    def options(self, counts: Counts, p: int) -> list[tuple[float, int, Combination, float]]:
        """The most promising sequences starting at position ``p`` or later, as
        (estimated gain, start, combination, cost)."""
        ctx = self.ctx
        avail = available_counts(counts, ctx.locked)
        out = []
        pos_rank = POSITION_RANK
        group = _GROUP_COST
        for width, (_, shortest) in SEQUENCE_BY_WIDTH.items():
            end_ok = _END_OK[width]
            row_w = _SEQ[width]
            # The lengths of the runs that start at each position (as moves works out a
            # lead's sequences), but only from p on and inline: this is the planner's
            # hottest loop, and the call over every position costs it about 7%.
            run = 0
            runs = [0] * 16
            for q in range(14, p - 1, -1):
                if avail[pos_rank[q]] >= width:
                    run += 1
                else:
                    run = 0
                runs[q] = run
            for q in range(p, 14):
                run = runs[q]
                if run < shortest:
                    continue
                if q == 1 and run > 13:
                    run = 13
                row = row_w[q]
                # Estimated change of cost when the sequence's cards leave their groups.
                delta = 0.0
                for k in range(q, q + shortest):
                    r = pos_rank[k]
                    n = avail[r]
                    delta += group[n - width][r] - group[n][r]
                combo, cost = row[shortest]
                out.append((cost + delta, q, combo, cost))
                if run > shortest and avail[pos_rank[q]] in end_ok:
                    for n_ in range(shortest + 1, run + 1):
                        r = pos_rank[q + n_ - 1]
                        n = avail[r]
                        delta += group[n - width][r] - group[n][r]
                        if n in end_ok:
                            combo, cost = row[n_]
                            out.append((cost + delta, q, combo, cost))
                if width == 3:
                    for n_ in range(2, min(run, 6) + 1):
                        for combo, cost in _PWP.get((n_, q), ()):
                            if all(a >= b for a, b in zip(avail, combo.counts)):
                                delta = 0.0
                                for r, m in enumerate(combo.counts):
                                    if m:
                                        n = avail[r]
                                        delta += group[n - m][r] - group[n][r]
                                out.append((cost + delta, q, combo, cost))
        if len(out) > self.width:
            base = _leaf(counts, ctx)
            out = [
                (cost + _leaf(subtract(counts, combo.counts), ctx) - base, q, combo, cost)
                for _, q, combo, cost in out
            ]
        out.sort(key=lambda o: o[0])
        return out[: self.width]

    def best(self, counts: Counts, p: int) -> float:
        key = (counts, p)
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        self.nodes += 1
        best = _leaf(counts, self.ctx)
        choice = None
        if self.budget > 0:
            self.budget -= 1
            for _, q, combo, cost in self.options(counts, p):
                total = cost + self.best(subtract(counts, combo.counts), q)
                if total < best - 1e-9:
                    best, choice = total, (combo, q)
        self.memo[key] = (best, choice)
        return best

    def combos(self, counts: Counts, p: int) -> list[Combination]:
        out: list[Combination] = []
        while True:
            hit = self.memo.get((counts, p))
            if hit is None or hit[1] is None:
                out += _leaf(counts, self.ctx, build=True)[1]
                return out
            combo, p = hit[1]
            out.append(combo)
            counts = subtract(counts, combo.counts)


_PLAN_CACHE: dict[tuple[Counts, _Context], Plan] = {}
_PLAN_CACHE_LIMIT = 5000
#: Search nodes per plan: keeps the worst case fast (the rest is grouped without sequences).
SEARCH_BUDGET = 80
#: Sequences tried at each node of the search, best first by a one-step estimate.
SEARCH_WIDTH = 6


def plan(
    counts: Counts,
    bomb_cap: int | None = None,
    locked: AbstractSet[int] = frozenset(),
    joker_bomb: bool = True,
) -> Plan:
    """The cheapest decomposition of ``counts`` into plays (see the module docstring)."""
    ctx = _Context(bomb_cap, frozenset(locked), joker_bomb)
    key = (counts, ctx)
    found = _PLAN_CACHE.get(key)
    if found is not None:
        return found
    search = _Search(ctx, SEARCH_BUDGET, SEARCH_WIDTH)
    cost = search.best(counts, 1)
    result = Plan(cost, tuple(search.combos(counts, 1)))
    if len(_PLAN_CACHE) >= _PLAN_CACHE_LIMIT:
        _PLAN_CACHE.clear()
    _PLAN_CACHE[key] = result
    return result
