"""A table's commands and ``decide_table(state, command) -> events``, a pure decider like
the match's (its state and ``evolve_table`` are in :mod:`service.game.table_play`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from hmac import compare_digest

from ..rules.deal import SEATS
from .errors import GameError
from .events import (
    DEFAULT_CLOSE_SECONDS,
    PLAYER,
    Disconnected,
    Event,
    HandSettled,
    HandStarted,
    PlayerJoined,
    PlayerLeft,
    Resumed,
    SeatFreed,
    TableClosed,
    TableCreated,
)
from .settings import MatchSettings
from .table_play import MAX_WAIT_SECONDS, TableState, free_seats, replay_table


@dataclass(frozen=True, slots=True)
class TableCommand:
    pass


@dataclass(frozen=True, slots=True)
class CreateTable(TableCommand):
    table_id: str
    table: MatchSettings
    private: bool = False
    invite: str | None = None
    bots_after: int | None = None
    next_hand_seconds: int = 5
    close_after: int = DEFAULT_CLOSE_SECONDS


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
    """The hand's match is settled with ``net`` per seat; the players of the ``absent``
    seats did nothing in it (:func:`absent_seats`): they leave the table with the hand."""

    match_id: str
    net: tuple[str, ...]
    absent: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CloseTable(TableCommand):
    """The table closes between hands: those seated leave it (a table of people only whose
    freed seat no one took in time)."""


def absent_seats(events: Iterable[Event]) -> tuple[int, ...]:
    """The seats of a hand (a match's events) whose player did nothing in it: the system
    took the seat over at a missed deadline before the player made any decision, and the
    player never took it back (``resume``). A player gone without leaving would otherwise
    be dealt hand after hand, each played by the system (and the table never empty)."""
    timed_out: set[int] = set()
    present: set[int] = set()
    for event in events:
        if isinstance(event, Disconnected) and event.reason == "deadline":
            timed_out.add(event.seat)
        elif isinstance(event, Resumed):
            present.add(event.seat)
        elif getattr(event, "by", None) == PLAYER:
            present.add(event.seat)  # type: ignore[attr-defined]  # a decision names its seat
    return tuple(sorted(timed_out - present))


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


def decide_table(state: TableState, command: TableCommand) -> list[Event]:
    """The events of ``command`` on the table, or a :class:`GameError` refusing it."""
    if isinstance(command, CreateTable):
        if state.version:
            raise GameError("this table exists already", "table_exists")
        _wait(command.bots_after, "bots_after")
        _wait(command.next_hand_seconds, "next_hand_seconds")
        _wait(command.close_after, "close_after")
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
                command.close_after,
            )
        ]
    _created(state)
    # First: without its invite code, nothing is said of a private table (not even that it
    # closed), and the API answers as for a table that does not exist.
    if (
        isinstance(command, Join)
        and state.private
        and not compare_digest(command.invite or "", state.invite or "")
    ):
        raise GameError("this table is private: join it with its invite code", "invite_required")
    if state.closed and not isinstance(command, (Leave, RecordHand)):
        raise GameError("this table has closed", "table_closed")
    if isinstance(command, Join):
        if state.seat_of(command.player) is not None:
            raise GameError("the player is seated at this table already", "already_seated")
        free = free_seats(state)
        if not free:
            raise GameError("every seat of this table is taken", "table_full")
        return [PlayerJoined(free[0], command.player, False)]
    if isinstance(command, FillWithBots):
        _between_hands(state)
        free = free_seats(state)
        if not free:
            raise GameError("every seat of this table is taken", "table_full")
        return [PlayerJoined(seat, None, True) for seat in free]
    if isinstance(command, Leave):
        seat = state.seat_of(command.player)
        taken = None if seat is None else state.seats[seat]
        if seat is None or taken is None or taken.leaving:
            raise GameError("the caller has no seat at this table", "not_seated")
        during = state.match_id is not None
        return [PlayerLeft(seat, command.player, during, state.hands + 1 if during else None)]
    if isinstance(command, StartHand):
        _between_hands(state)
        if free_seats(state):
            raise GameError("a hand needs four seats taken", "table_not_full")
        if not state.humans:
            raise GameError("no player is seated at this table", "no_players")
        return [HandStarted(state.hands + 1, command.match_id)]
    if isinstance(command, RecordHand):
        if command.match_id != state.match_id:
            raise GameError("that match is not this table's hand under way", "not_current_hand")
        if len(command.net) != SEATS:
            raise GameError("a net amount per seat is needed", "invalid_net")
        number = state.hands + 1
        # Left during the hand, or absent from it: their seats are freed with it.
        freed = [
            SeatFreed(seat, taken.player, number)
            for seat, taken in enumerate(state.seats)
            if taken is not None
            and taken.player is not None
            and (taken.leaving or seat in command.absent)
        ]
        return [*freed, HandSettled(number, command.match_id, command.net)]
    if isinstance(command, CloseTable):
        _between_hands(state)
        return [
            TableClosed(state.hands, tuple(None if s is None else s.player for s in state.seats))
        ]
    raise GameError(f"unknown table command {command!r}", "unknown_command")


def decide_all(
    state: TableState, commands: Sequence[TableCommand]
) -> tuple[list[Event], TableState]:
    """The events of ``commands`` decided one after the other (each on the state the ones
    before it leave), appended together; and the state after them."""
    events: list[Event] = []
    for command in commands:
        more = decide_table(state, command)
        state, events = replay_table(more, state), events + more
    return events, state
