"""A table that plays hand after hand: its state, ``evolve_table(state, event) -> state``
and what it waits for (:func:`due`); its commands and ``decide_table`` are in
:mod:`service.game.table_decider`. Each hand is a match of its own (one hand, as ever);
the table keeps only the seats and the scoreboard from one hand to the next."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from ..rules.deal import SEATS
from .errors import GameError
from .events import (
    Event,
    HandSettled,
    HandStarted,
    PlayerJoined,
    PlayerLeft,
    SeatFreed,
    TableClosed,
    TableCreated,
)
from .settings import MatchSettings

#: What a table waits for between hands: the next deal, system bots for its empty seats,
#: or (people only, a seat freed after a hand) closing.
DEAL, BOTS, CLOSE = "deal", "bots", "close"
#: Longest wait a table may be set to (for bots, between hands, before closing).
MAX_WAIT_SECONDS = 3600


class TableSeat(NamedTuple):
    player: str | None
    bot: bool
    #: The player left during a hand: the seat is freed when that hand is settled.
    leaving: bool = False


@dataclass(frozen=True)
class TableState:
    version: int = 0
    table_id: str | None = None
    table: MatchSettings | None = None
    private: bool = False
    invite: str | None = None
    bots_after: int | None = None
    next_hand_seconds: int = 0
    close_after: int = 0
    seats: tuple[TableSeat | None, ...] = (None,) * SEATS
    #: The match of the hand under way (``None`` between hands).
    match_id: str | None = None
    #: The players of the hand under way, by seat, as it was dealt (its nets are theirs).
    dealt: tuple[str | None, ...] = (None,) * SEATS
    hands: int = 0
    closed: bool = False
    #: Each player's net over the hands settled at this table.
    scoreboard: dict[str, Decimal] = field(default_factory=dict)

    def seat_of(self, player: str) -> int | None:
        for seat, taken in enumerate(self.seats):
            if taken is not None and taken.player == player:
                return seat
        return None

    @property
    def humans(self) -> int:
        return sum(1 for s in self.seats if s is not None and not s.bot)


initial_table = TableState()


def free_seats(state: TableState) -> list[int]:
    return [i for i, s in enumerate(state.seats) if s is None]


def _seat(
    seats: tuple[TableSeat | None, ...], index: int, value: TableSeat | None
) -> tuple[TableSeat | None, ...]:
    return seats[:index] + (value,) + seats[index + 1 :]


def evolve_table(state: TableState, event: Event) -> TableState:
    state = replace(state, version=state.version + 1)
    if isinstance(event, TableCreated):
        return replace(
            state,
            table_id=event.table_id,
            table=event.table,
            private=event.private,
            invite=event.invite,
            bots_after=event.bots_after,
            next_hand_seconds=event.next_hand_seconds,
            close_after=event.close_after,
        )
    if isinstance(event, PlayerJoined):
        joined = TableSeat(event.player, event.bot)
        return replace(state, seats=_seat(state.seats, event.seat, joined))
    if isinstance(event, PlayerLeft):
        taken = state.seats[event.seat]
        left = taken._replace(leaving=True) if event.at_hand_end and taken is not None else None
        return replace(state, seats=_seat(state.seats, event.seat, left))
    if isinstance(event, SeatFreed):
        return replace(state, seats=_seat(state.seats, event.seat, None))
    if isinstance(event, HandStarted):
        dealt = tuple(None if s is None else s.player for s in state.seats)
        return replace(state, match_id=event.match_id, dealt=dealt)
    if isinstance(event, HandSettled):
        scoreboard = dict(state.scoreboard)
        for player, net in zip(state.dealt, event.net, strict=True):
            if player is not None:
                scoreboard[player] = scoreboard.get(player, Decimal(0)) + Decimal(net)
        # A table's streams before seat_freed: the seats left during the hand are freed here.
        seats = tuple(None if s is None or s.leaving else s for s in state.seats)
        return replace(state, seats=seats, match_id=None, hands=event.number, scoreboard=scoreboard)
    if isinstance(event, TableClosed):
        return replace(state, seats=(None,) * SEATS, closed=True)
    raise GameError(f"not a table event: {event.type}", "unknown_event")


def replay_table(events: Iterable[Event], state: TableState = initial_table) -> TableState:
    for event in events:
        state = evolve_table(state, event)
    return state


def due(state: TableState) -> tuple[str, int] | None:
    """What the table waits for between hands, and how many seconds after its last event
    (never before its rest after a hand is over, :func:`due_at`): the next deal once four
    are seated; else bots for the empty seats after ``bots_after``; else, once it has
    played a hand, closing after ``close_after`` (a table of people only that lost one).
    Nothing during a hand, once closed, and once no player is seated (a table of bots
    alone plays no hand)."""
    if state.version == 0 or state.closed or state.match_id is not None or not state.humans:
        return None
    if not free_seats(state):
        return DEAL, 0
    if state.bots_after is not None:
        return BOTS, state.bots_after
    if state.hands:
        return CLOSE, state.close_after
    return None


def due_at(
    state: TableState, last_recorded_at: datetime | None, settled_at: datetime | None
) -> tuple[str, datetime] | None:
    """What the table waits for and when that wait is over: :func:`due` counted from its
    last event (``last_recorded_at``), and never before ``next_hand_seconds`` after the
    settlement of its last hand (``settled_at``, if a hand was settled and no other dealt
    since) whatever happened meanwhile: leaves, joins and bots taking seats do not cut the
    rest short."""
    waiting = due(state)
    if waiting is None or last_recorded_at is None:
        return None
    what, seconds = waiting
    at = last_recorded_at + timedelta(seconds=seconds)
    if settled_at is not None:
        at = max(at, settled_at + timedelta(seconds=state.next_hand_seconds))
    return what, at
