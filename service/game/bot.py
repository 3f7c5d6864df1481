"""A rule-based bot for Shanghai Dou Dizhu (上海斗地主): :class:`BotPolicy`.

The bot sees only its :class:`~service.game.views.SeatView` (its own hand, every seat's
card count, the bids, the play to beat and who made it, its bomb allowance, the
landlord's hand after 摊打) and always returns a legal command. It is deterministic.

Strategy, in short:

* **Plan.** The hand is split into few plays (:func:`plan`): a memoised search over the
  sequences (straights, pair chains, planes, planes with pairs) in order of start
  position, trying the most promising few at each step within a node budget; the cards
  left are grouped into bombs, full houses (each triple carries one of the lowest pairs),
  triples, pairs and singles. Each play costs about 1, less when it is strong (high
  cards win tricks back); a bomb costs less than nothing. Bombs a farmer may no longer
  play are split. The plan's cost estimates the tricks the hand still has to win.
* **Lead** the weakest play of the plan (long plays a little earlier, bombs last); cash
  the plays nobody can beat first when only one weak play would be left; help a partner
  farmer holding one or two cards with a single or a pair; while an opponent holds
  n ≤ 5 cards, avoid leading plays of n cards.
* **Follow** an opponent with the reply that lowers the plan's cost the most, i.e. the
  cheapest play that beats without breaking the plan, or pass when every reply would
  break it, unless the opponent is about to go out. Bombs are kept for when they
  matter: the opponent is close to going out (or, for farmers, the landlord takes the
  trick with a strong play while its hand shrinks), or a bomb leaves a hand we can play
  out. A farmer does not overtake a partner farmer who is winning the trick, unless
  that lets it go out at once, or the landlord, close to going out, still acts in this
  trick and could beat the partner while we hold a play it cannot beat.
* **Bid** by an estimated chance of winning as landlord (logistic models fitted on
  bot-against-bot hands); 摊打 only with an overwhelming hand; 报到 compares the sure
  不打 payment with the expected value of playing on (打) and of declining.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from math import exp
from typing import AbstractSet, NamedTuple

from ..rules import Combination, legal_plays, report_units
from ..rules.cards import BIG_JOKER, COPIES, NUM_RANKS, SMALL_JOKER, TWO, Counts, counts_of
from ..rules.combinations import (
    BOMB,
    FULL_HOUSE,
    JOKER_BOMB,
    PAIR,
    PLANE_WITH_PAIRS,
    SEQUENCE_BY_WIDTH,
    SEQUENCE_TYPES,
    SINGLE,
    TRIPLE,
    position_rank,
)
from ..rules.errors import RulesError
from ..rules.moves import pick_cards, verify_play
from .commands import Bid, Command, Pass, Play, Report, ShowHand
from .policies import acting_party
from .state import BIDDING, PLAYING, REPORT, SHOW_HAND
from .views import SeatView

_WIDTH_TYPE = {width: kind for width, (kind, _) in SEQUENCE_BY_WIDTH.items()}
_MIN_LENGTH = {1: 5, 2: 3, 3: 2}
#: Rank index at each sequence position 1…14 (index 0 and 15 unused).
_POS_RANK = [-1] + [position_rank(p) for p in range(1, 15)] + [-1]


# --------------------------------------------------------------------------------------
# Costs: roughly "tricks still to win"; strong plays cost less, bombs less than nothing.
# --------------------------------------------------------------------------------------

def _rank_value(r: int) -> int:
    """A rank index on the scale of sequence positions: 3…K = 3…13, A 14, 2 15, B 16, R 17."""
    return r + 3


def _play_cost(value: int) -> float:
    s = value / 17.0
    return 1.0 - 0.5 * s * s


#: Cost of a single / pair / triple / full house by the rank index deciding it.
_RANK_COST = [_play_cost(_rank_value(r)) for r in range(NUM_RANKS)]
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


def _counts(entries) -> Counts:
    counts = [0] * NUM_RANKS
    for r, n in entries:
        counts[r] += n
    return tuple(counts)


def _sequence(width: int, start: int, length: int) -> tuple[Combination, float]:
    ranks = [_POS_RANK[p] for p in range(start, start + length)]
    top = start + length - 1
    return Combination(_WIDTH_TYPE[width], top, _counts((r, width) for r in ranks)), _POS_COST[top]


#: _SEQ[width][start][length] -> (combination, cost)
_SEQ = {
    w: {
        s: {n: _sequence(w, s, n) for n in range(_MIN_LENGTH[w], 14) if s + n - 1 <= 14 and n <= 13}
        for s in range(1, 15)
    }
    for w in (1, 2, 3)
}


def _plane_with_pairs(n: int, ts: int, ps: int) -> tuple[Combination, float]:
    counts = [0] * NUM_RANKS
    for p in range(ts, ts + n):
        counts[_POS_RANK[p]] += 3
    for p in range(ps, ps + n):
        counts[_POS_RANK[p]] += 2
    top = ts + n - 1
    return Combination(PLANE_WITH_PAIRS, top, tuple(counts)), _POS_COST[top]


#: Planes with pairs by (number of triples, start position of the triples).
_PWP: dict[tuple[int, int], list[tuple[Combination, float]]] = {}
for _n in range(2, 7):
    for _ts in range(1, 16 - _n):
        for _ps in range(1, 16 - _n):
            _combo, _cost = _plane_with_pairs(_n, _ts, _ps)
            if max(_combo.counts) <= 8:
                _PWP.setdefault((_n, _ts), []).append((_combo, _cost))


def _split_bomb(n: int) -> tuple[int, int, int]:
    """How a rank held ``n`` (≥ 4) times is played when it may not be a bomb:
    (triples, pairs, singles)."""
    return {4: (0, 2, 0), 5: (1, 1, 0), 6: (2, 0, 0), 7: (2, 0, 1), 8: (2, 1, 0)}[n]


class _Context(NamedTuple):
    bomb_cap: int | None  # bombs the seat may still play (None: no limit)
    locked: frozenset  # reported ranks (whole bombs only)
    joker_bomb: bool  # BBRR is a bomb in this ruleset


def _leaf(counts: Counts, ctx: _Context, build: bool = False):
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
    for r in pairs[len(triples):]:
        cost += _RANK_COST[r]
    if not build:
        return cost
    combos: list[Combination] = []
    for n, r in bombs:
        if r == BIG_JOKER:
            combos.append(Combination(JOKER_BOMB, BIG_JOKER, _counts(((SMALL_JOKER, 2), (BIG_JOKER, 2)))))
        else:
            combos.append(Combination(BOMB, r, _counts(((r, n),))))
    carried = pairs[: len(triples)]
    # Give the lowest pairs to the lowest triples; a pair of the triple's own rank (a split
    # bomb) cannot go with it, so pair them up avoiding that.
    carried_left = list(carried)
    for t in triples:
        q = next((q for q in carried_left if q != t), None)
        if q is None:
            combos.append(Combination(TRIPLE, t, _counts(((t, 3),))))
        else:
            carried_left.remove(q)
            combos.append(Combination(FULL_HOUSE, t, _counts(((t, 3), (q, 2)))))
    for q in carried_left + pairs[len(triples):]:
        combos.append(Combination(PAIR, q, _counts(((q, 2),))))
    for r in singles:
        combos.append(Combination(SINGLE, r, _counts(((r, 1),))))
    return cost, combos


def _sub(counts: Counts, delta: Counts) -> Counts:
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
        self.memo: dict = {}
        self.budget = budget
        self.width = width
        self.nodes = 0

    def options(self, counts: Counts, p: int):
        """The most promising sequences starting at position ``p`` or later, as
        (estimated gain, start, combination, cost)."""
        ctx = self.ctx
        avail = counts
        if ctx.locked:
            avail = tuple(0 if r in ctx.locked else n for r, n in enumerate(counts))
        out = []
        pos_rank = _POS_RANK
        group = _GROUP_COST
        for width in (1, 2, 3):
            shortest = _MIN_LENGTH[width]
            end_ok = _END_OK[width]
            row_w = _SEQ[width]
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
            out = [(cost + _leaf(_sub(counts, combo.counts), ctx) - base, q, combo, cost) for _, q, combo, cost in out]
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
                total = cost + self.best(_sub(counts, combo.counts), q)
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
            counts = _sub(counts, combo.counts)


_PLAN_CACHE: dict = {}
_PLAN_CACHE_LIMIT = 5000
#: Search nodes per plan: keeps the worst case fast (the rest is grouped without sequences).
SEARCH_BUDGET = 80
#: Sequences tried at each node of the search, best first by a one-step estimate.
SEARCH_WIDTH = 6


def plan(counts: Counts, bomb_cap: int | None = None, locked: AbstractSet[int] = frozenset(), joker_bomb: bool = True) -> Plan:
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


# --------------------------------------------------------------------------------------
# Hand strength: an estimated chance of winning as landlord.
# --------------------------------------------------------------------------------------


def _logistic(x: float) -> float:
    if x < -30:
        return 0.0
    if x > 30:
        return 1.0
    return 1.0 / (1.0 + exp(-x))


def _features(counts: Counts, joker_bomb: bool, locked: AbstractSet[int] = frozenset()) -> tuple[float, int, int]:
    """(plan cost, bombs in the plan, high cards: jokers and 2s)."""
    p = plan(counts, None, locked, joker_bomb)
    high = counts[SMALL_JOKER] + counts[BIG_JOKER] + counts[TWO]
    return p.cost, len(p.bombs), high


def _deal_features(counts: Counts, joker_bomb: bool) -> tuple[int, int, int, int, int]:
    """(bombs, big jokers, 2s and aces, singles, triples) of the 25 dealt cards."""
    bombs = sum(1 for r in range(SMALL_JOKER) if counts[r] >= 4)
    if joker_bomb and counts[SMALL_JOKER] == 2 and counts[BIG_JOKER] == 2:
        bombs += 1
    singles = sum(1 for n in counts if n == 1)
    triples = sum(1 for r in range(SMALL_JOKER) if counts[r] == 3)
    return bombs, counts[BIG_JOKER], counts[TWO] + counts[TWO - 1], singles, triples


#: Logistic models of the landlord's chance to beat three farmers, fitted on 9,000
#: bot-against-bot hands (both rulesets): from the 25 dealt cards (for bidding; the
#: plan of 25 cards says little once the bottom joins them) and from the 33 cards the
#: landlord holds (plan cost, bombs, jokers and 2s). ``*_UNLIMITED`` is the change when
#: the farmers may bomb without limit (after 头撂, or a bid of 3 under shanghai-local).
BID_MODEL = (0.113, 0.49, 0.37, 0.067, -0.076, 0.135)
BID_UNLIMITED = -0.415
HAND_MODEL = (0.841, -0.391, 0.572, 0.195)
HAND_UNLIMITED = -0.472


def landlord_chance(
    counts: Counts,
    joker_bomb: bool,
    *,
    with_bottom: bool,
    locked: AbstractSet[int] = frozenset(),
    unlimited: float = 0.0,
) -> float:
    """Estimated chance that this hand wins as landlord (``with_bottom``: the 33 cards the
    landlord holds; else the 25 dealt cards, before the bottom is known). ``unlimited``:
    the share of farmers who may bomb without limit."""
    if with_bottom:
        a, b, c, d = HAND_MODEL
        cost, bombs, high = _features(counts, joker_bomb, locked)
        x = a + b * cost + c * bombs + d * high + HAND_UNLIMITED * unlimited
    else:
        a, *weights = BID_MODEL
        x = a + sum(w * f for w, f in zip(weights, _deal_features(counts, joker_bomb))) + BID_UNLIMITED * unlimited
    return _logistic(x)


# --------------------------------------------------------------------------------------
# The policy.
# --------------------------------------------------------------------------------------

#: Bid the highest value whose threshold the estimated chance of winning as landlord
#: reaches. Bots win about 70% of their hands as landlord against bot farmers, so these
#: are set above that: the bot bids on a little over half of its hands, 3 on the best 10%.
BID_THRESHOLDS = ((3, 0.8), (2, 0.77), (1, 0.72))
#: 摊打 (play face up, ×2) only with an overwhelming hand (about 3% of 头撂 hands).
SHOW_HAND_THRESHOLD = 0.93


def _lead_key(c: Combination) -> float:
    """Which play of the plan to lead first: low plays first, long ones a little earlier."""
    value = c.top if c.type in SEQUENCE_TYPES else _rank_value(c.top)
    return value - 0.3 * (c.size - 1)


def _strength(c: Combination) -> float:
    """How hard a play is to beat, from 0 to 1."""
    if c.type in SEQUENCE_TYPES:
        return c.top / 14.0
    return _rank_value(c.top) / 17.0


def _bomb_key(c: Combination) -> tuple[int, int]:
    return (99, 99) if c.type is JOKER_BOMB else (c.size, c.top)


class _Seat:
    """What one decision needs to know about the table, from the seat's view."""

    def __init__(self, view: SeatView):
        self.view = view
        self.me = view.seat
        self.landlord = view.landlord
        self.is_landlord = self.me == self.landlord
        self.cards = [info.cards if info is not None else 0 for info in view.seats]
        others = [s for s in range(len(view.seats)) if s != self.me]
        self.opponents = others if self.is_landlord else [self.landlord]
        self.partners = [] if self.is_landlord else [s for s in others if s != self.landlord]
        self.ruleset = view.table.ruleset
        self.locked = view.locked if self.is_landlord else frozenset()
        self.bombs_left = view.bombs_left
        self.counts = counts_of(view.hand)
        self.size = len(view.hand)
        self.min_opponent = min(self.cards[s] for s in self.opponents)
        self.max_opponent = max(self.cards[s] for s in self.opponents)

    def plan(self, counts: Counts | None = None) -> Plan:
        return plan(self.counts if counts is None else counts, self.bombs_left, self.locked, self.ruleset.joker_bomb)

    def plays(self, lead: Combination | None) -> list[Combination]:
        return list(legal_plays(self.counts, lead, ruleset=self.ruleset, bombs_left=self.bombs_left, locked=self.locked))

    def opponent_pool(self) -> Counts:
        """Cards an opponent may hold: the landlord's hand when shown (摊打) and we are a
        farmer, else every card we cannot see."""
        view = self.view
        if not self.is_landlord and view.landlord_hand is not None:
            return counts_of(view.landlord_hand)
        return tuple(COPIES[r] - self.counts[r] for r in range(NUM_RANKS))

    def safe(self, combo: Combination, pool: Counts) -> bool:
        """Whether no opponent can beat the play without a bomb."""
        if combo.type.is_bomb:
            return True
        if combo.size > self.max_opponent:
            return True
        for _ in legal_plays(pool, combo, ruleset=self.ruleset, bombs_left=0):
            return False
        return True


@dataclass(frozen=True)
class Style:
    """The knobs of the play (card counts are the opponents' cards left)."""

    #: Follow an opponent when the best reply lowers the plan's cost by at least this.
    farmer_threshold: float = 0.3
    landlord_threshold: float = 0.0
    #: Prefer stronger replies (harder to beat) by this much per unit of strength.
    farmer_block: float = 0.0
    landlord_block: float = 0.3
    #: Reply with the best non-bomb play whatever it breaks, when the landlord holds at
    #: most this many cards (as a farmer) / the trick's leader does (as landlord).
    farmer_urgent: int = 8
    landlord_urgent: int = 6
    #: Bomb when the trick's leader holds at most this many cards (as landlord), or the
    #: landlord does (as farmer)…
    farmer_bomb: int = 8
    #: …or at most this many, when it takes the trick with a strong play (a bomb, a play
    #: of five cards or more, or one of at least ``strong_play`` strength, see _strength).
    farmer_bomb_on_strong: int = 20
    strong_play: float = 0.8
    landlord_bomb: int = 5
    #: Take over a partner's trick (with a play the landlord cannot beat) when the
    #: landlord holds at most this many cards.
    farmer_reinforce: int = 6
    #: When leading, avoid plays of n cards while an opponent holds n ≤ this many cards.
    lead_danger: int = 5


class BotPolicy:
    """A deterministic rule-based policy (see the module docstring); sees only its view."""

    name = "bot"

    def __init__(self, rng: random.Random | None = None, style: Style | None = None):
        self.rng = rng  # unused: the bot is deterministic
        self.style = style or Style()

    # -- the protocol ----------------------------------------------------------------

    def act(self, view: SeatView) -> Command:
        seat, by = view.seat, acting_party(view)
        if view.phase == BIDDING:
            return Bid(seat, self.bid(view), by)
        if view.phase == SHOW_HAND:
            return ShowHand(seat, self.show_hand(view), by)
        if view.phase == REPORT:
            return Report(seat, self.report(view), by)
        if view.phase != PLAYING:
            raise ValueError(f"nothing to decide in phase {view.phase!r}")
        return self.play(view)

    # -- bidding, 摊打, 报到 ------------------------------------------------------------

    def bid(self, view: SeatView) -> int:
        ruleset = view.table.ruleset
        counts = counts_of(view.hand)
        allowed = view.bid_choices()
        for value, threshold in BID_THRESHOLDS:
            if value not in allowed:
                continue
            unlimited = 0.0
            if value == 3:
                # A bid of 3 frees the farmers' bombs: every farmer under shanghai-local,
                # those who never get a turn to bid under shanghai-platform.
                first = view.seat == view.marked_seat
                unlimited = 1.0 if ruleset.bomb_limit.basis == "landlord_bid" or first else 0.5
            if landlord_chance(counts, ruleset.joker_bomb, with_bottom=False, unlimited=unlimited) >= threshold:
                return value
        return 0

    def show_hand(self, view: SeatView) -> bool:
        chance = landlord_chance(counts_of(view.hand), view.table.ruleset.joker_bomb, with_bottom=True, unlimited=1.0)
        return chance >= SHOW_HAND_THRESHOLD

    def report(self, view: SeatView) -> str:
        """不打 wins ``3 × N`` stakes for sure; 打 doubles the stake and costs nothing when
        lost, and every reported unit is played as a bomb when we win (×2 each when bombs
        double); 不报 (decline) keeps the cards free but risks paying."""
        ruleset = view.table.ruleset
        counts = counts_of(view.hand)
        units = report_units(counts, ruleset)
        n = len(units)
        locked = frozenset(r for unit in units for r in unit)
        bomb_factor = 2 if ruleset.bombs_double else 1
        unlimited = _unlimited_share(view)
        chance_play = landlord_chance(counts, ruleset.joker_bomb, with_bottom=True, locked=locked, unlimited=unlimited)
        chance_free = landlord_chance(counts, ruleset.joker_bomb, with_bottom=True, unlimited=unlimited)
        bombs_play = len(plan(counts, None, locked, ruleset.joker_bomb).bombs)
        bombs_free = len(plan(counts, None, frozenset(), ruleset.joker_bomb).bombs)
        value_no_play = 3.0 * n
        value_play = chance_play * 3.0 * 2 * bomb_factor ** bombs_play
        value_decline = (2 * chance_free - 1) * 3.0 * bomb_factor ** bombs_free
        best = max(value_no_play, value_play, value_decline)
        if best == value_no_play:
            return "no_play"
        return "play" if best == value_play else "decline"

    # -- playing ------------------------------------------------------------------------

    def play(self, view: SeatView) -> Command:
        seat = _Seat(view)
        try:
            combo = self.lead(seat) if view.lead is None else self.follow(seat)
        except RulesError:  # never expected; fall back to any legal play
            combo = None if view.lead is not None else next(iter(seat.plays(None)))
        return self.command(seat, combo)

    def command(self, seat: _Seat, combo: Combination | None) -> Command:
        view = seat.view
        by = acting_party(view)
        if combo is None:
            if view.lead is None:  # the leader may not pass
                combo = min(seat.plays(None), key=_lead_key)
            else:
                return Pass(view.seat, by)
        cards = pick_cards(view.hand, combo.counts)
        try:
            verify_play(view.hand, cards, view.lead, ruleset=seat.ruleset, bombs_left=seat.bombs_left, locked=seat.locked)
        except RulesError:
            fallback = seat.plays(view.lead)
            if view.lead is not None:
                return Pass(view.seat, by)
            cards = pick_cards(view.hand, min(fallback, key=_lead_key).counts)
        return Play(view.seat, cards, by)

    def lead(self, seat: _Seat) -> Combination:
        p = seat.plan()
        combos = list(p.combos)
        if len(combos) == 1:
            return combos[0]
        others = sorted(p.others, key=_lead_key)
        bombs = sorted(p.bombs, key=_bomb_key)
        if not others:
            return bombs[0]
        pool = seat.opponent_pool()
        safe = [c for c in others if seat.safe(c, pool)] if len(others) <= 4 else []
        if safe and len(others) - len(safe) <= 1:
            # Only one weak play would be left: cash the sure plays first.
            weak = [c for c in others if c not in safe]
            if not weak:
                return others[0]
            return max(safe, key=_lead_key)
        # Help a partner farmer who is about to go out.
        if seat.partners and seat.cards[seat.landlord] > 2:
            short = min(seat.cards[s] for s in seat.partners)
            if short == 1:
                singles = [c for c in others if c.type is SINGLE]
                if singles:
                    return singles[0]
            elif short == 2:
                pairs = [c for c in others if c.type is PAIR]
                if pairs:
                    return pairs[0]
        # An opponent holding n ≤ 5 cards goes out by beating a lead of n cards: lead
        # other sizes while we can.
        danger = {seat.cards[s] for s in seat.opponents if seat.cards[s] <= self.style.lead_danger}
        if danger:
            keep = [c for c in others if c.size not in danger]
            if keep:
                return keep[0]
            if bombs:
                return bombs[0]
            return max(others, key=_lead_key)  # lead the strongest of what is left
        return others[0]

    def follow(self, seat: _Seat) -> Combination | None:
        view = seat.view
        style = self.style
        lead = view.lead
        candidates = seat.plays(lead)
        if not candidates:
            return None
        for c in candidates:
            if c.size == seat.size:
                return c  # go out now
        if view.lead_seat in seat.partners:
            return self.support(seat, candidates)
        leader_cards = seat.cards[view.lead_seat]
        if seat.is_landlord:
            urgent = leader_cards <= style.landlord_urgent or seat.min_opponent <= 3
            critical = leader_cards <= style.landlord_bomb or seat.min_opponent <= 2
            threshold = style.landlord_threshold
        else:
            landlord_cards = seat.min_opponent
            urgent = landlord_cards <= style.farmer_urgent
            # The landlord is close to going out, or takes the trick with a strong play
            # (a bomb, or a play we cannot hope to top otherwise) while its hand shrinks.
            critical = landlord_cards <= style.farmer_bomb or (
                landlord_cards <= style.farmer_bomb_on_strong
                and (lead.type.is_bomb or _strength(lead) >= style.strong_play or lead.size >= 5)
            )
            threshold = style.farmer_threshold
        # The opponent could go out next: it holds three cards or fewer (so no bomb either).
        if seat.is_landlord:
            must_stop = leader_cards <= 3 or seat.min_opponent <= 2
        else:
            must_stop = seat.min_opponent <= 3
        base = seat.plan()
        normal = [c for c in candidates if not c.type.is_bomb]
        bombs = [c for c in candidates if c.type.is_bomb]
        if must_stop:
            # A reply it cannot beat, else a bomb (it holds none), else the best we have.
            pool = seat.opponent_pool()
            safe = [c for c in normal if seat.safe(c, pool)]
            if safe:
                return self.cheapest(seat, safe, base)[0]
            if bombs:
                return self.best_bomb(seat, bombs, base)[0]
        block = style.landlord_block if seat.is_landlord else style.farmer_block
        best, best_value = self.cheapest(seat, normal, base, block)
        if best is not None and (urgent or best_value >= threshold):
            return best
        if not bombs:
            return None
        chosen, after = self.best_bomb(seat, bombs, base)
        rest = after.others
        wins = len(rest) <= 1 or (seat.is_landlord and len(rest) <= len(after.bombs) + 1)
        if critical or wins:
            return chosen
        return None

    def best_bomb(self, seat: _Seat, bombs: list[Combination], base: Plan) -> tuple[Combination, Plan]:
        """The bomb that hurts the plan least (ties: the smallest), with the plan after it."""
        chosen, chosen_value, chosen_plan = None, 0.0, base
        for c in bombs:
            after = seat.plan(_sub(seat.counts, c.counts))
            value = base.cost - after.cost
            if chosen is None or value > chosen_value + 1e-9 or (
                abs(value - chosen_value) <= 1e-9 and _bomb_key(c) < _bomb_key(chosen)
            ):
                chosen, chosen_value, chosen_plan = c, value, after
        return chosen, chosen_plan

    def cheapest(
        self, seat: _Seat, candidates: list[Combination], base: Plan, block: float = 0.0
    ) -> tuple[Combination | None, float | None]:
        """The reply that lowers the plan's cost the most (ties: the weakest), and by how
        much; ``block`` favours strong replies (harder to beat) by that much per unit of
        strength."""
        best, best_score, best_value = None, None, None
        for c in _prune(candidates, seat.counts):
            value = base.cost - seat.plan(_sub(seat.counts, c.counts)).cost
            score = value + block * _strength(c) if block else value
            if best_score is None or score > best_score + 1e-9:
                best, best_score, best_value = c, score, value
        return best, best_value

    def support(self, seat: _Seat, candidates: list[Combination]) -> Combination | None:
        """A partner farmer is winning the trick: pass, unless the landlord, about to go
        out, still acts in this trick and could beat the partner's play while we hold a
        play that it cannot beat (then take over with the cheapest such play)."""
        view = seat.view
        landlord = seat.landlord
        if seat.cards[landlord] > self.style.farmer_reinforce:
            return None
        n = len(view.seats)
        if (landlord - seat.me) % n >= (view.lead_seat - seat.me) % n:
            return None  # the landlord has passed this trick already
        pool = seat.opponent_pool()
        if view.lead.type.is_bomb or seat.safe(view.lead, pool):
            return None
        safe = [c for c in candidates if not c.type.is_bomb and seat.safe(c, pool)]
        if safe:
            best, _ = self.cheapest(seat, safe, seat.plan())
            return best
        return None


def _unlimited_share(view: SeatView) -> float:
    """The share of farmers who may bomb without limit."""
    limit = view.table.ruleset.bomb_limit
    farmers = [s for s in range(len(view.bids)) if s != view.landlord]
    free = sum(1 for s in farmers if limit.for_farmer(view.bids[s], view.bid) is None)
    return free / len(farmers)


def _prune(candidates: list[Combination], counts: Counts) -> list[Combination]:
    """Replies worth weighing: full houses only with the two cheapest pairs for each
    triple (a pair held exactly twice first, then the lowest)."""
    out = []
    pairs_for: dict[int, list[Combination]] = {}
    for c in candidates:
        if c.type is FULL_HOUSE:
            pairs_for.setdefault(c.top, []).append(c)
        else:
            out.append(c)
    for t, houses in pairs_for.items():
        def key(c: Combination, t=t) -> tuple[int, int]:
            q = next(r for r, n in enumerate(c.counts) if n == 2 and r != t)
            return (counts[q] != 2, q)

        out += sorted(houses, key=key)[:2]
    return out
