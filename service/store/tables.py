"""Tables on PostgreSQL: each table a stream of the events table (folded with the table's
``evolve_table``), appended to at an expected version with its row of the ``tables`` read
model and a notification; and the lobby's tickets, seated at most once (the primary key of
``lobby_seatings``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from ..game import Event
from ..game.events import HandSettled, HandStarted, PlayerJoined
from ..game.ratings import LADDER, QUICK_MATCH
from ..game.table_play import TableState, due_at, initial_table, replay_table
from .events import (
    NOTIFY_CHANNEL,
    EventStore,
    Recent,
    StateCache,
    StoredEvent,
    StoreError,
    VersionConflict,
    wake_player,
)
from .pool import retried

_T = TypeVar("_T")


class TableNotFound(StoreError):
    code = "table_not_found"


class TicketNotFound(StoreError):
    code = "ticket_not_found"


class TicketWaiting(StoreError):
    code = "ticket_waiting"


class TicketSeated(StoreError):
    code = "ticket_seated"


class BotAccountRequired(StoreError):
    """The ladder is for bot accounts."""

    code = "bot_account_required"


class LobbyTable(StoreError):
    """A table the lobby made is joined only through the lobby: nobody picks a seat there
    (its hands are rated, docs/ratings.md)."""

    code = "lobby_table"


class SeatedElsewhere(StoreError):
    """The player sits at as many tables as it may (with its waiting ticket, if any)."""

    code = "seated_elsewhere"


@dataclass(frozen=True)
class TableLoaded:
    """A table's state with the time of its last event and of the settlement of its last
    hand, if no other was dealt since (what it waits for counts from them, :func:`due_at`)."""

    state: TableState
    last_recorded_at: datetime | None
    settled_at: datetime | None = None

    @property
    def ended(self) -> bool:
        return self.state.closed

    def waiting(self) -> tuple[str, datetime] | None:
        """What the table waits for, and until when."""
        return due_at(self.state, self.last_recorded_at, self.settled_at)


def _settled_at(stored: Sequence[StoredEvent], before: datetime | None) -> datetime | None:
    """When the last hand was settled, after ``stored`` (``before``: before them)."""
    for s in stored:
        if isinstance(s.event, HandSettled):
            before = s.recorded_at
        elif isinstance(s.event, HandStarted):
            before = None
    return before


def table_columns(loaded: TableLoaded) -> dict[str, Any]:
    """The ``tables`` row of a table, but for its times: what it waits for (``due``) and
    until when (``due_at``), from ``loaded``."""
    state = loaded.state
    waiting = loaded.waiting()
    return {
        "version": state.version,
        "private": state.private,
        "settings": Jsonb(None if state.table is None else state.table.to_json()),
        "seats": Jsonb(
            [
                None if s is None else {"player": s.player, "bot": s.bot, "leaving": s.leaving}
                for s in state.seats
            ]
        ),
        "match_id": state.match_id,
        "hands": state.hands,
        "due": None if waiting is None else waiting[0],
        "due_at": None if waiting is None else waiting[1],
    }


@dataclass(frozen=True)
class Ticket:
    ticket_id: uuid.UUID
    player_id: uuid.UUID
    settings: dict[str, Any]
    allow_bots: bool
    status: str
    table_id: uuid.UUID | None
    created_at: datetime
    #: A bot account's ticket for the ladder: a table of bot accounts only.
    ladder: bool = False


@dataclass(frozen=True)
class HandOf:
    """The table whose hand a match is: which hand, whether the table is private, and the
    players dealt the hand (a hand's seats never change once dealt)."""

    table_id: uuid.UUID
    number: int
    private: bool
    players: frozenset[str]


_TICKET = "ticket_id, player_id, settings, allow_bots, status, table_id, created_at, ladder"
#: How many tables a bot account may sit at at once (a person sits at one): the default of
#: ``DDZ_BOT_ACCOUNT_TABLES``.
BOT_ACCOUNT_TABLES = 4


class TableStore:
    #: Matches whose table (or none) is remembered, and tables whose kind, up to this many
    #: each (the least recently read forgotten first): what a match or a table is never
    #: changes, and every read of a match asks. Four times the tables in play at 5,000
    #: players: forgotten all at once at a larger bound, a process's memory grew for
    #: hours (docs/scaling.md).
    HANDS_CACHE = 4096
    #: Tables whose last state read is kept, up to this many (the least recently read
    #: forgotten first): a table read again reads only the events after it. A lobby table
    #: is refilled hand after hand for as long as people sit there, and replaying its whole
    #: stream at every read made each read cost more the longer the table had lived.
    STATES_CACHE = 4096

    def __init__(self, events: EventStore, bot_account_tables: int = BOT_ACCOUNT_TABLES):
        self.events = events
        self.pool = events.pool
        self.bot_account_tables = bot_account_tables
        # Each value in a tuple: None is an answer (no table, a table players made).
        self._hands: Recent[uuid.UUID, tuple[HandOf | None]] = Recent(self.HANDS_CACHE)
        #: Each table's kind of the lobby's, once read (it never changes once made).
        self._lobby: Recent[uuid.UUID, tuple[str | None]] = Recent(self.HANDS_CACHE)
        self._states: StateCache[TableLoaded] = StateCache(self.STATES_CACHE)

    def _run(
        self, work: Callable[[psycopg.Connection], _T], conn: psycopg.Connection | None = None
    ) -> _T:
        return retried(self.pool, work, conn)

    # Tables

    def load(self, table_id: uuid.UUID, conn: psycopg.Connection | None = None) -> TableLoaded:
        """The table as its committed events make it: read before the caller's transaction
        appends to it (what is kept is only ever what was read)."""
        known = self._states.get(table_id)
        stored = self.events.read(table_id, 0 if known is None else known.state.version, conn)
        if known is None:
            if not stored or stored[0].event.type != "table_created":
                raise TableNotFound("no such table")
            known = TableLoaded(initial_table, None)
        elif not stored:
            return known
        loaded = TableLoaded(
            replay_table((s.event for s in stored), known.state),
            stored[-1].recorded_at,
            _settled_at(stored, known.settled_at),
        )
        self._states.put(table_id, loaded)
        return loaded

    @staticmethod
    def append(
        conn: psycopg.Connection,
        table_id: uuid.UUID,
        before: TableLoaded | None,
        events: Sequence[Event],
        after: TableState,
    ) -> tuple[list[StoredEvent], TableLoaded]:
        """Inserts the events after the table as it was (``before``, None for a new table;
        a :class:`VersionConflict` if another append came first), brings the table's row of
        ``tables`` up to ``after`` (with what it waits for and until when) and records a
        hand dealt, in the caller's transaction; and wakes the table's readers. Returns the
        events stored and the table after them."""
        version = 0 if before is None else before.state.version
        try:
            with conn.transaction():
                rows = conn.execute(
                    "INSERT INTO events (stream_id, version, type, schema_version, payload)"
                    " SELECT %s, e.version, e.type, e.schema_version, e.payload"
                    " FROM jsonb_to_recordset(%s)"
                    " AS e(version integer, type text, schema_version integer, payload jsonb)"
                    " ORDER BY e.version"
                    " RETURNING version, position, type, schema_version, payload, recorded_at",
                    (
                        table_id,
                        Jsonb(
                            [
                                {
                                    "version": v,
                                    "type": e.type,
                                    "schema_version": e.version,
                                    "payload": e.payload(),
                                }
                                for v, e in enumerate(events, start=version + 1)
                            ]
                        ),
                    ),
                ).fetchall()
                stored = [
                    StoredEvent(
                        version_,
                        position,
                        Event.from_payload(type_, schema, payload),
                        recorded_at,
                    )
                    for version_, position, type_, schema, payload, recorded_at in rows
                ]
                loaded = TableLoaded(
                    after,
                    stored[-1].recorded_at,
                    _settled_at(stored, None if before is None else before.settled_at),
                )
                # The rest in one round trip: the transaction holds back every player's
                # stream (the feed's horizon, service/store/feed.py) until it commits.
                with conn.pipeline():
                    # Its times are the events' (the first's when it is made), so that
                    # `ddz rebuild` makes the row again exactly (service/store/rebuild.py).
                    conn.execute(
                        "INSERT INTO tables AS t (table_id, version, private, settings, seats, match_id,"
                        " hands, due, due_at, created_at, updated_at) VALUES (%(table)s, %(version)s,"
                        " %(private)s, %(settings)s, %(seats)s, %(match_id)s, %(hands)s, %(due)s,"
                        " %(due_at)s, %(first)s, %(last)s)"
                        " ON CONFLICT (table_id) DO UPDATE SET version = EXCLUDED.version,"
                        " settings = EXCLUDED.settings, seats = EXCLUDED.seats,"
                        " match_id = EXCLUDED.match_id, hands = EXCLUDED.hands,"
                        " due = EXCLUDED.due, due_at = EXCLUDED.due_at, updated_at = EXCLUDED.updated_at",
                        {
                            "table": table_id,
                            **table_columns(loaded),
                            "first": stored[0].recorded_at,
                            "last": stored[-1].recorded_at,
                        },
                    )
                    for s in stored:
                        if isinstance(s.event, HandStarted):
                            conn.execute(
                                "INSERT INTO table_hands (match_id, table_id, number) VALUES (%s, %s, %s)",
                                (s.event.match_id, table_id, s.event.number),
                            )
                        elif isinstance(s.event, PlayerJoined) and s.event.player is not None:
                            conn.execute(
                                "INSERT INTO player_streams (player_id, stream_id, from_version)"
                                " VALUES (%s, %s, %s)",
                                (s.event.player, table_id, s.version),
                            )
                            wake_player(conn, s.event.player)
                    # A player's own stream reads the table until the player's seat is freed.
                    seated = [
                        s.player for s in after.seats if s is not None and s.player is not None
                    ]
                    conn.execute(
                        "UPDATE player_streams SET until_version = %s WHERE stream_id = %s"
                        " AND until_version IS NULL AND NOT (player_id = ANY(%s::uuid[]))",
                        (after.version, table_id, seated),
                    )
                    conn.execute(
                        "SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"{table_id}:{after.version}")
                    )
        except psycopg.errors.UniqueViolation:
            raise VersionConflict("someone else changed the table first; try again") from None
        return stored, loaded

    def by_match(self, match_id: uuid.UUID) -> tuple[uuid.UUID, int] | None:
        """The table and hand number whose hand the match is, if any."""
        return self._run(
            lambda conn: conn.execute(
                "SELECT table_id, number FROM table_hands WHERE match_id = %s", (match_id,)
            ).fetchone()
        )

    def hand_of(self, match_id: uuid.UUID) -> HandOf | None:
        """The table whose hand the match is (None: a match no table dealt, or none at
        all), read once per process. A table's hand is dealt in the transaction that
        records it at its table, so no reader of the match finds it recorded nowhere."""
        known = self._hands.get(match_id)
        if known is not None:
            return known[0]
        row = self._run(
            lambda conn: conn.execute(
                "SELECT h.table_id, h.number, t.private, m.seats FROM table_hands h"
                " JOIN tables t ON t.table_id = h.table_id"
                " JOIN matches m ON m.match_id = h.match_id WHERE h.match_id = %s",
                (match_id,),
            ).fetchone()
        )
        hand = None
        if row is not None:
            table_id, number, private, seats = row
            players = frozenset(s["player"] for s in seats if s and s.get("player"))
            hand = HandOf(table_id, number, private, players)
        self._hands.put(match_id, (hand,))
        return hand

    def lobby_of(self, table_id: uuid.UUID) -> str | None:
        """The kind of the lobby's table it is (its quick match's or its ladder's), None
        for a table players made; read once per process (the lobby records its table in
        the transaction that makes it)."""
        known = self._lobby.get(table_id)
        if known is None:
            row = self._run(
                lambda conn: conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM ladder_tables WHERE table_id = %(t)s),"
                    " EXISTS (SELECT 1 FROM lobby_tables WHERE table_id = %(t)s)",
                    {"t": table_id},
                ).fetchone()
            )
            assert row is not None  # a SELECT without FROM answers one row
            ladder, lobby = row
            known = (LADDER if ladder else QUICK_MATCH if lobby else None,)
            self._lobby.put(table_id, known)
        return known[0]

    def refuse_lobby_table(self, table_id: uuid.UUID) -> None:
        """Raises :class:`LobbyTable` for a table the lobby made."""
        if self.lobby_of(table_id) is not None:
            raise LobbyTable(
                "the lobby seats this table, and nobody chooses a seat there: ask the lobby"
                " for a quick match (POST /v1/lobby/tickets)"
            )

    def was_seated(self, table_id: uuid.UUID, player: str) -> bool:
        """Whether the player took a seat at the table at some time."""
        return self._run(
            lambda conn: (
                conn.execute(
                    "SELECT 1 FROM player_streams WHERE stream_id = %s AND player_id = %s LIMIT 1",
                    (table_id, player),
                ).fetchone()
                is not None
            )
        )

    def due_now(self) -> list[tuple[uuid.UUID, int]]:
        """(table, version) of each table whose wait is over (its next deal, or bots), and
        of each whose hand's match is settled but not yet recorded at the table."""
        return self._run(
            lambda conn: conn.execute(
                "SELECT table_id, version FROM tables WHERE due_at <= now()"
                " UNION ALL SELECT t.table_id, t.version FROM tables t"
                " JOIN matches m ON m.match_id = t.match_id WHERE m.settled"
            ).fetchall()
        )

    def of_player(self, player: str) -> list[tuple[uuid.UUID, datetime]]:
        """The tables where the player is seated, newest first."""
        return self._run(
            lambda conn: conn.execute(
                "SELECT table_id, created_at FROM tables WHERE seats @> %s"
                " ORDER BY created_at DESC, table_id",
                (Jsonb([{"player": player}]),),
            ).fetchall()
        )

    def hold_seat(
        self, conn: psycopg.Connection, player: str, joining: uuid.UUID | None = None
    ) -> None:
        """Refuses the player another table (``joining``; None: a lobby ticket) while it
        sits at as many as it may, its waiting ticket counting as one: a person one, a bot
        account ``bot_account_tables`` (a seat it left during a hand is no longer its). In
        the caller's transaction, which holds the player's row until it ends: two requests
        of the player's at once cannot both pass."""
        row = conn.execute(
            "SELECT bot_account FROM players WHERE player_id = %s FOR NO KEY UPDATE", (player,)
        ).fetchone()
        allowed = max(self.bot_account_tables, 1) if row is not None and row[0] else 1
        with conn.pipeline():
            seated = conn.execute(
                "SELECT table_id FROM tables WHERE seats @> %s AND table_id IS DISTINCT FROM %s"
                " ORDER BY created_at DESC, table_id",
                (Jsonb([{"player": player, "leaving": False}]), joining),
            )
            ticket = conn.execute(
                "SELECT ticket_id FROM lobby_tickets WHERE player_id = %s AND status = 'waiting'",
                (player,),
            )
        tables = [table_id for (table_id,) in seated.fetchall()]
        waiting = ticket.fetchone()
        if waiting is not None and (joining is None or len(tables) + 1 >= allowed):
            refused = TicketWaiting(
                "the player has a ticket waiting already"
                if joining is None
                else "the player waits in the lobby: cancel its ticket to take a seat here"
            )
            refused.members = {"ticket_id": str(waiting[0])}
            raise refused
        if len(tables) >= allowed:
            elsewhere = SeatedElsewhere(
                "the player is seated at another table: leave it first"
                if allowed == 1
                else f"a bot account sits at {allowed} tables at most: leave one first"
            )
            elsewhere.members = {"table_id": str(tables[0])}
            raise elsewhere

    def refillable(self) -> list[tuple[uuid.UUID, dict[str, Any], bool]]:
        """(table, settings, whether it is the ladder's) of each public table that lost a
        person between hands (a seat free after a hand, a player still seated) for which a
        ticket with its settings waits, one that may sit there (a ticket that allows no
        bots, only at a table of people only; a ladder's ticket only at a ladder's table,
        and only there), the table waiting longest first."""
        return self._run(
            lambda conn: conn.execute(
                "SELECT t.table_id, t.settings, lt.table_id IS NOT NULL FROM tables t"
                " LEFT JOIN ladder_tables lt USING (table_id)"
                " WHERE t.due IN ('bots', 'close') AND NOT t.private AND t.hands > 0"
                " AND EXISTS (SELECT 1 FROM lobby_tickets l WHERE l.status = 'waiting'"
                " AND l.settings = t.settings AND (l.allow_bots OR t.due = 'close')"
                " AND l.ladder = (lt.table_id IS NOT NULL))"
                " ORDER BY t.updated_at"
            ).fetchall()
        )

    def created_at(self, table_id: uuid.UUID) -> datetime | None:
        row = self._run(
            lambda conn: conn.execute(
                "SELECT created_at FROM tables WHERE table_id = %s", (table_id,)
            ).fetchone()
        )
        return None if row is None else row[0]

    # The lobby's tickets

    def create_ticket(
        self,
        player_id: uuid.UUID,
        settings: dict[str, Any],
        allow_bots: bool,
        ladder: bool = False,
    ) -> Ticket:
        """A waiting ticket, unless the player sits at as many tables as it may
        (:meth:`hold_seat`) or has one waiting; a ladder's ticket only for a bot account
        (:class:`BotAccountRequired`)."""
        ticket_id = uuid.uuid4()

        def create(conn: psycopg.Connection) -> Any:
            with conn.transaction():
                self.hold_seat(conn, str(player_id))
                if ladder and not conn.execute(
                    "SELECT bot_account FROM players WHERE player_id = %s", (player_id,)
                ).fetchone() == (True,):
                    raise BotAccountRequired("the ladder is for bot accounts (authors' programs)")
                return conn.execute(
                    "INSERT INTO lobby_tickets"
                    " (ticket_id, player_id, settings, allow_bots, status, ladder)"
                    f" VALUES (%s, %s, %s, %s, 'waiting', %s) RETURNING {_TICKET}",
                    (ticket_id, player_id, Jsonb(settings), allow_bots, ladder),
                ).fetchone()

        try:
            row = self._run(create)
        except psycopg.errors.UniqueViolation:
            # Named, so that a client that lost the first answer can poll or cancel it.
            waiting = self._run(
                lambda conn: conn.execute(
                    "SELECT ticket_id FROM lobby_tickets WHERE player_id = %s AND status = 'waiting'",
                    (player_id,),
                ).fetchone()
            )
            refused = TicketWaiting("the player has a ticket waiting already")
            if waiting is not None:
                refused.members = {"ticket_id": str(waiting[0])}
            raise refused from None
        assert row is not None
        return Ticket(*row)

    def ticket(self, ticket_id: uuid.UUID) -> Ticket:
        row = self._run(
            lambda conn: conn.execute(
                f"SELECT {_TICKET} FROM lobby_tickets WHERE ticket_id = %s", (ticket_id,)
            ).fetchone()
        )
        if row is None:
            raise TicketNotFound("no such ticket")
        return Ticket(*row)

    def cancel_ticket(self, ticket_id: uuid.UUID, player_id: uuid.UUID) -> Ticket:
        """Cancels the player's waiting ticket (a cancelled one stays so)."""

        def cancel(conn: psycopg.Connection) -> Any:
            return conn.execute(
                "UPDATE lobby_tickets SET status = 'cancelled', updated_at = now()"
                f" WHERE ticket_id = %s AND player_id = %s AND status IN ('waiting', 'cancelled')"
                f" RETURNING {_TICKET}",
                (ticket_id, player_id),
            ).fetchone()

        row = self._run(cancel)
        if row is not None:
            return Ticket(*row)
        ticket = self.ticket(ticket_id)
        if ticket.player_id != player_id:
            raise TicketNotFound("no such ticket")
        raise TicketSeated("the ticket is seated already: leave the table instead")

    def waiting_settings(self, bots_after: float) -> list[tuple[dict[str, Any], bool]]:
        """The settings (and whether the ladder's) whose waiting tickets can be seated now
        (four of them, or one that allows bots and has waited ``bots_after`` seconds),
        those waiting longest first."""
        return self._run(
            lambda conn: [
                (row[0], row[1])
                for row in conn.execute(
                    "SELECT settings, ladder FROM lobby_tickets WHERE status = 'waiting'"
                    " GROUP BY settings, ladder"
                    " HAVING count(*) >= 4 OR min(created_at) FILTER (WHERE allow_bots)"
                    " <= now() - make_interval(secs => %s) ORDER BY min(created_at)",
                    (bots_after,),
                )
            ]
        )

    @staticmethod
    def claim(
        conn: psycopg.Connection,
        settings: dict[str, Any],
        seats: int = 4,
        bots: bool = False,
        besides: Sequence[str] = (),
        ladder: bool = False,
    ) -> list[Ticket]:
        """The ``seats`` longest waiting tickets with these settings that no other matcher
        holds (with ``bots``, only those that allow bots; the ladder's, or the others),
        locked until the caller's transaction ends; one person's at most, its own or its
        bot accounts', and none of the people of the players ``besides`` (a bot account
        never sits with its owner or its owner's other bots, docs/ratings.md)."""
        rows = conn.execute(
            f"SELECT {', '.join(f't.{c}' for c in _TICKET.split(', '))},"
            " coalesce(p.owner_id, p.player_id)::text FROM lobby_tickets t"
            " JOIN players p ON p.player_id = t.player_id"
            " WHERE t.status = 'waiting' AND t.settings = %s AND (t.allow_bots OR NOT %s)"
            " AND t.ladder = %s AND coalesce(p.owner_id, p.player_id) NOT IN"
            "  (SELECT coalesce(owner_id, player_id) FROM players"
            "   WHERE player_id = ANY(%s::uuid[]))"
            # A few more than the seats: a person's second ticket is passed over.
            " ORDER BY t.created_at, t.ticket_id LIMIT %s FOR UPDATE OF t SKIP LOCKED",
            (Jsonb(settings), bots, ladder, list(besides), seats * 4),
        ).fetchall()
        claimed: list[Ticket] = []
        people: set[str] = set()
        for *ticket, person in rows:
            if person not in people and len(claimed) < seats:
                people.add(person)
                claimed.append(Ticket(*ticket))
        return claimed

    @staticmethod
    def database_now(conn: psycopg.Connection) -> datetime:
        row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        now: datetime = row[0]
        return now

    @staticmethod
    def lobby_table(conn: psycopg.Connection, table_id: uuid.UUID, ladder: bool) -> None:
        """Records the new table as the lobby's (its quick match's, or its ladder's), in the
        caller's transaction."""
        conn.execute("INSERT INTO lobby_tables (table_id) VALUES (%s)", (table_id,))
        if ladder:
            conn.execute("INSERT INTO ladder_tables (table_id) VALUES (%s)", (table_id,))

    @staticmethod
    def seat_tickets(
        conn: psycopg.Connection, table_id: uuid.UUID, seats: Sequence[tuple[uuid.UUID, int]]
    ) -> None:
        """Records each (ticket, seat) at the table, in the caller's transaction: a ticket
        seated already fails the transaction (the primary key of ``lobby_seatings``)."""
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO lobby_seatings (ticket_id, table_id, seat) VALUES (%s, %s, %s)",
                [(ticket, table_id, seat) for ticket, seat in seats],
            )
        conn.execute(
            "UPDATE lobby_tickets SET status = 'seated', table_id = %s, updated_at = now()"
            " WHERE ticket_id = ANY(%s)",
            (table_id, [ticket for ticket, _ in seats]),
        )
