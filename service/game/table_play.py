"""A table that plays hand after hand: its state, ``evolve_table(state, event) -> state``
and what it waits for (:func:`due`); its commands and ``decide_table`` are in
:mod:`service.game.table_decider`. Each hand is a match of its own (one hand, as ever);
the table keeps only the seats and the scoreboard from one hand to the next."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import NamedTuple

from ..rules.deal import SEATS
from .errors import GameError
from .events import Event, HandSettled, HandStarted, PlayerJoined, PlayerLeft, TableCreated
from .table import Table

#: What a table waits for between hands: the next deal, or system bots for its empty seats.
DEAL, BOTS = "deal", "bots"
#: Longest wait a table may be set to (for bots, or between hands).
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
    table: Table | None = None
    private: bool = False
    invite: str | None = None
    bots_after: int | None = None
    next_hand_seconds: int = 0
    seats: tuple[TableSeat | None, ...] = (None,) * SEATS
    #: The match of the hand under way (``None`` between hands).
    match_id: str | None = None
    hands: int = 0
    #: The last event settled a hand: the next deal waits ``next_hand_seconds``.
    resting: bool = False
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
        )
    if isinstance(event, PlayerJoined):
        joined = TableSeat(event.player, event.bot)
        return replace(state, seats=_seat(state.seats, event.seat, joined), resting=False)
    if isinstance(event, PlayerLeft):
        taken = state.seats[event.seat]
        left = taken._replace(leaving=True) if event.at_hand_end and taken is not None else None
        return replace(state, seats=_seat(state.seats, event.seat, left), resting=False)
    if isinstance(event, HandStarted):
        return replace(state, match_id=event.match_id, resting=False)
    if isinstance(event, HandSettled):
        scoreboard = dict(state.scoreboard)
        for taken, net in zip(state.seats, event.net, strict=True):
            if taken is not None and taken.player is not None:
                scoreboard[taken.player] = scoreboard.get(taken.player, Decimal(0)) + Decimal(net)
        seats = tuple(None if s is None or s.leaving else s for s in state.seats)
        return replace(
            state,
            seats=seats,
            match_id=None,
            hands=event.number,
            resting=True,
            scoreboard=scoreboard,
        )
    raise GameError(f"not a table event: {event.type}", "unknown_event")


def replay_table(events: Iterable[Event], state: TableState = initial_table) -> TableState:
    for event in events:
        state = evolve_table(state, event)
    return state


def due(state: TableState) -> tuple[str, int] | None:
    """What the table waits for, and how many seconds after its last event: the next deal
    once four are seated (at once, or after its rest when the last event settled a hand),
    or bots for the empty seats after ``bots_after``. Nothing during a hand, and nothing
    once no player is seated (a table of bots alone plays no hand)."""
    if state.version == 0 or state.match_id is not None or not state.humans:
        return None
    if not free_seats(state):
        return DEAL, state.next_hand_seconds if state.resting else 0
    if state.bots_after is not None:
        return BOTS, state.bots_after
    return None
