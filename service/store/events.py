"""The event store on PostgreSQL: load a match's stream, fold it with ``evolve``, ``decide``,
append at the expected version. That is the whole command path. "Load" starts from the
state this process last saw of the match; the append goes in only if nobody appended
since, and otherwise brings back what was missed."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Sequence

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from ..game import Command, Event, State, decide, initial_state, replay
from ..game.errors import GameError
from ..game.state import DEALING, ENDED, SEATING
from .pool import ATTEMPTS, DatabaseUnavailable, connection_lost, live_connection, pause, retried

NOTIFY_CHANNEL = "ddz_events"
#: Bytes of a notification left for the event after "<match>:<version>:" (PostgreSQL
#: refuses payloads of 8,000 bytes and more); a larger event is announced without itself.
NOTE_ROOM = 7900
#: Appends retried on a version conflict when the caller named no expected version.
RETRIES = 5


class VersionConflict(GameError):
    """Someone appended first: the command was decided on a state that is no longer the last."""

    code = "version_conflict"


class MatchNotFound(GameError):
    code = "match_not_found"


class IdempotencyMismatch(GameError):
    code = "idempotency_key_reused"


class _Lost(Exception):
    """The connection broke during a command. ``known`` is the state its last append was
    decided on, if it got that far: whether that append committed is then unknown."""

    def __init__(self, known: Loaded | None):
        super().__init__("the database connection broke")
        self.known = known


class _Behind(Exception):
    """The stream had moved past the version a command was decided on: nothing was
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


@dataclass(frozen=True)
class Outcome:
    """What a command did: its new events and the state after them. A retry with an
    idempotency key gets the first request's outcome again, ``replayed``: the events it
    appended and the state right after them, from which the same answer is built."""

    events: list[StoredEvent]
    state: State
    last_recorded_at: datetime | None
    replayed: bool = False


def _decode(row) -> StoredEvent:
    version, position, type_, schema_version, payload, recorded_at = row
    return StoredEvent(version, position, Event.from_payload(type_, schema_version, payload), recorded_at)


_COLUMNS = "version, position, type, schema_version, payload, recorded_at"


class StateCache:
    """The last folded state of recently used matches, so that a command reads only the
    events appended since, or none. Events never change, so a cached (version, state)
    stays true; it may only be behind."""

    def __init__(self, size: int = 2048):
        self._size = size
        self._items: OrderedDict[uuid.UUID, Loaded] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, match_id: uuid.UUID) -> Loaded | None:
        with self._lock:
            item = self._items.get(match_id)
            if item is not None:
                self._items.move_to_end(match_id)
            return item

    def put(self, match_id: uuid.UUID, loaded: Loaded) -> None:
        with self._lock:
            current = self._items.get(match_id)
            if current is None or current.state.version <= loaded.state.version:
                self._items[match_id] = loaded
                self._items.move_to_end(match_id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class EventStore:
    def __init__(self, pool: ConnectionPool, cache: StateCache | None = None):
        self.pool = pool
        self.cache = cache or StateCache()

    def _run(self, work: Callable[[psycopg.Connection], Any], conn: psycopg.Connection | None):
        """``work`` on ``conn`` when the caller has one (its transaction, say), else on one
        from the pool, retried on another when the connection breaks."""
        return retried(self.pool, work, conn)

    # Reading

    def read(self, match_id: uuid.UUID, after: int = 0, conn: psycopg.Connection | None = None) -> list[StoredEvent]:
        """The match's events with version > ``after``, in order."""
        query = f"SELECT {_COLUMNS} FROM events WHERE stream_id = %s AND version > %s ORDER BY version"
        return self._run(lambda c: [_decode(row) for row in c.execute(query, (match_id, after))], conn)

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
        loaded = self._fold(match_id, known, [s for s in stored if s.version > known.state.version])
        if loaded.state.version == 0:
            raise MatchNotFound("no such match", "match_not_found")
        return ([] if after is None else [s for s in stored if s.version > after]), loaded

    def load_many(self, match_ids: Sequence[uuid.UUID], conn: psycopg.Connection | None = None) -> dict[uuid.UUID, Loaded]:
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
        folded = {m: self._fold(m, known[m], missed[m]) for m in known}
        return {m: loaded for m, loaded in folded.items() if loaded.state.version > 0}

    def _fold(self, match_id: uuid.UUID, known: Loaded, stored: list[StoredEvent]) -> Loaded:
        """``known`` with the events after it folded in (and remembered)."""
        if not stored:
            return known
        loaded = Loaded(replay((s.event for s in stored), known.state), stored[-1].recorded_at)
        self.cache.put(match_id, loaded)
        return loaded

    def learn(self, match_id: uuid.UUID, version: int, event: str) -> None:
        """Folds in an event another process appended, from its notification (see
        :meth:`_append`), if it is the one after the state this process has of the match:
        the next command on the match then needs no second round trip. The append still
        checks that the stream is at the state's version, so a wrong guess costs nothing."""
        known = self.cache.get(match_id)
        if known is None or known.state.version != version - 1:
            return
        position, type_, schema_version, payload, recorded_at = json.loads(event)
        stored = _decode((version, position, type_, schema_version, payload, datetime.fromisoformat(recorded_at)))
        self._fold(match_id, known, [stored])

    # Writing

    def execute(
        self,
        match_id: uuid.UUID,
        command: Callable[[State], Command],
        *,
        expected_version: int | None = None,
        idempotency: tuple[uuid.UUID, str, bytes] | None = None,
        new_match: bool = False,
        then: Callable[[State], Command | None] | None = None,
        within: Callable[[psycopg.Connection, State], None] | None = None,
    ) -> Outcome:
        """Loads the match, decides ``command(state)`` and appends the events at the next
        version, atomically. With ``expected_version`` a stale state fails with
        :class:`VersionConflict`; without, a lost race is decided again on the new state,
        and a refusal is always decided on the latest state.

        ``idempotency`` is (player, key, request hash): the key is written with the events,
        and a retry with the same key gets the first outcome back without deciding again
        (the same key with another request: :class:`IdempotencyMismatch`). ``then`` may
        name a command that follows from the new state (dealing once the fourth seat is
        taken), appended with the first events; ``within`` writes what must commit with
        the events (the ledger of a settlement)."""
        # The command's identity: its events carry it, so that when the connection breaks
        # after the append was sent, the events say whether it committed.
        command_id = uuid.uuid4()
        attempts = 1 if expected_version is not None else RETRIES
        conflicts = lost = 0
        while True:
            try:
                return self._execute_once(
                    match_id, command, command_id, expected_version, idempotency, new_match, then, within
                )
            except VersionConflict:
                # A concurrent request with the same key may have won: then this is its retry.
                replayed = self._replay(match_id, idempotency) if idempotency is not None else None
                if replayed is not None:
                    return replayed
                conflicts += 1
                if conflicts == attempts:
                    raise
            except _Lost as exc:
                committed = self._committed(match_id, exc.known, command_id) if exc.known is not None else None
                if committed is not None:
                    return committed
                # Not committed: nothing was written, so the command is decided again.
                lost += 1
                if lost == ATTEMPTS:
                    raise DatabaseUnavailable("the database connection broke on every try") from exc.__cause__
                pause(lost - 1)

    def _execute_once(self, match_id, command, command_id, expected_version, idempotency, new_match, then, within):
        # The command is decided on the state this process last saw of the match, and the
        # append (one statement) inserts only if the stream is still at that version. If
        # it is not, the append answers with the events missed instead: they are folded
        # in and the command decided again. So a command is one round trip when this
        # process saw the match's last event, and two when another process appended since.
        # Only what ``within`` writes needs a transaction around it (it reads first).
        known = None if new_match or within is not None else self.cache.get(match_id)
        try:
            with live_connection(self.pool) as conn, (conn.transaction() if within is not None else nullcontext()):
                read = known is None or expected_version not in (None, known.state.version)
                if read:
                    known = Loaded(initial_state, None) if new_match else self.load(match_id, conn)
                for _ in range(RETRIES):
                    try:
                        outcome = self._decide_and_append(
                            conn, match_id, known.state, command, command_id, expected_version, then, within, idempotency
                        )
                        break
                    except _Behind as behind:
                        if within is not None or expected_version is not None:
                            raise VersionConflict(
                                f"the match is at version {behind.missed[-1].version}, not {known.state.version}",
                                "version_conflict",
                            ) from None
                        known, read = self._fold(match_id, known, behind.missed), True
                    except VersionConflict:
                        raise
                    except GameError:
                        if not read:
                            # Refused on a state that may be behind: refuse only on the latest.
                            known, read = self.load(match_id, conn), True
                            continue
                        if idempotency is not None:
                            # A retry of a request whose events are in the state just read
                            # gets that request's outcome, not a refusal of the repeat.
                            replayed = self._replay(match_id, idempotency, conn)
                            if replayed is not None:
                                return replayed
                        raise
                else:
                    raise VersionConflict("the match kept changing; try again", "version_conflict")
        except PoolTimeout as exc:
            raise DatabaseUnavailable("no database connection could be had") from exc
        except psycopg.OperationalError as exc:
            if not connection_lost(exc):
                raise
            # ``known`` is the state the last append (if one was sent) was decided on.
            raise _Lost(known) from exc
        self.cache.put(match_id, Loaded(outcome.state, outcome.last_recorded_at))
        return outcome

    def _committed(self, match_id: uuid.UUID, known: Loaded, command_id: uuid.UUID) -> Outcome | None:
        """After the connection broke: the command's outcome if its append, decided on
        ``known``, committed (the events after ``known`` start with the ones carrying
        ``command_id``), else ``None``."""
        query = f"SELECT command_id, {_COLUMNS} FROM events WHERE stream_id = %s AND version > %s ORDER BY version"
        rows = self._run(lambda c: c.execute(query, (match_id, known.state.version)).fetchall(), None)
        stored = [_decode(row[1:]) for row in rows]
        self._fold(match_id, known, stored)
        ours = [s for row, s in zip(rows, stored) if row[0] == command_id]
        if not ours:
            return None
        return Outcome(ours, replay((s.event for s in ours), known.state), ours[-1].recorded_at)

    def _replay(self, match_id: uuid.UUID, idempotency, conn: psycopg.Connection | None = None) -> Outcome | None:
        """The first outcome of a request with this key, if there was one: the events it
        appended and the state right after them."""
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
                raise IdempotencyMismatch(
                    "this Idempotency-Key was used with another request", "idempotency_key_reused"
                )
            return row[1], [e for e in self.read(match_id, 0, c) if e.version <= row[2]]

        found = self._run(first, conn)
        if found is None:
            return None
        first_version, stored = found
        state = replay(e.event for e in stored)
        return Outcome([e for e in stored if e.version >= first_version], state, stored[-1].recorded_at, replayed=True)

    def _decide_and_append(self, conn, match_id, state, command, command_id, expected_version, then, within, idempotency) -> Outcome:
        if expected_version is not None and expected_version != state.version:
            raise VersionConflict(
                f"the match is at version {state.version}, not {expected_version}", "version_conflict"
            )
        events = decide(state, command(state))
        after = replay(events, state)
        follow_up = then(after) if then is not None else None
        if follow_up is not None:
            more = decide(after, follow_up)
            events, after = events + more, replay(more, after)
        if within is not None:
            within(conn, state)
        stored = self._append(conn, match_id, state.version, events, after, command_id, idempotency)
        return Outcome(stored, after, stored[-1].recorded_at)

    @staticmethod
    def _append(
        conn: psycopg.Connection, match_id, version: int, events: Sequence[Event], after: State, command_id, idempotency
    ) -> list[StoredEvent]:
        """Inserts the events at the versions after ``version`` if the stream is still at
        ``version``, each marked with ``command_id``, brings the match's row of the ``matches`` table up to ``after`` (its
        deadline counted from the last event's time), records the idempotency key (if any)
        with the versions it produced, and notifies (each event in its notification when
        it fits, for the other processes' caches; see :meth:`learn`): one statement, one round
        trip. If the stream has moved on, nothing is written and the statement returns
        the events after ``version`` instead (raised as :class:`_Behind`). A unique
        violation means someone appended in between, or a request with the same key did."""
        player, key, digest = idempotency if idempotency is not None else (None, None, None)
        seats = [None if s is None else {"player": s.player, "bot": s.bot} for s in after.seats]
        timed = after.awaits_decision()
        try:
            rows = conn.execute(
                "WITH current AS ("
                " SELECT coalesce(max(version), 0) AS version FROM events WHERE stream_id = %(stream)s),"
                " inserted AS ("
                " INSERT INTO events (stream_id, version, type, schema_version, payload, command_id)"
                " SELECT %(stream)s, e.version, e.type, e.schema_version, e.payload, %(command)s"
                " FROM jsonb_to_recordset(%(events)s)"
                " AS e(version integer, type text, schema_version integer, payload jsonb)"
                " WHERE (SELECT version FROM current) = %(base)s ORDER BY e.version"
                f" RETURNING {_COLUMNS}),"
                " projected AS ("
                " INSERT INTO matches (match_id, ruleset, turn_seconds, status, phase, version, seats,"
                " turn_seat, system_to_act, deadline, settled)"
                " SELECT %(stream)s, %(ruleset)s, %(turn_seconds)s, %(status)s, %(phase)s, %(version)s, %(seats)s,"
                " %(turn_seat)s, %(system)s,"
                " CASE WHEN %(timed)s THEN max(recorded_at) + make_interval(secs => %(turn_seconds)s) END,"
                " %(settled)s FROM inserted HAVING count(*) > 0"
                " ON CONFLICT (match_id) DO UPDATE SET status = EXCLUDED.status, phase = EXCLUDED.phase,"
                " version = EXCLUDED.version, seats = EXCLUDED.seats, turn_seat = EXCLUDED.turn_seat,"
                " system_to_act = EXCLUDED.system_to_act, deadline = EXCLUDED.deadline,"
                " settled = EXCLUDED.settled, updated_at = now()),"
                " keyed AS ("
                " INSERT INTO idempotency_keys (player_id, key, match_id, request_hash, first_version, last_version)"
                " SELECT %(key_player)s, %(key)s, %(stream)s, %(key_hash)s, min(version), max(version)"
                " FROM inserted HAVING %(key)s::text IS NOT NULL AND count(*) > 0)"
                f" SELECT true AS appended, {_COLUMNS} FROM inserted,"
                " LATERAL (SELECT pg_notify(%(channel)s, CASE WHEN octet_length(note.event) <= %(note_room)s"
                " THEN note.head || ':' || note.event ELSE note.head END)"
                " FROM (SELECT %(stream)s::text || ':' || inserted.version AS head,"
                " json_build_array(inserted.position, inserted.type, inserted.schema_version,"
                " inserted.payload, inserted.recorded_at)::text AS event) AS note) AS notified"
                f" UNION ALL SELECT false, {_COLUMNS} FROM events"
                " WHERE stream_id = %(stream)s AND version > %(base)s AND (SELECT version FROM current) <> %(base)s"
                " ORDER BY version",
                {
                    "stream": match_id,
                    "base": version,
                    "command": command_id,
                    # One JSON parameter: adapting it costs a fraction of four typed arrays.
                    "events": Jsonb([
                        {"version": v, "type": e.type, "schema_version": e.version, "payload": e.payload()}
                        for v, e in enumerate(events, start=version + 1)
                    ]),
                    "channel": NOTIFY_CHANNEL,
                    "note_room": NOTE_ROOM,
                    "ruleset": after.table.ruleset.name,
                    "turn_seconds": after.table.turn_seconds,
                    "status": status(after),
                    "phase": after.phase,
                    "version": after.version,
                    "seats": Jsonb(seats),
                    "turn_seat": after.turn if timed else None,
                    "system": timed and after.is_system(after.turn),
                    "timed": timed,
                    "settled": after.settled,
                    "key_player": player,
                    "key": key,
                    "key_hash": digest,
                },
            ).fetchall()
        except psycopg.errors.UniqueViolation:
            raise VersionConflict("someone else acted first; reload and try again", "version_conflict") from None
        if rows and not rows[0][0]:
            raise _Behind([_decode(row[1:]) for row in rows])
        return [_decode(row[1:]) for row in rows]


def status(state: State) -> str:
    """A match's status for listing: open (seating), playing, ended."""
    if state.phase in (SEATING, DEALING):
        return "open"
    return "ended" if state.phase == ENDED else "playing"


def deadline(state: State, last_recorded_at: datetime | None) -> datetime | None:
    """When the seat to act loses its turn to the system: turn_seconds after the last event."""
    if not state.awaits_decision() or last_recorded_at is None:
        return None
    return last_recorded_at + timedelta(seconds=state.table.turn_seconds)


def request_hash(body: Any) -> bytes:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).digest()
