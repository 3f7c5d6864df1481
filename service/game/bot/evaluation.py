"""Evaluation: how strong a hand is, and the bids, 摊打 and 报到 that follow from it.

The strength model is an estimated chance of winning as landlord (logistic models fitted
on bot-against-bot hands). The bot bids and shows its hand (摊打) by that chance: by
thresholds, or by the points each choice was measured to gain at it (calibrated.py, the
``normal`` level); 报到 compares the sure 不打 payment with the expected value of playing on (打) and
of declining.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from math import exp

from ...rules import ReportChoice, locked_ranks, report_units
from ...rules.cards import ACE, BIG_JOKER, SMALL_JOKER, TWO, Counts, counts_of
from ..settlement import MAX_BID
from ..views import SeatView
from .calibrated import GAINS
from .planning import plan


def _logistic(x: float) -> float:
    if x < -30:
        return 0.0
    if x > 30:
        return 1.0
    return 1.0 / (1.0 + exp(-x))


def _features(
    counts: Counts, joker_bomb: bool, locked: AbstractSet[int] = frozenset()
) -> tuple[float, int, int]:
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
    return bombs, counts[BIG_JOKER], counts[TWO] + counts[ACE], singles, triples


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
        x = (
            a
            + sum(w * f for w, f in zip(weights, _deal_features(counts, joker_bomb)))
            + BID_UNLIMITED * unlimited
        )
    return _logistic(x)


#: Bid the highest value whose threshold the estimated chance of winning as landlord
#: reaches. Bots win about 70% of their hands as landlord against bot farmers, so these
#: are set above that: the bot bids on a little over half of its hands, 3 on the best 10%.
BID_THRESHOLDS = ((3, 0.8), (2, 0.77), (1, 0.72))
#: 摊打 (play face up, ×2) only with an overwhelming hand (about 3% of 头撂 hands): the
#: rule-based bot before levels. ``normal`` shows from a lower chance (levels.py).
SHOW_HAND_THRESHOLD = 0.93


def bid_chance(view: SeatView, value: int) -> float:
    """The estimated chance of winning as landlord after bidding ``value``."""
    ruleset = view.table.ruleset
    unlimited = 0.0
    if value == MAX_BID:
        # A bid of 3 frees the farmers' bombs: every farmer under shanghai-local,
        # those who never get a turn to bid under shanghai-platform.
        first = view.seat == view.marked_seat
        unlimited = 1.0 if ruleset.bomb_limit.basis == "landlord_bid" or first else 0.5
    return landlord_chance(
        counts_of(view.hand), ruleset.joker_bomb, with_bottom=False, unlimited=unlimited
    )


def bid(view: SeatView, thresholds: tuple[tuple[int, float], ...] = BID_THRESHOLDS) -> int:
    """The highest bid whose threshold the chance of winning as landlord reaches (0: pass)."""
    allowed = view.bid_choices()
    for value, threshold in thresholds:
        if value in allowed and bid_chance(view, value) >= threshold:
            return value
    return 0


#: The width of the bands of p the measured gains are filed by (calibration.py).
BAND = 0.05
#: Bands of p from 0 to 1.
BANDS = round(1 / BAND)


def band_of(chance: float) -> int:
    """The band of p that ``chance`` falls in (a chance of 1 in the last)."""
    return min(BANDS - 1, int(chance / BAND))


def measured_gain(view: SeatView, choice: str, chance: float) -> float | None:
    """What ``choice`` was measured to gain over its alternative (passing, not showing)
    at this table with chance ``chance``, in points per hand; None when not measured."""
    ruleset = view.table.ruleset
    gains = GAINS.get((ruleset.name, ruleset.bombs_double), {}).get(choice)
    if gains is None:
        return None
    return gains[band_of(chance)]


def bid_by_points(view: SeatView, fallback: tuple[tuple[int, float], ...]) -> int:
    """The bid with the highest measured gain over passing, if any gains (0: pass); by
    the ``fallback`` thresholds where the table was not measured."""
    first = view.seat == view.marked_seat
    best, best_gain = 0, 0.0
    for value in view.bid_choices():
        if not value:
            continue
        gain = measured_gain(view, bid_key(value, first), bid_chance(view, value))
        if gain is None:
            return bid(view, fallback)
        if gain > best_gain:
            best, best_gain = value, gain
    return best


def bid_key(value: int, first: bool) -> str:
    """The name of a bid among the measured choices: the first bidder's bid of 3 is 头撂."""
    return f"{'first' if first else 'bid'} {value}"


#: The measured choice of 摊打.
SHOW = "show"


def show_chance(view: SeatView) -> float:
    """The estimated chance of winning as landlord with the hand face up: the farmers,
    after 头撂, bomb without limit."""
    return landlord_chance(
        counts_of(view.hand), view.table.ruleset.joker_bomb, with_bottom=True, unlimited=1.0
    )


def show_hand(view: SeatView, threshold: float = SHOW_HAND_THRESHOLD) -> bool:
    """摊打 when the estimated chance of winning as landlord reaches ``threshold``."""
    return show_chance(view) >= threshold


def show_by_points(view: SeatView, fallback: float) -> bool:
    """摊打 when it was measured to gain points with this chance (by the ``fallback``
    threshold where the table was not measured)."""
    chance = show_chance(view)
    gain = measured_gain(view, SHOW, chance)
    return chance >= fallback if gain is None else gain > 0


def report(view: SeatView) -> ReportChoice:
    """不打 wins ``3 × N`` stakes for sure; 打 doubles the stake and costs nothing when
    lost, and every reported unit is played as a bomb when we win (×2 each when bombs
    double); 不报 (decline) keeps the cards free but risks paying."""
    ruleset = view.table.ruleset
    counts = counts_of(view.hand)
    units = report_units(counts, ruleset)
    n = len(units)
    locked = locked_ranks(units)
    bomb_factor = 2 if ruleset.bombs_double else 1
    unlimited = _unlimited_share(view)
    chance_play = landlord_chance(
        counts, ruleset.joker_bomb, with_bottom=True, locked=locked, unlimited=unlimited
    )
    chance_free = landlord_chance(counts, ruleset.joker_bomb, with_bottom=True, unlimited=unlimited)
    bombs_play = len(plan(counts, None, locked, ruleset.joker_bomb).bombs)
    bombs_free = len(plan(counts, None, frozenset(), ruleset.joker_bomb).bombs)
    value_no_play = 3.0 * n
    value_play = chance_play * 3.0 * 2 * bomb_factor**bombs_play
    value_decline = (2 * chance_free - 1) * 3.0 * bomb_factor**bombs_free
    best = max(value_no_play, value_play, value_decline)
    if best == value_no_play:
        return ReportChoice.NO_PLAY
    return ReportChoice.PLAY if best == value_play else ReportChoice.DECLINE


def _unlimited_share(view: SeatView) -> float:
    """The share of farmers who may bomb without limit."""
    limit = view.table.ruleset.bomb_limit
    assert view.bid is not None  # 报到 comes after bidding
    farmers = [s for s in range(len(view.bids)) if s != view.landlord]
    free = sum(1 for s in farmers if limit.for_farmer(view.bids[s], view.bid) is None)
    return free / len(farmers)
