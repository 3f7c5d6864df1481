"""The read models made again from the events: each stream's events folded (``evolve`` for
a match, ``evolve_table`` for a table) into the rows the appends write beside them, compared
with the rows there, and, unless only checking, the rows that differ written.

The read models, and what each is made from:

- ``matches``: a match's row, from its stream (:func:`~.events.match_columns`; its times
  are its first and last event's, its deadline the last event's time plus the time to act);
- ``tables``: a table's row, from its stream (:func:`~.tables.table_columns`: what it
  waits for until when, from its last event and its last hand's settlement; times as a
  match's);
- ``table_hands``: each hand a table dealt, from its ``hand_started`` events;
- ``player_streams`` (what each player's own stream reads of a table): from the table's
  ``player_joined`` events to the version of the append that freed the player's seat (the
  events of one append are those of one transaction, ``events.xid``);
- the lobby's tickets: a ticket is seated, at that table, exactly when ``lobby_seatings``
  (a table of facts that refuses updates and deletes) says so;
- ``player_figures`` (the players page's balance, hands and disconnects of each player)
  and ``ledger_totals`` (the ledger check's sums): from the settlements, the ledger, its
  verdicts and the disconnect events, as the database functions ``player_figures_made()``
  and ``ledger_totals_made()`` add them up (migrations/0032_player_figures.sql and
  0033_ledger_totals.sql; triggers keep them as hands are settled and entries booked).

The events, the settlements and the ledger entries are never written here: they refuse it.

Online, beside a running service: each batch reads the rows and the events as of one
moment (an append writes both in one transaction, so they agree unless a row is wrong),
then writes a row only if it is still as read (its ``version``, or the value compared),
so that an append that lands meanwhile is never undone; such a row is compared again,
and written then if it still differs."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ..game import Event, replay
from ..game.events import HandStarted, MatchCreated, PlayerJoined, TableCreated
from ..game.state import time_to_act
from ..game.table_play import evolve_table, initial_table
from .events import StoredEvent, match_columns
from .pool import retried
from .tables import TableLoaded, table_columns
from .tables import _settled_at as settled_at

#: The read models this module makes again, in the order it makes them.
READ_MODELS = (
    "matches",
    "tables",
    "table_hands",
    "player_streams",
    "lobby_tickets",
    "player_figures",
    "ledger_totals",
)
#: Streams read and compared at a time.
BATCH = 500
#: Passes over a batch's rows that the service changed while they were being written.
ATTEMPTS = 3

_MATCH = (
    "ruleset, turn_seconds, status, phase, version, seats, turn_seat, system_to_act,"
    " deadline, settled, created_at, updated_at"
)
_TABLE = "version, private, settings, seats, match_id, hands, due, due_at, created_at, updated_at"
#: The read models whose rows belong to a stream: (table, its stream's column, the stream's
#: first event, what keeps a row of no stream from being deleted), in the order their rows
#: of no stream are deleted (those referring to others first).
_ORPHANS = (
    ("table_hands", "table_id", "table_created", ""),
    ("player_streams", "stream_id", "table_created", ""),
    (
        "matches",
        "match_id",
        "match_created",
        " AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.match_id = r.match_id)",
    ),
    (
        "tables",
        "table_id",
        "table_created",
        " AND NOT EXISTS (SELECT 1 FROM table_hands h WHERE h.table_id = r.table_id)"
        " AND NOT EXISTS (SELECT 1 FROM lobby_tickets l WHERE l.table_id = r.table_id)"
        " AND NOT EXISTS (SELECT 1 FROM lobby_seatings l WHERE l.table_id = r.table_id)",
    ),
)
_FIRST = "SELECT stream_id, type FROM events WHERE version = 1 AND type IN ('match_created', 'table_created')"


@dataclass(frozen=True)
class _Sums:
    """A read model of sums that triggers keep as rows are written elsewhere, and the
    database function that makes them again from those rows (its columns: ``key``, then
    ``columns``)."""

    table: str
    key: str
    columns: tuple[str, ...]
    made: str
    #: What they are made from, for the differences' wording.
    source: str

    def _differ(self) -> str:
        stored = ", ".join(f"r.{c}" for c in self.columns)
        made = ", ".join(f"m.{c}" for c in self.columns)
        return (
            f"SELECT m.{self.key}, {stored}, {made} FROM {self.made}() m"
            f" LEFT JOIN {self.table} r USING ({self.key})"
            f" WHERE ({stored}) IS DISTINCT FROM ({made})"
        )

    def differences(self) -> str:
        return f"{self._differ()} ORDER BY 1"

    def write(self) -> str:
        """The differences added to the rows, found in the statement that adds them."""
        n = len(self.columns)
        names = ", ".join(self.columns)
        deltas = ", ".join(f"d.m{i} - coalesce(d.r{i}, 0)" for i in range(n))
        aliases = ", ".join([f"r{i}" for i in range(n)] + [f"m{i}" for i in range(n)])
        return (
            f"INSERT INTO {self.table} AS r ({self.key}, {names})"
            f" SELECT d.k, {deltas} FROM ({self._differ()}) AS d (k, {aliases}) ORDER BY d.k"
            f" ON CONFLICT ({self.key}) DO UPDATE SET "
            + ", ".join(f"{c} = r.{c} + EXCLUDED.{c}" for c in self.columns)
        )


#: The read models of sums: each player's figures (migrations/0032_player_figures.sql), and
#: the ledger check's totals (migrations/0033_ledger_totals.sql).
_SUMS = (
    _Sums(
        "player_figures",
        "player_id",
        ("balance", "hands", "disconnects"),
        "player_figures_made",
        "the ledger and the events",
    ),
    _Sums(
        "ledger_totals",
        "slot",
        ("settled", "checked", "entries", "total", "failing"),
        "ledger_totals_made",
        "the settlements and the verdicts",
    ),
)


@dataclass
class Found:
    """What a pass found: how many streams it read, each difference (described), how many
    rows it wrote, and the differences left after writing (a row the service kept changing,
    a row of no stream that others refer to)."""

    streams: int = 0
    differences: list[str] = field(default_factory=list)
    written: int = 0
    left: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Stream:
    stream_id: uuid.UUID
    #: (xid, stored event) in version order.
    events: list[tuple[int, StoredEvent]]


def _jsonable(columns: dict[str, Any]) -> dict[str, Any]:
    """The columns as read back from PostgreSQL (a Jsonb parameter as its value)."""
    return {k: v.obj if isinstance(v, Jsonb) else v for k, v in columns.items()}


def match_row(stored: Sequence[StoredEvent]) -> dict[str, Any]:
    """The ``matches`` row the appends of these events (a match's, from its first) wrote."""
    state = replay(s.event for s in stored)
    allowed = time_to_act(state)
    last = stored[-1].recorded_at
    return {
        **_jsonable(match_columns(state)),
        "deadline": None if allowed is None else last + allowed,
        "created_at": stored[0].recorded_at,
        "updated_at": last,
    }


def table_rows(
    table_id: uuid.UUID, events: Sequence[tuple[int, StoredEvent]]
) -> tuple[dict[str, Any], dict[uuid.UUID, int], dict[tuple[str, int], int | None]]:
    """What the appends of a table's events (each with its transaction's id) wrote: the
    ``tables`` row, its hands (match: number) and its ``player_streams`` ((player, from
    version): until version)."""
    state = initial_table
    hands: dict[uuid.UUID, int] = {}
    streams: dict[tuple[str, int], int | None] = {}
    for _, append in groupby(events, key=lambda e: e[0]):
        for _, stored in append:
            state = evolve_table(state, stored.event)
            if isinstance(stored.event, HandStarted):
                hands[uuid.UUID(stored.event.match_id)] = stored.event.number
            elif isinstance(stored.event, PlayerJoined) and stored.event.player is not None:
                streams[(stored.event.player, stored.version)] = None
        seated = {s.player for s in state.seats if s is not None and s.player is not None}
        for key, until in streams.items():
            if until is None and key[0] not in seated:
                streams[key] = state.version
    first, last = events[0][1].recorded_at, events[-1][1].recorded_at
    settled = settled_at([s for _, s in events], None)
    row = {
        **_jsonable(table_columns(TableLoaded(state, last, settled))),
        "created_at": first,
        "updated_at": last,
    }
    if row["match_id"] is not None:
        row["match_id"] = uuid.UUID(row["match_id"])
    return row, hands, streams


def _differs(kind: str, key: object, found: dict[str, Any] | None, made: dict[str, Any]) -> str:
    if found is None:
        return f"{kind} {key}: missing"
    changed = [
        f"{c} is {found[c]!r}, the events say {v!r}" for c, v in made.items() if found[c] != v
    ]
    return f"{kind} {key}: " + "; ".join(changed)


class ReadModels:
    def __init__(self, pool: ConnectionPool, batch: int = BATCH):
        self.pool = pool
        self.batch = batch

    def streams(self) -> int:
        """How many streams (matches and tables) there are."""
        row = retried(
            self.pool,
            lambda conn: conn.execute(f"SELECT count(*) FROM ({_FIRST}) AS s").fetchone(),
        )
        assert row is not None
        return int(row[0])

    def _batches(self) -> Iterator[tuple[list[uuid.UUID], list[uuid.UUID]]]:
        """The streams, a batch at a time: (matches, tables)."""
        after = uuid.UUID(int=0)
        while True:
            rows = retried(self.pool, functools.partial(self._next, after))
            if not rows:
                return
            after = rows[-1][0]
            yield (
                [s for s, t in rows if t == MatchCreated.type],
                [s for s, t in rows if t == TableCreated.type],
            )

    def _next(self, after: uuid.UUID, conn: psycopg.Connection) -> list[tuple[Any, ...]]:
        return conn.execute(
            f"{_FIRST} AND stream_id > %s ORDER BY stream_id LIMIT %s", (after, self.batch)
        ).fetchall()

    def run(self, write: bool, progress: Callable[[Found], None] | None = None) -> Found:
        """Compares every read model with its events, and writes what differs if ``write``;
        ``progress`` is told after each batch."""
        found = Found()
        for matches, tables in self._batches():
            # Written, then compared again (the last time only compared).
            for attempt in range(ATTEMPTS):
                writing = write and attempt < ATTEMPTS - 1
                differences, written = self._batch(matches, tables, writing)
                if attempt == 0:
                    found.differences += differences
                found.written += written
                if not writing or not differences:
                    break
            if write and differences and not writing:
                found.left += differences
            found.streams += len(matches) + len(tables)
            if progress is not None:
                progress(found)
        differences, written, left = self._orphans(write)
        found.differences += differences
        found.written += written
        found.left += left
        differences, written = self._sums(write)
        found.differences += differences
        found.written += written
        return found

    def _sums(self, write: bool) -> tuple[list[str], int]:
        """The read models of sums against what their rows make of them. Written as the
        differences found, added in the statement that finds them: a hand settled
        meanwhile is in neither side of a difference, and its own addition (a trigger's)
        stays."""

        def work(conn: psycopg.Connection) -> tuple[list[str], int]:
            differences: list[str] = []
            written = 0
            with conn.transaction():
                for sums in _SUMS:
                    rows = conn.execute(sums.differences()).fetchall()
                    n = len(sums.columns)
                    for key, *values in rows:
                        found, made = values[:n], values[n:]
                        changed = "; ".join(
                            f"{name} is {was!r}, {sums.source} say {says!r}"
                            for name, was, says in zip(sums.columns, found, made)
                            if was != says
                        )
                        what = "missing" if found[0] is None else changed
                        differences.append(f"{sums.table} {key}: {what}")
                    if write and rows:
                        written += max(conn.execute(sums.write()).rowcount, 0)
            return differences, written

        return retried(self.pool, work)

    def _batch(
        self, matches: list[uuid.UUID], tables: list[uuid.UUID], write: bool
    ) -> tuple[list[str], int]:
        def work(conn: psycopg.Connection) -> tuple[list[str], int]:
            # The rows and the events as of one moment (an append writes both in one
            # transaction): a row is compared with the events it was written with.
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                rows = _rows(conn, matches, tables)
                streams = _read(conn, matches + tables)
            match_rows, table_rows_, hands, player_streams = rows
            differences: list[str] = []
            writes: list[_Write] = []
            for match_id in matches:
                made = match_row([s for _, s in streams[match_id].events])
                found = match_rows.get(match_id)
                _row("matches", "match_id", _MATCH, match_id, made, found, differences, writes)
            made_hands: dict[uuid.UUID, tuple[uuid.UUID, int]] = {}
            made_streams: dict[tuple[str, uuid.UUID, int], int | None] = {}
            for table_id in tables:
                row, its_hands, its_streams = table_rows(table_id, streams[table_id].events)
                made_hands.update({m: (table_id, n) for m, n in its_hands.items()})
                made_streams.update({(p, table_id, v): u for (p, v), u in its_streams.items()})
                found = table_rows_.get(table_id)
                _row("tables", "table_id", _TABLE, table_id, row, found, differences, writes)
            _hands(hands, made_hands, differences, writes)
            _player_streams(player_streams, made_streams, differences, writes)
            written = 0
            if write and writes:
                # Each written only if the service has not changed it since that moment
                # (a newer append is never undone); compared again by the next pass.
                with conn.transaction(), conn.cursor() as cur:
                    # A run of one statement in one round trip (executemany pipelines it).
                    for sql, run in groupby(writes, key=lambda w: w[0]):
                        cur.executemany(sql, [params for _, params in run])
                        written += max(cur.rowcount, 0)
            return differences, written

        return retried(self.pool, work)

    def _orphans(self, write: bool) -> tuple[list[str], int, list[str]]:
        """Rows of no stream (deleted, but for those a settlement or the lobby refers to),
        and the lobby's tickets against their seatings."""

        def work(conn: psycopg.Connection) -> tuple[list[str], int, list[str]]:
            differences: list[str] = []
            left: list[str] = []
            written = 0
            with conn.transaction():
                for kind, key, stream, kept in _ORPHANS:
                    where = (
                        f" WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.stream_id = r.{key}"
                        f" AND e.version = 1 AND e.type = '{stream}')"
                    )
                    select = f"SELECT DISTINCT {key} FROM {kind} r{where}"
                    rows = conn.execute(select).fetchall()
                    differences += [f"{kind} {r[0]}: no such stream" for r in rows]
                    if write and rows:
                        written += conn.execute(f"DELETE FROM {kind} r{where}{kept}").rowcount
                        left += [f"{kind} {r[0]}: no such stream" for r in conn.execute(select)]
                seated = conn.execute(
                    "SELECT t.ticket_id, t.status, t.table_id, s.table_id FROM lobby_tickets t"
                    " LEFT JOIN lobby_seatings s USING (ticket_id)"
                    " WHERE (s.ticket_id IS NULL) = (t.status = 'seated')"
                    " OR t.table_id IS DISTINCT FROM s.table_id"
                ).fetchall()
                differences += [
                    f"lobby_tickets {ticket}: {status} at {table}, its seating says "
                    + (f"seated at {seating}" if seating else "never seated")
                    for ticket, status, table, seating in seated
                ]
                if write and seated:
                    # Seated where a seating says; a ticket said seated with none was never
                    # seated, and no longer waits (its player asks again).
                    written += conn.execute(
                        "UPDATE lobby_tickets t SET status = CASE WHEN s.table_id IS NULL"
                        " THEN 'cancelled' ELSE 'seated' END, table_id = s.table_id, updated_at = now()"
                        " FROM (SELECT ticket_id, l.table_id FROM lobby_tickets"
                        " LEFT JOIN lobby_seatings l USING (ticket_id) WHERE ticket_id = ANY(%s)) s"
                        " WHERE s.ticket_id = t.ticket_id",
                        ([r[0] for r in seated],),
                    ).rowcount
            return differences, written, left

        return retried(self.pool, work)


#: A statement that writes a row, and its parameters.
_Write = tuple[str, Any]
_Rows = tuple[
    dict[uuid.UUID, dict[str, Any]],
    dict[uuid.UUID, dict[str, Any]],
    dict[uuid.UUID, tuple[uuid.UUID, int]],
    dict[tuple[str, uuid.UUID, int], int | None],
]


def _rows(conn: psycopg.Connection, matches: list[uuid.UUID], tables: list[uuid.UUID]) -> _Rows:
    """The read models' rows of these matches and tables: ``matches``, ``tables``, the
    tables' ``table_hands`` (and those of their hands, wherever they point) and their
    ``player_streams``."""
    match_rows = {
        r[0]: dict(zip(_MATCH.split(", "), r[1:], strict=True))
        for r in conn.execute(
            f"SELECT match_id, {_MATCH} FROM matches WHERE match_id = ANY(%s)", (matches,)
        )
    }
    table_rows_ = {
        r[0]: dict(zip(_TABLE.split(", "), r[1:], strict=True))
        for r in conn.execute(
            f"SELECT table_id, {_TABLE} FROM tables WHERE table_id = ANY(%s)", (tables,)
        )
    }
    hands = {
        r[0]: (r[1], r[2])
        for r in conn.execute(
            "SELECT match_id, table_id, number FROM table_hands WHERE table_id = ANY(%s)"
            " OR match_id IN (SELECT (payload->>'match_id')::uuid FROM events"
            " WHERE stream_id = ANY(%s) AND type = 'hand_started')",
            (tables, tables),
        )
    }
    player_streams = {
        (r[0], r[1], r[2]): r[3]
        for r in conn.execute(
            "SELECT player_id::text, stream_id, from_version, until_version"
            " FROM player_streams WHERE stream_id = ANY(%s)",
            (tables,),
        )
    }
    return match_rows, table_rows_, hands, player_streams


def _read(conn: psycopg.Connection, stream_ids: list[uuid.UUID]) -> dict[uuid.UUID, _Stream]:
    rows = conn.execute(
        "SELECT stream_id, xid::text::bigint, version, position, type, schema_version, payload,"
        " recorded_at FROM events WHERE stream_id = ANY(%s) ORDER BY stream_id, version",
        (stream_ids,),
    )
    streams: dict[uuid.UUID, _Stream] = {}
    for stream_id, xid, version, position, type_, schema, payload, recorded_at in rows:
        stream = streams.get(stream_id)
        if stream is None:
            stream = streams[stream_id] = _Stream(stream_id, [])
        event = Event.from_payload(type_, schema, payload)
        stream.events.append((xid, StoredEvent(version, position, event, recorded_at)))
    return streams


def _row(
    table: str,
    key: str,
    columns: str,
    row_id: uuid.UUID,
    made: dict[str, Any],
    found: dict[str, Any] | None,
    differences: list[str],
    writes: list[_Write],
) -> None:
    """Compares a stream's row of ``table`` (``matches`` or ``tables``) with the one its
    events make: if it differs, the difference and the write (unless an append has changed
    the row since: its version)."""
    if found == made:
        return
    differences.append(_differs(table, row_id, found, made))
    names = columns.split(", ")
    # Composed from this module's constants only; the values are parameters.
    writes.append(
        (
            f"INSERT INTO {table} ({key}, {columns}) VALUES (%(id)s, "
            + ", ".join(f"%({c})s" for c in names)
            + f") ON CONFLICT ({key}) DO UPDATE SET "
            + ", ".join(f"{c} = EXCLUDED.{c}" for c in names)
            + f" WHERE {table}.version IS NOT DISTINCT FROM %(seen)s",
            {
                **{c: Jsonb(v) if isinstance(v, dict | list) else v for c, v in made.items()},
                "id": row_id,
                "seen": None if found is None else found["version"],
            },
        )
    )


def _hands(
    found: dict[uuid.UUID, tuple[uuid.UUID, int]],
    made: dict[uuid.UUID, tuple[uuid.UUID, int]],
    differences: list[str],
    writes: list[_Write],
) -> None:
    """``table_hands``: rows are only ever added, so a wrong one is deleted and the right
    one added (a hand dealt meanwhile is added by its deal: nothing to do)."""
    for m, row in found.items():
        if made.get(m) != row:
            says = "none" if m not in made else f"hand {made[m][1]} of table {made[m][0]}"
            differences.append(
                f"table_hands {m}: hand {row[1]} of table {row[0]}, the events say {says}"
            )
            writes.append(
                (
                    "DELETE FROM table_hands WHERE match_id = %s AND table_id = %s AND number = %s",
                    (m, *row),
                )
            )
    for m, row in made.items():
        if found.get(m) != row:
            if m not in found:
                differences.append(f"table_hands {m}: missing")
            writes.append(
                (
                    "INSERT INTO table_hands (match_id, table_id, number) VALUES (%s, %s, %s)"
                    " ON CONFLICT DO NOTHING",
                    (m, *row),
                )
            )


def _player_streams(
    found: dict[tuple[str, uuid.UUID, int], int | None],
    made: dict[tuple[str, uuid.UUID, int], int | None],
    differences: list[str],
    writes: list[_Write],
) -> None:
    """``player_streams``: each row added, changed or deleted only if it is still as read."""
    for key in sorted(found.keys() | made.keys(), key=str):
        if key in found and key in made and found[key] == made[key]:
            continue
        player, stream, since = key
        what = f"player_streams {player} at {stream} from v{since}"
        if key not in made:
            differences.append(f"{what}: no such join")
            writes.append(
                (
                    "DELETE FROM player_streams WHERE player_id = %s AND stream_id = %s"
                    " AND from_version = %s AND until_version IS NOT DISTINCT FROM %s",
                    (player, stream, since, found[key]),
                )
            )
        elif key not in found:
            differences.append(f"{what}: missing")
            writes.append(
                (
                    "INSERT INTO player_streams (player_id, stream_id, from_version, until_version)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (player, stream, since, made[key]),
                )
            )
        else:
            differences.append(f"{what}: until {found[key]}, the events say {made[key]}")
            writes.append(
                (
                    "UPDATE player_streams SET until_version = %s WHERE player_id = %s"
                    " AND stream_id = %s AND from_version = %s"
                    " AND until_version IS NOT DISTINCT FROM %s",
                    (made[key], player, stream, since, found[key]),
                )
            )
