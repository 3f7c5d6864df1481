"""Commands: what a seat (or the system, or the table's creator) asks the match to do.

:func:`service.game.decider.decide` turns a command into events or refuses it with a
:class:`~service.game.errors.GameError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..rules import Card, ReportChoice
from .events import PLAYER
from .settings import MatchSettings


@dataclass(frozen=True, slots=True)
class Command:
    name: ClassVar[str]


@dataclass(frozen=True, slots=True)
class SeatCommand(Command):
    """A command about one seat: its decisions, and its leaving and resuming (the actions of
    the API and the hand record)."""

    seat: int


@dataclass(frozen=True, slots=True)
class CreateMatch(Command):
    name = "create_match"
    match_id: str
    table: MatchSettings


@dataclass(frozen=True, slots=True)
class TakeSeat(Command):
    """Seats a player (``player`` id) or a system bot (``bot=True``, no player)."""

    name = "take_seat"
    seat: int
    player: str | None = None
    bot: bool = False


@dataclass(frozen=True, slots=True)
class DealHand(Command):
    """Deals the hand from ``seed`` (32 bytes from a secure source, drawn by the caller
    so that the decider stays pure)."""

    name = "deal"
    seed: bytes


@dataclass(frozen=True, slots=True)
class Bid(SeatCommand):
    name = "bid"
    value: int  # 1, 2, 3, or 0 to pass
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class ShowHand(SeatCommand):
    name = "show_hand"
    value: bool
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class Report(SeatCommand):
    name = "report"
    value: ReportChoice
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class Play(SeatCommand):
    name = "play"
    cards: tuple[Card, ...]
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class Pass(SeatCommand):
    name = "pass"
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class Disconnect(SeatCommand):
    name = "disconnect"
    reason: str = "left"  # or "deadline"


@dataclass(frozen=True, slots=True)
class Resume(SeatCommand):
    name = "resume"


@dataclass(frozen=True, slots=True)
class Settle(Command):
    """Records that the ended hand's settlement was written to the ledger."""

    name = "settle"
