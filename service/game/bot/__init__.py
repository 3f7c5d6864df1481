"""A rule-based bot for Shanghai Dou Dizhu (上海斗地主): :class:`BotPolicy`.

The bot sees only its :class:`~service.game.views.SeatView` (its own hand, every seat's
card count, the bids, the play to beat and who made it, its bomb allowance, the
landlord's hand after 摊打) and always returns a legal command. It is deterministic.

It has three parts:

* :mod:`.planning` splits a hand into few plays (:func:`plan`); the plan's cost
  estimates the tricks the hand still has to win.
* :mod:`.evaluation` estimates the chance of winning as landlord from the hand, and
  bids, plays face up (摊打) and answers 报到 by it.
* :mod:`.policy` leads and follows by the plan: :class:`BotPolicy` and the knobs of its
  play, :class:`Style`.

On top of it, :mod:`.search` weighs candidate plays by playing sampled deals out, and
:mod:`.levels` makes the levels a table asks for (``easy``, ``normal``, ``hard``) from
these parts (docs/bot.md).
"""

from .planning import Plan, plan
from .policy import BotPolicy, Style

__all__ = ["BotPolicy", "Plan", "Style", "plan"]
