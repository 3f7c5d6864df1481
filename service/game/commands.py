"""Commands: what a seat (or the system, or the table's creator) asks the match to do.

:func:`service.game.decider.decide` turns a command into events or refuses it with a
:class:`~service.game.errors.GameError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..rules import Card, ReportChoice
from .events import PLAYER
from .table import Table


@dataclass(frozen=True, slots=True)
class Command:
    name: ClassVar[str]


@dataclass(frozen=True, slots=True)
class CreateMatch(Command):
    name = "create_match"
    match_id: str
    table: Table


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
class Bid(Command):
    name = "bid"
    seat: int
    value: int  # 1, 2, 3, or 0 to pass
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class ShowHand(Command):
    name = "show_hand"
    seat: int
    value: bool
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class Report(Command):
    name = "report"
    seat: int
    value: ReportChoice
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class Play(Command):
    name = "play"
    seat: int
    cards: tuple[Card, ...]
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class Pass(Command):
    name = "pass"
    seat: int
    by: str = PLAYER


@dataclass(frozen=True, slots=True)
class Disconnect(Command):
    name = "disconnect"
    seat: int
    reason: str = "left"  # or "deadline"


@dataclass(frozen=True, slots=True)
class Resume(Command):
    name = "resume"
    seat: int


@dataclass(frozen=True, slots=True)
class Settle(Command):
    """Records that the ended hand's settlement was written to the ledger."""

    name = "settle"
