"""A table that plays hand after hand, as a pure decider like the match's: its commands,
``decide_table(state, command) -> events``, ``evolve_table(state, event) -> state`` and
what it waits for (:func:`due`). Each hand is a match of its own (one hand, as ever);
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


@dataclass(frozen=True, slots=True)
class TableCommand:
    pass


@dataclass(frozen=True, slots=True)
class CreateTable(TableCommand):
    table_id: str
    table: Table
    private: bool = False
    invite: str | None = None
    bots_after: int | None = None
    next_hand_seconds: int = 5


@dataclass(frozen=True, slots=True)
class Join(TableCommand):
    """A player takes the first free seat (with the ``invite`` of a private table)."""

    player: str
    invite: str | None = None


@dataclass(frozen=True, slots=True)
class FillWithBots(TableCommand):
    """System bots take every empty seat."""


@dataclass(frozen=True, slots=True)
class Leave(TableCommand):
    player: str


@dataclass(frozen=True, slots=True)
class StartHand(TableCommand):
    match_id: str


@dataclass(frozen=True, slots=True)
class RecordHand(TableCommand):
    """The hand's match is settled with ``net`` per seat."""

    match_id: str
    net: tuple[str, ...]


def _wait(value: int | None, name: str) -> None:
    if value is not None and (type(value) is not int or not 0 <= value <= MAX_WAIT_SECONDS):
        raise GameError(
            f"{name} must be a whole number from 0 to {MAX_WAIT_SECONDS}", "invalid_table"
        )


def _created(state: TableState) -> None:
    if state.version == 0:
        raise GameError("no such table", "table_not_found")


def _between_hands(state: TableState) -> None:
    if state.match_id is not None:
        raise GameError("a hand is under way at this table", "hand_in_play")


def _free_seats(state: TableState) -> list[int]:
    return [i for i, s in enumerate(state.seats) if s is None]


def decide_table(state: TableState, command: TableCommand) -> list[Event]:
    """The events of ``command`` on the table, or a :class:`GameError` refusing it."""
    if isinstance(command, CreateTable):
        if state.version:
            raise GameError("this table exists already", "table_exists")
        _wait(command.bots_after, "bots_after")
        _wait(command.next_hand_seconds, "next_hand_seconds")
        if command.private != (command.invite is not None):
            raise GameError("a private table, and only one, has an invite code", "invalid_table")
        return [
            TableCreated(
                command.table_id,
                command.table,
                command.private,
                command.invite,
                command.bots_after,
                command.next_hand_seconds,
            )
        ]
    _created(state)
    if isinstance(command, Join):
        if state.private and command.invite != state.invite:
            raise GameError(
                "this table is private: join it with its invite code", "invite_required"
            )
        if state.seat_of(command.player) is not None:
            raise GameError("the player is seated at this table already", "already_seated")
        free = _free_seats(state)
        if not free:
            raise GameError("every seat of this table is taken", "table_full")
        return [PlayerJoined(free[0], command.player, False)]
    if isinstance(command, FillWithBots):
        _between_hands(state)
        free = _free_seats(state)
        if not free:
            raise GameError("every seat of this table is taken", "table_full")
        return [PlayerJoined(seat, None, True) for seat in free]
    if isinstance(command, Leave):
        seat = state.seat_of(command.player)
        taken = None if seat is None else state.seats[seat]
        if seat is None or taken is None or taken.leaving:
            raise GameError("the caller has no seat at this table", "not_seated")
        return [PlayerLeft(seat, command.player, state.match_id is not None)]
    if isinstance(command, StartHand):
        _between_hands(state)
        if _free_seats(state):
            raise GameError("a hand needs four seats taken", "table_not_full")
        if not state.humans:
            raise GameError("no player is seated at this table", "no_players")
        return [HandStarted(state.hands + 1, command.match_id)]
    if isinstance(command, RecordHand):
        if command.match_id != state.match_id:
            raise GameError("that match is not this table's hand under way", "not_current_hand")
        if len(command.net) != SEATS:
            raise GameError("a net amount per seat is needed", "invalid_net")
        return [HandSettled(state.hands + 1, command.match_id, command.net)]
    raise GameError(f"unknown table command {command!r}", "unknown_command")


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
    if not _free_seats(state):
        return DEAL, state.next_hand_seconds if state.resting else 0
    if state.bots_after is not None:
        return BOTS, state.bots_after
    return None
