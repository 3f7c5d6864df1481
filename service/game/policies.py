"""Policies: who decides for a seat the system plays (a bot seat, or 系统代打 for a
disconnected player). A policy sees only :class:`SeatView` — never another seat's hidden
cards, never the bottom unless it is the landlord — and always returns a legal command."""

from __future__ import annotations

import random
from typing import Protocol

from ..rules import Combination, ReportChoice, pick_cards
from .actions import by_default
from .commands import Bid, Pass, Play, Report, SeatCommand, ShowHand
from .events import BOT, PLAYER
from .state import BIDDING, PLAYING, REPORT, SHOW_HAND
from .views import SeatView


class Policy(Protocol):
    name: str

    def act(self, view: SeatView) -> SeatCommand:
        """A legal command for ``view.seat``, whose turn it is."""


def acting_party(view: SeatView) -> str:
    """``bot`` for a bot seat or a disconnected player, else ``player``."""
    assert view.seat is not None, "a policy acts for a seat"
    info = view.seats[view.seat]
    assert info is not None
    return BOT if info.bot or info.disconnected else PLAYER


class RandomPolicy:
    """Uniformly random among the legal actions: the baseline the bot is measured against."""

    name = "random"

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()

    def act(self, view: SeatView) -> SeatCommand:
        seat, by, rng = view.seat, acting_party(view), self.rng
        assert seat is not None
        if view.phase == BIDDING:
            return Bid(seat, rng.choice(view.bid_choices()), by)
        if view.phase == SHOW_HAND:
            return ShowHand(seat, rng.random() < 0.5, by)
        if view.phase == REPORT:
            return Report(seat, rng.choice(tuple(ReportChoice)), by)
        if view.phase != PLAYING:
            return by_default(view.phase, seat, by)
        options: list[Combination | None] = list(view.plays())
        if view.lead is not None:
            options.append(None)
        choice = rng.choice(options)
        return (
            Pass(seat, by)
            if choice is None
            else Play(seat, pick_cards(view.hand, choice.counts), by)
        )
