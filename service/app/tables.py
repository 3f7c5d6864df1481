"""The command path of tables and the lobby: load the table, decide on its state, append at
the version decided on (a lost race decided again), and what follows: a hand started is its
match created, seated and dealt in the same transaction; a player leaving during a hand is
disconnected from its match; a settled match is recorded at its table; the lobby seats
waiting tickets at new tables. After each append ``on_table`` gets the table's new state
(the processes wire :func:`service.app.work.table_enqueuer`)."""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from ..game import (
    Command,
    CreateMatch,
    DealHand,
    Disconnect,
    GameError,
    Table,
    TakeSeat,
    decide,
    initial_state,
    replay,
)
from ..game.events import Event, PlayerLeft
from ..game.table_decider import (
    CreateTable,
    FillWithBots,
    Join,
    Leave,
    RecordHand,
    StartHand,
    TableCommand,
    absent_seats,
    decide_all,
)
from ..game.table_play import BOTS, DEAL, TableState, due, initial_table
from ..rules import new_seed
from ..store import EventStore, Loaded, MatchNotFound, Outcome, VersionConflict
from ..store.tables import TableLoaded, TableStore, Ticket
from .commands import RETRIES, CommandRequest, Commands

log = logging.getLogger(__name__)

#: A job run at most this many seconds before its table's wait is over waits it out (the
#: clocks of this host and the database's differ a little).
EARLY_TOLERANCE = 2.0


@dataclass(frozen=True)
class TableOptions:
    """What a new table is, beyond its :class:`Table` of ruleset and money options."""

    private: bool = False
    bots_after: int | None = None
    next_hand_seconds: int = 5


class Tables:
    def __init__(
        self,
        store: EventStore,
        tables: TableStore,
        commands: Commands,
        on_table: Callable[[uuid.UUID, TableLoaded], None] | None = None,
    ):
        self.store = store
        self.table_store = tables
        self.commands = commands
        self.on_table = on_table

    def execute(
        self,
        table_id: uuid.UUID,
        command: Callable[[TableState], TableCommand | list[TableCommand]],
        *,
        new: bool = False,
        expected_version: int | None = None,
        within: Callable[[psycopg.Connection, TableState], None] | None = None,
    ) -> tuple[TableLoaded, list[Any]]:
        """Decides ``command`` (or commands, one after the other) on the table's latest
        state and appends their events (with what ``within`` writes, in their transaction);
        without ``expected_version`` a lost race is decided again. Returns the new state
        and the events appended."""
        for attempt in range(RETRIES):
            try:
                with self.store.connection(transaction=True) as conn:
                    state = initial_table if new else self.table_store.load(table_id, conn).state
                    if expected_version is not None and state.version != expected_version:
                        raise VersionConflict(
                            f"the table is at version {state.version}, not {expected_version}"
                        )
                    decided = command(state)
                    events, after = decide_all(
                        state, decided if isinstance(decided, list) else [decided]
                    )
                    if within is not None:
                        within(conn, after)
                    stored = self.table_store.append(conn, table_id, state.version, events, after)
                break
            except VersionConflict:
                if expected_version is not None or new or attempt == RETRIES - 1:
                    raise
        loaded = TableLoaded(after, stored[-1].recorded_at)
        if self.on_table is not None:
            self.on_table(table_id, loaded)
        return loaded, [s.event for s in stored]

    def create(self, table: Table, options: TableOptions, creator: str | None) -> TableLoaded:
        """A new table, with its creator seated when a player made it."""
        table_id = uuid.uuid4()
        invite = secrets.token_urlsafe(12) if options.private else None
        create = CreateTable(
            str(table_id),
            table,
            options.private,
            invite,
            options.bots_after,
            options.next_hand_seconds,
        )
        seat_creator = [] if creator is None else [Join(creator, invite)]
        return self.execute(table_id, lambda _: [create, *seat_creator], new=True)[0]

    def join(self, table_id: uuid.UUID, player: str, invite: str | None) -> TableLoaded:
        return self.execute(table_id, lambda _: Join(player, invite))[0]

    def leave(self, table_id: uuid.UUID, player: str) -> TableLoaded:
        """The seat is freed now between hands; during a hand the player is disconnected
        from the match (the system plays the seat, the penalty stands) and the seat is
        freed when the hand is settled."""
        loaded, events = self.execute(table_id, lambda _: Leave(player))
        left = next(e for e in events if isinstance(e, PlayerLeft))
        match_id = loaded.state.match_id
        if left.at_hand_end and match_id is not None:
            try:
                self.commands.execute(
                    CommandRequest(uuid.UUID(match_id), lambda _: Disconnect(left.seat, "left"))
                )
            except GameError:
                pass  # the hand has ended, or the system plays the seat already
        return loaded

    def _deal(self, table_id: uuid.UUID, version: int) -> TableLoaded:
        """Starts the next hand: its match is created, seated as the table is and dealt in
        the transaction that appends ``hand_started``."""
        match_id = uuid.uuid4()
        opened: list[Outcome] = []

        def open_match(conn: psycopg.Connection, after: TableState) -> None:
            assert after.table is not None
            commands: list[Command] = [CreateMatch(str(match_id), after.table)]
            for seat, taken in enumerate(after.seats):
                assert taken is not None
                commands.append(TakeSeat(seat, taken.player, bot=taken.bot))
            commands.append(DealHand(new_seed()))
            state, events = initial_state, list[Event]()
            for command in commands:
                more = decide(state, command)
                state, events = replay(more, state), events + more
            stored = self.store.append(conn, match_id, 0, events, state, uuid.uuid4(), None)
            opened.append(Outcome(stored, state, stored[-1].recorded_at))

        loaded, _ = self.execute(
            table_id,
            lambda _: StartHand(str(match_id)),
            expected_version=version,
            within=open_match,
        )
        outcome = opened[-1]
        self.store.cache.put(match_id, Loaded(outcome.state, outcome.last_recorded_at))
        if self.commands.on_appended is not None:
            self.commands.on_appended(match_id, outcome)
        return loaded

    def record_hand(self, match_id: uuid.UUID) -> str:
        """Records the settled match at its table (once: a second call finds it done)."""
        found = self.table_store.by_match(match_id)
        if found is None:
            return "no table"
        table_id, _ = found
        try:
            state = self.store.load(match_id).state
        except MatchNotFound:
            return "no such match"
        if not state.settled or state.result is None:
            return "not settled"
        net = tuple(state.result.settlement.to_json()["net"])
        absent = absent_seats(s.event for s in self.store.read(match_id, 0))
        try:
            self.execute(table_id, lambda _: RecordHand(str(match_id), net, absent))
        except GameError as exc:
            if exc.code == "not_current_hand":
                return "recorded already"
            raise
        return "recorded"

    def advance(self, table_id: uuid.UUID, version: int) -> str:
        """Does what the table at ``version`` waits for, once its time has come: records
        its settled hand, fills its empty seats with bots, or deals the next hand."""
        loaded = self.table_store.load(table_id)
        state = loaded.state
        if state.version != version:
            return "stale"
        if state.match_id is not None:
            return self.record_hand(uuid.UUID(state.match_id))
        waiting = due(state)
        if waiting is None or loaded.last_recorded_at is None:
            return "nothing to do"
        kind, seconds = waiting
        early = (
            loaded.last_recorded_at + timedelta(seconds=seconds) - datetime.now(UTC)
        ).total_seconds()
        if early > EARLY_TOLERANCE:
            return "not due yet"  # the workers' scan comes back for it
        try:
            if kind == BOTS:
                self.execute(table_id, lambda _: FillWithBots(), expected_version=version)
                return "bots seated"
            assert kind == DEAL
            after = self._deal(table_id, version)
        except VersionConflict:
            return "someone acted first"
        return f"hand {after.state.hands + 1} dealt"

    # The lobby

    def match_tickets(self, bots_after: float, next_hand_seconds: int) -> int:
        """Seats waiting tickets at new tables, four with equal settings to a table; a
        ticket that allows bots and has waited ``bots_after`` seconds gets bots for the
        seats no one takes. Each group is claimed with its rows locked (two matchers
        take different tickets), and seated in the transaction that creates its table.
        Returns how many tables it made."""
        made = 0
        for settings in self.table_store.waiting_settings(bots_after):
            while self._seat_group(settings, bots_after, next_hand_seconds):
                made += 1
        return made

    def _seat_group(
        self, settings: dict[str, Any], bots_after: float, next_hand_seconds: int
    ) -> bool:
        table = Table.from_json(settings)
        table_id = uuid.uuid4()
        with self.store.connection(transaction=True) as conn:
            claimed = self.table_store.claim(conn, settings)
            seated = self._who_sits(conn, claimed, bots_after)
            if not seated:
                return False
            bots = len(seated) < 4
            commands: list[TableCommand] = [
                CreateTable(
                    str(table_id),
                    table,
                    bots_after=0 if bots else None,
                    next_hand_seconds=next_hand_seconds,
                )
            ]
            commands += [Join(str(ticket.player_id)) for ticket in seated]
            if bots:
                commands.append(FillWithBots())
            events, state = decide_all(initial_table, commands)
            stored = self.table_store.append(conn, table_id, 0, events, state)
            seats = {s.player: i for i, s in enumerate(state.seats) if s is not None and s.player}
            self.table_store.seat_tickets(
                conn,
                table_id,
                [(t.ticket_id, seats[str(t.player_id)]) for t in seated],
            )
        if self.on_table is not None:
            self.on_table(table_id, TableLoaded(state, stored[-1].recorded_at))
        return True

    def _who_sits(
        self, conn: psycopg.Connection, claimed: list[Ticket], bots_after: float
    ) -> list[Ticket]:
        if len(claimed) == 4:
            return claimed
        with_bots = [t for t in claimed if t.allow_bots]
        if not with_bots:
            return []
        now = self.table_store.database_now(conn)
        if (now - with_bots[0].created_at).total_seconds() < bots_after:
            return []
        return with_bots
