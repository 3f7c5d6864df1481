"""The command path of tables and the lobby: load the table, decide on its state, append at
the version decided on (a lost race decided again), and what follows: a hand started is its
match created, seated and dealt in the same transaction; a player leaving during a hand is
disconnected from its match; a settled match is recorded at its table; the lobby seats
waiting tickets at tables that lost a person, then at new tables. After each append
``on_table`` gets the table's new state (the processes wire
:func:`service.app.work.table_enqueuer`)."""

from __future__ import annotations

import logging
import math
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from ..game import (
    Command,
    CreateMatch,
    DealHand,
    Disconnect,
    GameError,
    MatchSettings,
    TakeSeat,
    decide,
    initial_state,
    replay,
)
from ..game.events import DEFAULT_CLOSE_SECONDS, Event, PlayerLeft
from ..game.table_decider import (
    CloseTable,
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
from ..game.table_play import (
    BOTS,
    CLOSE,
    DEAL,
    MAX_WAIT_SECONDS,
    TableState,
    free_seats,
    initial_table,
)
from ..rules import new_seed
from ..store import EventStore, Loaded, MatchNotFound, Outcome, StoreError, VersionConflict
from ..store.tables import TableLoaded, TableStore, Ticket
from .commands import RETRIES, CommandRequest, Commands

log = logging.getLogger(__name__)


#: The fewest bot accounts a ladder's table seats together (the other seats system bots',
#: after the lobby's wait): a ladder's game is against another bot account at least.
LADDER_TOGETHER = 2


def new_invite() -> str:
    """A private table's invite code: 96 random bits, URL-safe, never starting with ``-``
    (a code passed as written to a command-line option, ``ddz bridge --invite CODE``,
    must not read as an option)."""
    while (code := secrets.token_urlsafe(12)).startswith("-"):
        pass
    return code


@dataclass(frozen=True)
class TableOptions:
    """What a new table is, beyond its :class:`MatchSettings` of ruleset and money options."""

    private: bool = False
    bots_after: int | None = None
    next_hand_seconds: int = 5
    close_after: int = DEFAULT_CLOSE_SECONDS


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
                    before = None if new else self.table_store.load(table_id, conn)
                    state = initial_table if before is None else before.state
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
                    stored, loaded = self.table_store.append(conn, table_id, before, events, after)
                break
            except VersionConflict:
                if expected_version is not None or new or attempt == RETRIES - 1:
                    raise
        if self.on_table is not None:
            self.on_table(table_id, loaded)
        return loaded, [s.event for s in stored]

    def create(
        self, table: MatchSettings, options: TableOptions, creator: str | None
    ) -> TableLoaded:
        """A new table, with its creator seated when a player made it (unless the player
        sits at as many tables as it may, :meth:`TableStore.hold_seat`)."""
        table_id = uuid.uuid4()
        invite = new_invite() if options.private else None
        create = CreateTable(
            str(table_id),
            table,
            options.private,
            invite,
            options.bots_after,
            options.next_hand_seconds,
            options.close_after,
        )
        if creator is None:
            return self.execute(table_id, lambda _: create, new=True)[0]
        return self.execute(
            table_id,
            lambda _: [create, Join(creator, invite)],
            new=True,
            within=lambda conn, _: self.table_store.hold_seat(conn, creator, table_id),
        )[0]

    def join(self, table_id: uuid.UUID, player: str, invite: str | None) -> TableLoaded:
        """The player takes a seat, unless it sits at as many tables as it may, or the
        lobby made the table (only the lobby seats there)."""
        self.table_store.refuse_lobby_table(table_id)
        return self.execute(
            table_id,
            lambda _: Join(player, invite),
            within=lambda conn, _: self.table_store.hold_seat(conn, player, table_id),
        )[0]

    def leave(self, table_id: uuid.UUID, player: str) -> TableLoaded:
        """The seat is freed now between hands; during a hand the player is disconnected
        from the match (the system plays the seat, the penalty stands) and the seat is
        freed when the hand is settled."""
        # A settled hand is over for the player (its stream said `settled`) a moment
        # before the worker that settled it records it at the table: recorded here first,
        # a leave then is between hands, as the player saw it.
        current = self.table_store.load(table_id).state.match_id
        if current is not None:
            self._record(table_id, uuid.UUID(current))
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
        return self._record(found[0], match_id)

    def _record(self, table_id: uuid.UUID, match_id: uuid.UUID) -> str:
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
        """Does what the table at ``version`` waits for, once its time has come by the
        database's clock (the one its events are recorded by): records its settled hand,
        fills its empty seats with bots, deals the next hand, or closes it."""
        with self.store.connection() as conn:
            loaded = self.table_store.load(table_id, conn)
            now = self.table_store.database_now(conn)
        state = loaded.state
        if state.version != version:
            return "stale"
        if state.match_id is not None:
            return self.record_hand(uuid.UUID(state.match_id))
        waiting = loaded.waiting()
        if waiting is None:
            return "nothing to do"
        kind, at = waiting
        if at > now:
            return "not due yet"  # the workers' scan comes back for it when it is
        try:
            if kind == BOTS:
                self.execute(table_id, lambda _: FillWithBots(), expected_version=version)
                return "bots seated"
            if kind == CLOSE:
                self.execute(table_id, lambda _: CloseTable(), expected_version=version)
                return "closed"
            assert kind == DEAL
            after = self._deal(table_id, version)
        except VersionConflict:
            return "someone acted first"
        return f"hand {after.state.hands + 1} dealt"

    # The lobby

    def match_tickets(
        self,
        bots_after: float,
        next_hand_seconds: int,
        close_after: int = DEFAULT_CLOSE_SECONDS,
    ) -> int:
        """Seats waiting tickets: first at the public tables that lost a person between
        hands, then at new tables, four with equal settings to a table; a ticket that
        allows bots and has waited ``bots_after`` seconds gets bots for the seats no one
        takes. The tickets are claimed with their rows locked (two matchers take
        different tickets), and seated in the transaction that appends their seats.
        Returns how many tables it seated tickets at."""
        made = 0
        for table_id, settings, ladder in self.table_store.refillable():
            try:
                made += self._refill(table_id, settings, ladder)
            except (psycopg.Error, StoreError, GameError) as exc:
                # One table that cannot be refilled (the database refuses it, another pass
                # came first, its state refuses the seats) must not hold up the lobby's
                # other tables and tickets: it is looked at again on the next pass. The
                # reason is its kind and code: a database's message may quote row values.
                reason = (
                    exc.diag.constraint_name or exc.diag.sqlstate
                    if isinstance(exc, psycopg.Error)
                    else getattr(exc, "code", "")
                )
                log.error(
                    "could not refill table %s: %s (%s)", table_id, type(exc).__name__, reason
                )
        for settings, ladder in self.table_store.waiting_settings(bots_after):
            while self._seat_group(settings, ladder, bots_after, next_hand_seconds, close_after):
                made += 1
        return made

    def _refill(self, table_id: uuid.UUID, settings: dict[str, Any], ladder: bool) -> bool:
        """Seats the longest waiting tickets with the table's settings in its free seats
        (only tickets that allow bots at a table that gives seats to bots)."""
        with self.store.connection(transaction=True) as conn:
            before = self.table_store.load(table_id, conn)
            state = before.state
            free = free_seats(state)
            if state.match_id is not None or state.closed or not state.humans or not free:
                return False
            claimed = self.table_store.claim(
                conn,
                settings,
                len(free),
                bots=state.bots_after is not None,
                besides=[s.player for s in state.seats if s is not None and s.player],
                ladder=ladder,
            )
            if not claimed:
                return False
            events, after = decide_all(state, [Join(str(t.player_id)) for t in claimed])
            try:
                _, loaded = self.table_store.append(conn, table_id, before, events, after)
            except VersionConflict:
                return False  # the table changed meanwhile: the next pass looks again
            self._seat_tickets(conn, table_id, after, claimed)
        if self.on_table is not None:
            self.on_table(table_id, loaded)
        return True

    def _seat_group(
        self,
        settings: dict[str, Any],
        ladder: bool,
        bots_after: float,
        next_hand_seconds: int,
        close_after: int,
    ) -> bool:
        """Seats tickets with these settings (the ladder's, or the others) at a new table;
        a ladder's table seats two bot accounts at least (:data:`LADDER_TOGETHER`)."""
        table = MatchSettings.from_json(settings)
        table_id = uuid.uuid4()
        with self.store.connection(transaction=True) as conn:
            claimed = self.table_store.claim(conn, settings, ladder=ladder)
            seated = self._who_sits(conn, claimed, bots_after, LADDER_TOGETHER if ladder else 1)
            if not seated:
                return False
            bots = len(seated) < 4
            # A seat freed later goes to a bot: at a table that got bots, once its rest is
            # over; at one of people who all allow bots, after the lobby's wait; at one of
            # people only, never (the table closes if no one takes it).
            allow: int | None = None
            if bots:
                allow = 0
            elif all(t.allow_bots for t in seated):
                allow = min(math.ceil(bots_after), MAX_WAIT_SECONDS)
            commands: list[TableCommand] = [
                CreateTable(
                    str(table_id),
                    table,
                    bots_after=allow,
                    next_hand_seconds=next_hand_seconds,
                    close_after=close_after,
                )
            ]
            commands += [Join(str(ticket.player_id)) for ticket in seated]
            if bots:
                commands.append(FillWithBots())
            events, state = decide_all(initial_table, commands)
            _, loaded = self.table_store.append(conn, table_id, None, events, state)
            self.table_store.lobby_table(conn, table_id, ladder)
            self._seat_tickets(conn, table_id, state, seated)
        if self.on_table is not None:
            self.on_table(table_id, loaded)
        return True

    def _seat_tickets(
        self, conn: psycopg.Connection, table_id: uuid.UUID, state: TableState, seated: list[Ticket]
    ) -> None:
        seats = {s.player: i for i, s in enumerate(state.seats) if s is not None and s.player}
        self.table_store.seat_tickets(
            conn, table_id, [(t.ticket_id, seats[str(t.player_id)]) for t in seated]
        )

    def _who_sits(
        self, conn: psycopg.Connection, claimed: list[Ticket], bots_after: float, least: int
    ) -> list[Ticket]:
        """Four tickets, or after the lobby's wait those that allow bots (at least
        ``least`` of them)."""
        if len(claimed) == 4:
            return claimed
        with_bots = [t for t in claimed if t.allow_bots]
        if len(with_bots) < least:
            return []
        now = self.table_store.database_now(conn)
        if (now - with_bots[0].created_at).total_seconds() < bots_after:
            return []
        return with_bots
