"""The levels a table may ask for (its ``bot_level`` option): who the system plays as.

* ``easy`` plays like a casual person: the rule-based bot, but now and then (one decision
  in four) any legal play or pass instead, and no card counting.
* ``normal`` is the rule-based bot that counts points: it counts cards (an opponent can
  only hold what has not been played), bombs only to turn the hand when bombs double the
  stake, and bids by its own measured chances (see :data:`NORMAL_STYLE`).
* ``hard`` searches from its view (:class:`~.search.SearchPolicy`) on top of ``normal``.

A seat the system takes over from a disconnected player plays at least ``normal``
(:func:`takeover_level`): a player does not lose for having dropped out at an easy table.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace

from ..commands import Pass, Play, SeatCommand
from ..policies import Policy, RandomPolicy
from ..settings import BOT_LEVELS as LEVELS
from ..state import PLAYING
from ..views import SeatView
from .policy import BotPolicy, Style
from .search import DEFAULT_BUDGET, ENDGAME, MAX_BUDGET, WIN_WEIGHT, SearchPolicy

EASY, NORMAL, HARD = LEVELS

#: ``normal`` before its bidding and 摊打 went by measured points: counting cards, bombing
#: for points, bidding by thresholds of the estimated chance p of winning as landlord. As
#: landlord at bid v the bot expects v × 3 × (2p − 1) stakes: worth bidding, as high as it
#: may, whenever p > 1/2 (p estimated with the farmers' freed bombs for a bid of 3). A bomb
#: that does not win the hand at once waits until the opponent holds two cards or fewer
#: when bombs double: measured in duplicate, earlier bombs cost more in doubled losses than
#: they win. 摊打 from p = 0.6 (playing each 头撂 hand out both ways, showing gained from
#: there on). Kept as a baseline (``normal-thresholds``) to measure ``normal`` against.
THRESHOLD_STYLE = Style(
    count_cards=True,
    stake_bomb=2,
    bid_thresholds=((3, 0.5), (2, 0.5), (1, 0.5)),
    show_threshold=0.6,
)
#: ``normal``: as above, but it bids and shows its hand (摊打) by the points each choice
#: was measured to gain at its estimated chance (calibrated.py, ``ddz simulate
#: --calibrate``); the thresholds above decide where nothing was measured.
NORMAL_STYLE = replace(THRESHOLD_STYLE, by_points=True)
#: How often ``easy`` makes a casual mistake.
EASY_MISTAKES = 0.25


class EasyPolicy:
    """The rule-based bot with mistakes; its dice come from the seed and the public view."""

    name = EASY

    def __init__(self, seed: str = "", mistakes: float = EASY_MISTAKES) -> None:
        self.seed = seed
        self.mistakes = mistakes
        self.base = BotPolicy()

    def act(self, view: SeatView) -> SeatCommand:
        rng = random.Random(f"{self.seed}:{view.match_id}:{view.version}:{view.seat}")
        if view.phase == PLAYING and rng.random() < self.mistakes:
            command = RandomPolicy(rng).act(view)
            if isinstance(command, (Pass, Play)):
                return command
        return self.base.act(view)


def policy(
    level: str,
    *,
    seed: str = "",
    budget: float | None = DEFAULT_BUDGET,
    samples: int = 10_000,
    clock: Callable[[], float] = time.perf_counter,
    extend: float | None = MAX_BUDGET,
    endgame: int = ENDGAME,
    win_weight: float = WIN_WEIGHT,
    search_show: bool = True,
) -> Policy:
    """The system's player at ``level`` (``budget``, ``samples``, ``clock``, ``extend``,
    ``endgame``, ``win_weight``, ``search_show``: the search's, for hard)."""
    if level == EASY:
        return EasyPolicy(seed)
    if level == NORMAL:
        return BotPolicy(style=NORMAL_STYLE)
    if level == HARD:
        return SearchPolicy(
            seed,
            budget=budget,
            samples=samples,
            base=BotPolicy(style=NORMAL_STYLE),
            clock=clock,
            extend=extend,
            endgame=endgame,
            win_weight=win_weight,
            search_show=search_show,
        )
    raise ValueError(f"no bot level {level!r} (one of {', '.join(LEVELS)})")


#: Players to measure the levels against: the bot as it was before levels, and that bot
#: always bidding the highest value (which beat it by about 80 points per hand).
BASELINES = {
    "bot": Style(),
    "max-bid": Style(bid_thresholds=((3, 0.0), (2, 0.0), (1, 0.0))),
    "normal-thresholds": THRESHOLD_STYLE,
}


#: ``hard`` with one of its ingredients left out, to measure what each is worth
#: (docs/bot.md, the ablation): no extension of an undecided search past its budget;
#: searching only once the hands hold 70 cards or fewer, as before; weighing points
#: alone, a won hand worth nothing more; 摊打 by the bot's measured points, not searched;
#: all four (the search as it was before 6 December 2026).
HARD_VARIANTS: dict[str, tuple[float | None, int, float, bool]] = {
    # name: (extend, endgame, win_weight, search_show), SearchPolicy's
    "hard-no-extend": (None, ENDGAME, WIN_WEIGHT, True),
    "hard-endgame-70": (MAX_BUDGET, 70, WIN_WEIGHT, True),
    "hard-points": (MAX_BUDGET, ENDGAME, 0.0, True),
    "hard-show-by-points": (MAX_BUDGET, ENDGAME, WIN_WEIGHT, False),
    "hard-before": (None, 70, 0.0, False),
}


def contestant(
    name: str,
    *,
    seed: str = "",
    budget: float | None = DEFAULT_BUDGET,
    clock: Callable[[], float] = time.perf_counter,
) -> Policy:
    """A level, a baseline or a variant of ``hard``, by name (``ddz simulate --pit``)."""
    if name in BASELINES:
        return BotPolicy(style=BASELINES[name])
    if name in HARD_VARIANTS:
        extend, endgame, win_weight, search_show = HARD_VARIANTS[name]
        return policy(
            HARD,
            seed=seed,
            budget=budget,
            clock=clock,
            extend=extend,
            endgame=endgame,
            win_weight=win_weight,
            search_show=search_show,
        )
    return policy(name, seed=seed, budget=budget, clock=clock)


def takeover_level(level: str) -> str:
    """The level the system plays a disconnected player's seat at: ``normal`` or better."""
    return NORMAL if level == EASY else level


def seat_level(view: SeatView, level: str) -> str:
    """The level for the seat of ``view`` at a table of ``level``: a bot seat plays the
    table's level, a disconnected player's seat at least ``normal``."""
    info = view.seats[view.seat] if view.seat is not None else None
    if info is not None and not info.bot:
        return takeover_level(level)
    return level
