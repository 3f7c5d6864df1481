"""The event store on PostgreSQL: a match's stream of events, read and folded with
``evolve`` into its state (from the state this process last saw of it), and appended to
at an expected version, with the ``matches`` read model and the idempotency keys written
by the same statement, and the notification after it commits. Deciding is the
application's (``service.app.commands``)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import orjson
import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from ..config import Config
from ..game import Event, State, initial_state, replay
from ..game.events import SeatTaken
from ..game.state import DEALING, ENDED, SEATING, time_to_act
from .pool import Checkout, DatabaseUnavailable, connection_lost, kept_cursor, retried

NOTIFY_CHANNEL = "ddz_events"
#: Bytes of a notification left for the event after "<match>:<version>:" (PostgreSQL
#: refuses payloads of 8,000 bytes and more); a larger event is announced without itself.
NOTE_ROOM = 7900

#: (player, key, request hash) of a command sent with an Idempotency-Key.
Idempotency = tuple[uuid.UUID, str, bytes]
_T = TypeVar("_T")


class StoreError(Exception):
    """What the store refuses, with a stable machine-readable ``code``."""

    code = "store_error"
    #: What the problem document says besides the detail (RFC 9457 extension members).
    members: dict[str, Any] = {}


class VersionConflict(StoreError):
    """Someone appended first: the command was decided on a state that is no longer the last."""

    code = "version_conflict"


class MatchNotFound(StoreError):
    code = "match_not_found"


class IdempotencyMismatch(StoreError):
    code = "idempotency_key_reused"


class ConnectionLost(Exception):
    """The connection broke during a write: whether what was sent on it committed is unknown."""


class Behind(Exception):
    """The stream had moved past the version an append was made for: nothing was
    appended, and these are the events missed."""

    def __init__(self, missed: list[StoredEvent]):
        super().__init__(f"{len(missed)} events behind")
        self.missed = missed


@dataclass(frozen=True)
class StoredEvent:
    version: int
    position: int
    event: Event
    recorded_at: datetime


@dataclass(frozen=True)
class Loaded:
    """A match's state with the time of its last event (deadlines count from it)."""

    state: State
    last_recorded_at: datetime | None

    @property
    def ended(self) -> bool:
        return self.state.phase == ENDED


@dataclass(frozen=True)
class Outcome:
    """What a command did: its new events and the state after them. A retry with an
    idempotency key gets the first request's outcome again, ``replayed``: the events it
    appended and the state right after them, from which the same answer is built."""

    events: list[StoredEvent]
    state: State
    last_recorded_at: datetime | None
    replayed: bool = False


def _decode(row: Sequence[Any]) -> StoredEvent:
    version, position, type_, schema_version, payload, recorded_at = row
    return StoredEvent(
        version, position, Event.from_payload(type_, schema_version, payload), recorded_at
    )


_COLUMNS = "version, position, type, schema_version, payload, recorded_at"


#: The statements run most, made once: literals joined with an f-string are joined again
#: on every run, and psycopg encodes a str (and hashes the new bytes for its cache) on
#: every run too. A match's events after a version (:meth:`EventStore.read`):
_READ = (
    f"SELECT {_COLUMNS} FROM events WHERE stream_id = %s AND version > %s ORDER BY version"
).encode()

#: The append (:meth:`EventStore.append`):
_APPEND = (
    "WITH current AS ("
    " SELECT coalesce(max(version), 0) AS version FROM events WHERE stream_id = %(stream)s),"
    " inserted AS ("
    " INSERT INTO events (stream_id, version, type, schema_version, payload, command_id)"
    " SELECT %(stream)s, e.version, e.type, e.schema_version, e.payload, %(command)s"
    " FROM jsonb_to_recordset(%(events)s)"
    " AS e(version integer, type text, schema_version integer, payload jsonb)"
    " WHERE (SELECT version FROM current) = %(base)s ORDER BY e.version"
    " RETURNING version, position, recorded_at),"
    " projected AS ("
    " INSERT INTO matches (match_id, ruleset, turn_seconds, status, phase, version, seats,"
    " turn_seat, system_to_act, deadline, settled, created_at, updated_at)"
    " SELECT %(stream)s, %(ruleset)s, %(turn_seconds)s, %(status)s, %(phase)s, %(version)s, %(seats)s,"
    " %(turn_seat)s, %(system_to_act)s,"
    # game.state.deadline on the time PostgreSQL records (NULL: no seat is timed).
    " max(recorded_at) + %(time_to_act)s::interval,"
    # The times of the first and the last event: the row is the events' alone,
    # so that `ddz rebuild` makes it again exactly (service/store/rebuild.py).
    " %(settled)s, min(recorded_at), max(recorded_at) FROM inserted HAVING count(*) > 0"
    " ON CONFLICT (match_id) DO UPDATE SET status = EXCLUDED.status, phase = EXCLUDED.phase,"
    " version = EXCLUDED.version, seats = EXCLUDED.seats, turn_seat = EXCLUDED.turn_seat,"
    " system_to_act = EXCLUDED.system_to_act, deadline = EXCLUDED.deadline,"
    " settled = EXCLUDED.settled, updated_at = EXCLUDED.updated_at),"
    " keyed AS ("
    " INSERT INTO idempotency_keys (player_id, key, match_id, request_hash, first_version, last_version)"
    " SELECT %(key_player)s, %(key)s, %(stream)s, %(key_hash)s, min(version), max(version)"
    " FROM inserted HAVING %(key)s::text IS NOT NULL AND count(*) > 0)"
    # The events appended are the caller's: only what PostgreSQL gave them
    # comes back (their payloads read back cost more than the rest of it).
    " SELECT true AS appended, version, position, NULL, NULL, NULL, recorded_at"
    " FROM inserted"
    f" UNION ALL SELECT false, {_COLUMNS} FROM events"
    " WHERE stream_id = %(stream)s AND version > %(base)s AND (SELECT version FROM current) <> %(base)s"
    " ORDER BY version"
).encode()

#: The notifications of appends (:meth:`EventStore.announce`):
_ANNOUNCE = (
    b"SELECT pg_notify(%(channel)s, CASE WHEN octet_length(note.event) <= %(note_room)s"
    b" THEN note.head || ':' || note.event ELSE note.head END)"
    b" FROM (SELECT e.stream_id::text || ':' || e.version AS head,"
    b" json_build_array(e.position, e.type, e.schema_version, e.payload, e.recorded_at)::text"
    b" AS event"
    b" FROM unnest(%(streams)s::uuid[], %(bases)s::integer[], %(commands)s::uuid[])"
    b" WITH ORDINALITY AS a(stream_id, base, command_id, n)"
    b" JOIN events e ON e.stream_id = a.stream_id AND e.version > a.base"
    b" AND e.command_id = a.command_id ORDER BY a.n, e.version) AS note"
)


_K = TypeVar("_K")
_V = TypeVar("_V")


class Recent(Generic[_K, _V]):
    """The ``size`` most recently used items, safe across a process's threads: the
    process's caches of folded states (:class:`StateCache`, and the feed's by version)
    and of the feed's decoded events. With ``idle_seconds``, an item not used for that
    long goes too, at the next :meth:`put`."""

    #: Every one made, for the soak's census (service/census.py): an API process's are
    #: made before the collector is told to leave its start-up objects alone, and it lists
    #: only the objects it looks at.
    every: ClassVar[weakref.WeakSet[Recent[Any, Any]]] = weakref.WeakSet()

    def __init__(self, size: int, idle_seconds: float | None = None):
        Recent.every.add(self)
        self._size = size
        self._idle_seconds = idle_seconds
        #: Each item, and when it was last used: the least recently used first.
        self._items: OrderedDict[_K, tuple[_V, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            if self._idle_seconds is not None:  # the feed's caches read on a hot path
                self._items[key] = (found[0], time.monotonic())
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: _K, value: _V, unless: Callable[[_V], bool] | None = None) -> None:
        """Keeps ``value`` as the most recent, unless the item kept is ``unless`` it (then
        that one stays); the least recent go beyond the size, and the idle ones."""
        now = time.monotonic()
        with self._lock:
            current = self._items.get(key)
            kept = (
                value if current is None or unless is None or not unless(current[0]) else current[0]
            )
            self._items[key] = (kept, now)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            if self._idle_seconds is not None:
                idle_since = now - self._idle_seconds
                while self._items[next(iter(self._items))][1] < idle_since:
                    self._items.popitem(last=False)

    def pop(self, key: _K, unless: Callable[[_V], bool] | None = None) -> None:
        """Forgets the item, unless it is ``unless``."""
        with self._lock:
            current = self._items.get(key)
            if current is not None and (unless is None or not unless(current[0])):
                del self._items[key]


class _Versioned(Protocol):
    @property
    def version(self) -> int: ...


class _Folded(Protocol):
    """A stream's state as folded from its events (a match's :class:`Loaded`, a table's)."""

    @property
    def state(self) -> _Versioned: ...

    @property
    def ended(self) -> bool:
        """Whether the stream is over (its hand ended, its table closed)."""
        ...


_F = TypeVar("_F", bound=_Folded)


class StateCache(Generic[_F]):
    """The last folded state of recently used streams (matches, tables), so that a read
    reads only the events appended since, or none. Events never change, so a cached
    (version, state) stays true; it may only be behind.

    A stream that has ``ended`` moves to a short list of its own (an eighth of ``size``):
    it is read a few times more (the last views, its settlement, its record), then rarely.
    Kept among the live ones, every hand played stayed until ``size`` of them had ended,
    and a process's memory grew for as long as that took (a finished hand's state is some
    60 kB). A live one not used for :attr:`IDLE_SECONDS` goes as well: a process does not
    see the end of a hand whose last command another process ran (another API process, a
    worker's bot turn), and its last state of it was never moved to the short list."""

    #: Long enough that a stream in play is used again before (a turn's timer is 30 s
    #: unless a table sets more); one that is not costs one read of its events.
    IDLE_SECONDS = 300.0

    def __init__(self, size: int = Config.state_cache_size):
        self._recent: Recent[uuid.UUID, _F] = Recent(size, self.IDLE_SECONDS)
        self._ended: Recent[uuid.UUID, _F] = Recent(max(1, size // 8))

    def get(self, stream_id: uuid.UUID) -> _F | None:
        found = self._recent.get(stream_id)
        return found if found is not None else self._ended.get(stream_id)

    def put(self, stream_id: uuid.UUID, loaded: _F) -> None:
        """Keeps the stream's state, unless a newer one is kept already."""
        version = loaded.state.version

        def newer(kept: _F) -> bool:
            return kept.state.version > version

        if loaded.ended:
            self._recent.pop(stream_id, unless=newer)
            self._ended.put(stream_id, loaded, unless=newer)
        elif self._ended.get(stream_id) is None:  # an ended state is newer than this
            self._recent.put(stream_id, loaded, unless=newer)


#: An append to announce: the match, the version the events came after, the command that
#: appended them.
Appended = tuple[uuid.UUID, int, uuid.UUID]


class EventStore:
    """``announcer``, when given, takes the announcements of committed appends (see
    :meth:`announce`) off the command path: a process's :class:`~.notify.Announcer` sends
    them from a thread of its own, many in one statement. Without one, the append
    announces on its own connection before it returns."""

    def __init__(
        self,
        pool: ConnectionPool,
        cache: StateCache[Loaded] | None = None,
        announcer: Callable[[Appended], None] | None = None,
    ):
        self.pool = pool
        self.cache: StateCache[Loaded] = cache or StateCache()
        self.announcer = announcer

    def _run(self, work: Callable[[psycopg.Connection], _T], conn: psycopg.Connection | None) -> _T:
        """``work`` on ``conn`` when the caller has one (its transaction, say), else on one
        from the pool, retried on another when the connection breaks."""
        return retried(self.pool, work, conn)

    # Reading

    def read(
        self, match_id: uuid.UUID, after: int = 0, conn: psycopg.Connection | None = None
    ) -> list[StoredEvent]:
        """The match's events with version > ``after``, in order."""
        return self._run(
            lambda c: [
                _decode(row) for row in kept_cursor(c).execute(_READ, (match_id, after)).fetchall()
            ],
            conn,
        )

    def load(self, match_id: uuid.UUID, conn: psycopg.Connection | None = None) -> Loaded:
        """The match's current state (raises :class:`MatchNotFound`)."""
        return self.since(match_id, None, conn)[1]

    def since(
        self, match_id: uuid.UUID, after: int | None, conn: psycopg.Connection | None = None
    ) -> tuple[list[StoredEvent], Loaded]:
        """The events with version > ``after`` (none for ``None``) and the match's current
        state, from one read (raises :class:`MatchNotFound`)."""
        known = self.cache.get(match_id) or Loaded(initial_state, None)
        start = known.state.version if after is None else min(after, known.state.version)
        stored = self.read(match_id, start, conn)
        loaded = self.fold(match_id, known, [s for s in stored if s.version > known.state.version])
        if loaded.state.version == 0:
            raise MatchNotFound("no such match")
        return ([] if after is None else [s for s in stored if s.version > after]), loaded

    def load_many(
        self, match_ids: Sequence[uuid.UUID], conn: psycopg.Connection | None = None
    ) -> dict[uuid.UUID, Loaded]:
        """The current state of each match, from one read for all of them (a match with no
        events is left out)."""
        known = {m: self.cache.get(m) or Loaded(initial_state, None) for m in match_ids}
        missed: dict[uuid.UUID, list[StoredEvent]] = {m: [] for m in known}
        query = (
            f"SELECT stream_id, {_COLUMNS} FROM unnest(%s::uuid[], %s::integer[]) AS known(stream_id, after)"
            " JOIN events USING (stream_id) WHERE version > after ORDER BY stream_id, version"
        )
        params = (list(known), [k.state.version for k in known.values()])
        rows = self._run(lambda c: c.execute(query, params).fetchall(), conn)
        for row in rows:
            missed[row[0]].append(_decode(row[1:]))
        folded = {m: self.fold(m, known[m], missed[m]) for m in known}
        return {m: loaded for m, loaded in folded.items() if loaded.state.version > 0}

    def fold(self, match_id: uuid.UUID, known: Loaded, stored: list[StoredEvent]) -> Loaded:
        """``known`` with the events after it folded in (and remembered)."""
        if not stored:
            return known
        loaded = Loaded(replay((s.event for s in stored), known.state), stored[-1].recorded_at)
        self.cache.put(match_id, loaded)
        return loaded

    def learn(self, match_id: uuid.UUID, version: int, event: str) -> None:
        """Folds in an event another process appended, from its notification (see
        :meth:`append`), if it is the one after the state this process has of the match:
        the next command on the match then needs no second round trip. The append still
        checks that the stream is at the state's version, so a wrong guess costs nothing."""
        known = self.cache.get(match_id)
        if known is None or known.state.version != version - 1:
            return
        position, type_, schema_version, payload, recorded_at = orjson.loads(event)
        stored = _decode(
            (version, position, type_, schema_version, payload, datetime.fromisoformat(recorded_at))
        )
        self.fold(match_id, known, [stored])

    # The read model: the ``matches`` table, written with the events (see :meth:`append`)

    def listed(
        self, status: str | None, limit: int, viewer: str | None = None
    ) -> list[tuple[Loaded, datetime, datetime]]:
        """The newest ``limit`` matches (of that status, if given), each with its state and
        the times it was created and last changed, from one connection. With ``viewer`` (a
        player, or "" for nobody), a table's hands only where the viewer was dealt them."""
        sql = "SELECT match_id, created_at, updated_at FROM matches m WHERE true"
        params: list[Any] = []
        if status is not None:
            sql += " AND status = %s"
            params.append(status)
        if viewer is not None:
            sql += (
                " AND (NOT EXISTS (SELECT 1 FROM table_hands h WHERE h.match_id = m.match_id)"
                " OR m.seats @> %s)"
            )
            params.append(Jsonb([{"player": viewer}]))
        sql += " ORDER BY created_at DESC LIMIT %s"
        params.append(limit)
        return [
            (loaded, created_at, updated_at)
            for loaded, (_, created_at, updated_at) in self._with_states(sql, params)
        ]

    def _with_states(self, sql: str, params: list[Any]) -> list[tuple[Loaded, tuple[Any, ...]]]:
        """The rows of ``sql`` (a match id first), each with that match's state, read on one
        connection."""

        def read(
            conn: psycopg.Connection,
        ) -> tuple[list[tuple[Any, ...]], dict[uuid.UUID, Loaded]]:
            rows = conn.execute(sql, params).fetchall()
            return rows, self.load_many([row[0] for row in rows], conn)

        rows, states = self._run(read, None)
        return [(states[row[0]], row) for row in rows]

    def of_player(
        self, player: str, before: tuple[datetime, uuid.UUID] | None, limit: int
    ) -> list[tuple[Loaded, datetime, uuid.UUID | None]]:
        """The player's matches, newest first, from just after ``before`` (the created-at
        time and id of the last one seen): each with its state, when it was created and the
        table whose hand it was (if any)."""
        sql = (
            "SELECT m.match_id, m.created_at, h.table_id FROM matches m"
            " LEFT JOIN table_hands h USING (match_id) WHERE m.seats @> %s"
        )
        params: list[Any] = [Jsonb([{"player": player}])]
        if before is not None:
            sql += " AND (m.created_at, m.match_id) < (%s, %s)"
            params += list(before)
        sql += " ORDER BY m.created_at DESC, m.match_id DESC LIMIT %s"
        params.append(limit)
        return [
            (loaded, created_at, table_id)
            for loaded, (_, created_at, table_id) in self._with_states(sql, params)
        ]

    def past_deadline(self) -> list[tuple[uuid.UUID, int]]:
        """(match, version) of each match whose player to act has let the deadline pass."""
        return self._run(
            lambda conn: conn.execute(
                "SELECT match_id, version FROM matches"
                " WHERE status = 'playing' AND NOT system_to_act AND deadline <= now()"
            ).fetchall(),
            None,
        )

    def awaiting_system(self) -> list[uuid.UUID]:
        """The matches that the read model shows waiting for the system: a bot or
        disconnected seat to act, or a settlement (what each calls for is the app's
        ``work_for``, asked of its state)."""
        return self._run(
            lambda conn: [
                row[0]
                for row in conn.execute(
                    "SELECT match_id FROM matches"
                    " WHERE (status = 'playing' AND system_to_act) OR (status = 'ended' AND NOT settled)"
                )
            ],
            None,
        )

    def unsettled(self) -> tuple[int, float]:
        """How many ended hands wait for their settlement, and for how long (seconds) the
        oldest has waited: the settlement lag as it stands."""
        row = self._run(
            lambda conn: conn.execute(
                "SELECT count(*), coalesce(extract(epoch FROM now() - min(updated_at)), 0)"
                " FROM matches WHERE status = 'ended' AND NOT settled"
            ).fetchone(),
            None,
        )
        assert row is not None  # an aggregate answers one row
        count, oldest = row
        return count, float(oldest)

    # Writing

    @contextmanager
    def connection(self, transaction: bool = False) -> Iterator[psycopg.Connection]:
        """A live connection from the pool for a write (in a transaction if asked). No
        connection within the pool's timeout is :class:`DatabaseUnavailable`; a connection
        that breaks meanwhile is :class:`ConnectionLost` (whether a statement sent on it
        committed is then unknown: see :meth:`committed`)."""
        try:
            with (
                Checkout(self.pool) as conn,
                conn.transaction() if transaction else nullcontext(),
            ):
                yield conn
        except PoolTimeout as exc:
            raise DatabaseUnavailable("no database connection could be had") from exc
        except psycopg.OperationalError as exc:
            if not connection_lost(exc):
                raise
            raise ConnectionLost("the database connection broke") from exc

    def committed(
        self, match_id: uuid.UUID, known: Loaded, command_id: uuid.UUID
    ) -> Outcome | None:
        """After the connection broke: the command's outcome if its append, decided on
        ``known``, committed (the events after ``known`` start with the ones carrying
        ``command_id``), else ``None``."""
        query = f"SELECT command_id, {_COLUMNS} FROM events WHERE stream_id = %s AND version > %s ORDER BY version"
        rows = self._run(
            lambda c: c.execute(query, (match_id, known.state.version)).fetchall(), None
        )
        stored = [_decode(row[1:]) for row in rows]
        self.fold(match_id, known, stored)
        ours = [s for row, s in zip(rows, stored) if row[0] == command_id]
        if not ours:
            return None
        # The connection may have broken between the append's commit and its announcement.
        self._run(lambda c: self.announce(c, [(match_id, known.state.version, command_id)]), None)
        return Outcome(ours, replay((s.event for s in ours), known.state), ours[-1].recorded_at)

    def replayed(
        self, match_id: uuid.UUID, idempotency: Idempotency, conn: psycopg.Connection | None = None
    ) -> Outcome | None:
        """The first outcome of a request with this key, if there was one: the events it
        appended and the state right after them (the same key with another request:
        :class:`IdempotencyMismatch`)."""
        player, key, digest = idempotency

        def first(c: psycopg.Connection) -> tuple[int, list[StoredEvent]] | None:
            row = c.execute(
                "SELECT request_hash, first_version, last_version FROM idempotency_keys"
                " WHERE player_id = %s AND key = %s",
                (player, key),
            ).fetchone()
            if row is None:
                return None
            if bytes(row[0]) != digest:
                raise IdempotencyMismatch("this Idempotency-Key was used with another request")
            return row[1], [e for e in self.read(match_id, 0, c) if e.version <= row[2]]

        found = self._run(first, conn)
        if found is None:
            return None
        first_version, stored = found
        state = replay(e.event for e in stored)
        return Outcome(
            [e for e in stored if e.version >= first_version],
            state,
            stored[-1].recorded_at,
            replayed=True,
        )

    def append(
        self,
        conn: psycopg.Connection,
        match_id: uuid.UUID,
        version: int,
        events: Sequence[Event],
        after: State,
        command_id: uuid.UUID,
        idempotency: Idempotency | None,
    ) -> list[StoredEvent]:
        """Inserts the events at the versions after ``version`` if the stream is still at
        ``version``, each marked with ``command_id``, brings the match's row of the ``matches`` table up to ``after`` (its
        deadline counted from the last event's time) and records the idempotency key (if
        any) with the versions it produced: one statement, one transaction (unless the caller
        has one open). If the stream has moved on, nothing is written and the statement
        returns the events after ``version`` instead (raised as :class:`Behind`). A unique
        violation means someone appended in between, or a request with the same key did.
        Then it announces the events (:meth:`announce`): through the announcer once they
        have committed, on ``conn`` (at its commit) when the caller holds a transaction."""
        player, key, digest = idempotency if idempotency is not None else (None, None, None)
        try:
            rows = (
                kept_cursor(conn)
                .execute(
                    _APPEND,
                    {
                        "stream": match_id,
                        "base": version,
                        "command": command_id,
                        # One JSON parameter: adapting it costs a fraction of four typed arrays.
                        "events": Jsonb(
                            dumps=orjson.dumps,
                            obj=[
                                {
                                    "version": v,
                                    "type": e.type,
                                    "schema_version": e.version,
                                    "payload": e.payload(),
                                }
                                for v, e in enumerate(events, start=version + 1)
                            ],
                        ),
                        **match_columns(after),
                        "time_to_act": time_to_act(after),
                        "key_player": player,
                        "key": key,
                        "key_hash": digest,
                    },
                )
                .fetchall()
            )
        except psycopg.errors.UniqueViolation:
            raise VersionConflict("someone else acted first; reload and try again") from None
        if rows and not rows[0][0]:
            raise Behind([_decode(row[1:]) for row in rows])
        # The status from pgconn: conn.info makes a new object on every access.
        if self.announcer is not None and conn.pgconn.transaction_status == TransactionStatus.IDLE:
            self.announcer((match_id, version, command_id))
        else:
            self.announce(conn, [(match_id, version, command_id)])
        for event in events:
            if isinstance(event, SeatTaken) and event.player is not None:
                wake_player(conn, event.player)
        return [
            StoredEvent(row[1], row[2], event, row[6])
            for row, event in zip(rows, events, strict=True)
        ]

    @staticmethod
    def announce(conn: psycopg.Connection, appends: Sequence[Appended]) -> None:
        """Notifies the events of each append, in order (each event in its notification
        when it fits, for the other processes' caches; see :meth:`learn`), in one
        statement, in a transaction of its own after theirs have committed, unless the
        caller has one open. Not in the append's own statement: PostgreSQL holds one lock,
        for the whole server, from a notifying transaction's commit until its WAL is
        flushed, so every append waited for every other's flush; measured on 32
        connections, 400-1,400 commits/s where the same inserts without NOTIFY made
        6,000-12,000, and the API topped out at that figure. A notification in a
        transaction that wrote nothing is not held up by a flush."""
        kept_cursor(conn).execute(
            _ANNOUNCE,
            {
                "channel": NOTIFY_CHANNEL,
                "note_room": NOTE_ROOM,
                "streams": [match_id for match_id, _, _ in appends],
                "bases": [base for _, base, _ in appends],
                "commands": [command_id for _, _, command_id in appends],
            },
        )


def wake_player(conn: psycopg.Connection, player: str) -> None:
    """Wakes the readers of the player's own stream when its transaction commits: they watch
    only the tables and matches it was seated at, so a new seat must reach them by the
    player's id (the notifier treats it as one more stream id)."""
    conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"{player}:0"))


def match_columns(state: State) -> dict[str, Any]:
    """The ``matches`` row of a match in ``state``, but for its times (the first and last
    event's) and ``deadline`` (the last event's time plus :func:`time_to_act`)."""
    timed = state.awaits_decision()
    assert state.table is not None  # a stream begins with the match's creation
    return {
        "ruleset": state.table.ruleset.name,
        "turn_seconds": state.table.turn_seconds,
        "status": status(state),
        "phase": state.phase,
        "version": state.version,
        "seats": Jsonb(
            [None if s is None else {"player": s.player, "bot": s.bot} for s in state.seats],
            orjson.dumps,
        ),
        "turn_seat": state.turn if timed else None,
        "system_to_act": timed and state.turn is not None and state.is_system(state.turn),
        "settled": state.settled,
    }


#: A match's status in the ``matches`` read model, in the order a match goes through them.
STATUSES = ("open", "playing", "ended")


def status(state: State) -> str:
    """A match's status for listing: open (seating), playing, ended."""
    if state.phase in (SEATING, DEALING):
        return "open"
    return "ended" if state.phase == ENDED else "playing"


def request_hash(body: Any) -> bytes:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).digest()
