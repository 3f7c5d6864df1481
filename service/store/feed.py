"""The events that concern one player, across its tables and matches, in one order that no
later commit can cut into: by the appending transaction's id (``events.xid``), and only
once no older transaction is running (``pg_snapshot_xmin``), then by position. Whatever
commits later has a transaction id at or above that horizon, so a reader that went past an
event never finds an earlier one appear behind it."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ..game import Event
from .events import Recent, StoredEvent
from .pool import retried


class FeedEvent(NamedTuple):
    """An event as the feed reads it (a tuple: a read makes one of each row, and a frozen
    dataclass took several times as long to make)."""

    xid: int
    stream_id: uuid.UUID
    stored: StoredEvent
    #: The last event its command appended (the state after it is one a seat sees).
    last_of_command: bool
    #: A table's stream (else a match's).
    of_table: bool
    #: The table whose hand the match is, if any, and which of its hands.
    table_id: uuid.UUID | None
    hand_number: int | None
    #: The player's lobby ticket seated at this table, if any.
    ticket_id: uuid.UUID | None


_HORIZON = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
#: What every read of the feed takes of an event, and the joins it needs.
_EVENT = (
    "SELECT e.xid::text::bigint AS xid, e.stream_id, e.version, e.position, e.type,"
    " e.schema_version,"
    " e.payload, e.recorded_at,"
    " (e.command_id IS NULL OR n.version IS NULL OR n.command_id IS DISTINCT FROM e.command_id),"
    " th.table_id, th.number"
)


def _with_horizon(read: str) -> str:
    """The statement ``read`` (which reads below ``h.horizon``) in one with the horizon and
    whether events at or above it follow the cursor (committed, but held back behind an
    older transaction still running): each row starts with both, and a read that finds no
    event gives one row of them alone. ``until``: a lower horizon, if any. The horizon is
    the statement's own snapshot's: every transaction below it had ended when that
    snapshot was taken, so the read sees all their events. The check for held events
    asks for the first in the index's order: as an ``EXISTS``, a generic plan of the
    prepared statement scanned the whole table for it."""
    return (
        "WITH h AS MATERIALIZED (SELECT horizon, (SELECT true FROM events WHERE xid >= horizon"
        " AND (xid, position) > (%(xid)s::text::xid8, %(position)s) ORDER BY xid, position"
        " LIMIT 1) IS NOT NULL AS held"
        " FROM (SELECT least(pg_snapshot_xmin(pg_current_snapshot()), %(until)s::text::xid8)"
        " AS horizon) x) SELECT h.horizon::text::bigint, h.held, f.*"
        f" FROM h LEFT JOIN LATERAL ({read}) f ON true ORDER BY f.xid, f.position"
    )


#: Each joined row is found by its key, one index probe per event read. As plain joins,
#: the planner hashed the whole of ``matches`` and ``table_hands`` at every read (a seq
#: scan of each, at every notification in every process): cheap while they are small, it
#: grew with the history (docs/scaling.md, "Nothing slows with history"). A ``LIMIT`` in a
#: lateral subquery keeps the planner from turning it back into such a join.
def _joined(source: str) -> str:
    """``source`` (rows of ``events``) as ``e``, each with the event that follows it in
    its stream and the table's hand that its match is."""
    return (
        f" FROM {source} e"
        " LEFT JOIN LATERAL (SELECT n.version, n.command_id FROM events n"
        " WHERE n.stream_id = e.stream_id AND n.version = e.version + 1 LIMIT 1) n ON true"
        " LEFT JOIN LATERAL (SELECT th.table_id, th.number FROM table_hands th"
        " WHERE th.match_id = e.stream_id LIMIT 1) th ON true"
    )


_RANGE = " WHERE (e.xid, e.position) >= (%(xid)s::text::xid8, %(position)s) AND e.xid < h.horizon"


def _chosen(of_table: str, joins: str, kept: str) -> str:
    """The first ``limit`` events of the range that ``kept`` keeps, with ``of_table``,
    for :func:`_joined`. A reader of one player or one table scans every event of the
    range, most of them other tables': the events are chosen first, and only the chosen
    ones probed for what :func:`_joined` adds (joined first, every event of the range
    was probed; docs/scaling.md, "What PostgreSQL's statements cost")."""
    return (
        "(SELECT e.xid, e.stream_id, e.version, e.position, e.type, e.schema_version,"
        f" e.payload, e.recorded_at, e.command_id, {of_table} AS of_table FROM events e"
        f"{joins}{_RANGE} AND ({kept}) ORDER BY e.xid, e.position LIMIT %(limit)s)"
    )


#: One player's events: those of its tables while it sat there (its streams), and those
#: of the matches where it has a seat.
_READ = _with_horizon(
    _EVENT
    + ", e.of_table, lt.ticket_id"
    + _joined(
        _chosen(
            "ps.stream_id IS NOT NULL",
            " LEFT JOIN LATERAL (SELECT s.stream_id FROM player_streams s"
            " WHERE s.player_id = %(player)s AND s.stream_id = e.stream_id"
            " AND e.version >= s.from_version"
            " AND (s.until_version IS NULL OR e.version <= s.until_version) LIMIT 1) ps ON true",
            "ps.stream_id IS NOT NULL OR (SELECT m.seats @> %(seat)s FROM matches m"
            " WHERE m.match_id = e.stream_id LIMIT 1)",
        )
    )
    + " LEFT JOIN LATERAL (SELECT t.ticket_id FROM lobby_tickets t WHERE e.type = 'player_joined'"
    " AND t.table_id = e.stream_id AND t.player_id = %(player)s LIMIT 1) lt ON true"
)
#: Every event, with the players it concerns: those seated at its match (the match's
#: seats), or at its table when it was appended (the player's streams), and the lobby
#: ticket of a joining player.
_READ_ALL = _with_horizon(
    _EVENT + ", m.match_id IS NULL, lt.ticket_id, m.seats,"
    " array(SELECT s.player_id::text FROM player_streams s WHERE s.stream_id = e.stream_id"
    " AND e.version >= s.from_version"
    " AND (s.until_version IS NULL OR e.version <= s.until_version))"
    + _joined("events")
    + " LEFT JOIN LATERAL (SELECT m.match_id, m.seats FROM matches m"
    " WHERE m.match_id = e.stream_id LIMIT 1) m ON true"
    " LEFT JOIN LATERAL (SELECT t.ticket_id FROM lobby_tickets t WHERE e.type = 'player_joined'"
    " AND t.table_id = e.stream_id AND t.player_id::text = e.payload->>'player' LIMIT 1) lt"
    " ON true" + _RANGE + " ORDER BY e.xid, e.position"
)


#: A table's events and its hands', as its watchers follow them (no player's: no ticket).
_READ_TABLE = _with_horizon(
    _EVENT
    + ", e.of_table, NULL::uuid"
    + _joined(
        _chosen(
            "e.stream_id = %(table)s",
            "",
            "e.stream_id IN (SELECT %(table)s::uuid"
            " UNION ALL SELECT match_id FROM table_hands WHERE table_id = %(table)s)",
        )
    )
)


#: Events kept decoded by a process's reads of the feed.
DECODED = 4096


class Feed:
    def __init__(self, pool: ConnectionPool):
        self.pool = pool
        #: (stream, version) -> the event stored there, decoded: a match's events are read
        #: by each of its seats' readers, and decoding them was a twentieth of a read's CPU.
        self._decoded: Recent[tuple[uuid.UUID, int], Event] = Recent(DECODED)

    def horizon(self) -> int:
        """The transaction id below which every transaction has ended: a reader starting
        there gets everything that commits from now on."""
        return retried(self.pool, _horizon)

    def next_xid(self) -> int:
        """The transaction id the next transaction to write will get, at the earliest: no
        event has one above it yet."""
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
            ).fetchone(),
        )
        assert row is not None
        return int(row[0])

    def first(self, player: str) -> tuple[int, int] | None:
        """Where the player's events start: (xid, position) of its first, if any (read by
        its streams, not by scanning every event before it)."""
        return retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT xid::text::bigint, position FROM events WHERE stream_id IN ("
                " SELECT stream_id FROM player_streams WHERE player_id = %s"
                " UNION SELECT match_id FROM matches WHERE seats @> %s)"
                " ORDER BY xid, position LIMIT 1",
                (player, Jsonb([{"player": player}])),
            ).fetchone(),
        )

    def streams(self, player: str) -> list[uuid.UUID]:
        """The streams whose next events may concern the player: the tables where it is
        seated and its matches not yet settled (what a waiting reader watches)."""
        return retried(
            self.pool,
            lambda conn: [
                row[0]
                for row in conn.execute(
                    "SELECT stream_id FROM player_streams WHERE player_id = %s AND until_version IS NULL"
                    " UNION SELECT match_id FROM matches WHERE seats @> %s AND NOT settled",
                    (player, Jsonb([{"player": player}])),
                )
            ],
        )

    def read(
        self, player: str, xid: int, position: int, limit: int, until: int | None = None
    ) -> tuple[list[FeedEvent], bool, int]:
        """The player's events from (xid, position) on, below the horizon; whether events
        committed after it are still held back behind an older running transaction (the
        caller then reads again shortly); and that horizon. Unless ``limit`` events came,
        every event of the player below the horizon has been read: the next read may start
        there (an idle player's reads then cover only what was appended since the last).
        ``until``: an earlier horizon to stop at (a stream catching up to where the
        process's reader of every event started, :class:`service.app.feed.FeedReader`)."""
        params = {
            "player": player,
            "xid": str(xid),
            "position": position,
            "seat": Jsonb([{"player": player}]),
            "limit": limit,
        }
        rows, held, horizon = self._below_horizon(_READ, params, until)
        return [self._feed_event(row) for row in rows], held, horizon

    def read_table(
        self, table_id: uuid.UUID, xid: int, position: int, limit: int
    ) -> tuple[list[FeedEvent], bool, int]:
        """As :meth:`read`, the events of a table and of its hands' matches."""
        params = {"table": table_id, "xid": str(xid), "position": position, "limit": limit}
        rows, held, horizon = self._below_horizon(_READ_TABLE, params, None)
        return [self._feed_event(row) for row in rows], held, horizon

    def table_start(self, table_id: uuid.UUID) -> int | None:
        """Where a watcher of the table starts: the transaction of its latest hand's start
        (which also created and dealt its match), or of its first event."""
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT xid::text::bigint FROM events WHERE stream_id = %s"
                " ORDER BY type = 'hand_started' DESC,"
                " CASE WHEN type = 'hand_started' THEN -version ELSE version END LIMIT 1",
                (table_id,),
            ).fetchone(),
        )
        return None if row is None else int(row[0])

    def read_all(
        self, xid: int, position: int
    ) -> tuple[list[tuple[FeedEvent, frozenset[str]]], bool, int]:
        """As :meth:`read`, every event, each with the players it concerns (for
        ``ticket_id``, the joining player's ticket), and all of them below the horizon."""
        params = {"xid": str(xid), "position": position}
        rows, held, horizon = self._below_horizon(_READ_ALL, params, None)
        found = []
        for row in rows:
            seated = {s["player"] for s in row[13] or () if s and s.get("player")}
            found.append((self._feed_event(row), frozenset(seated.union(row[14]))))
        return found, held, horizon

    def _below_horizon(
        self, sql: str, params: dict[str, Any], until: int | None
    ) -> tuple[list[tuple[Any, ...]], bool, int]:
        """The rows of ``sql`` (:func:`_with_horizon`) past their first two columns,
        whether events are held back, and the horizon: one statement, one round trip."""
        values = {**params, "until": None if until is None else str(until)}

        def read(conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], bool, int]:
            rows = conn.execute(sql, values).fetchall()
            horizon, held = rows[0][0], rows[0][1]
            # Without events, the one row is the horizon's with nothing joined.
            found = [row[2:] for row in rows] if rows[0][2] is not None else []
            return found, held, horizon

        return retried(self.pool, read)

    def _feed_event(self, row: tuple[Any, ...]) -> FeedEvent:
        key = (row[1], row[2])
        event = self._decoded.get(key)
        if event is None:
            event = Event.from_payload(row[4], row[5], row[6])
            self._decoded.put(key, event)
        return FeedEvent(
            row[0],
            row[1],
            StoredEvent(row[2], row[3], event, row[7]),
            row[8],
            row[11],
            row[9],
            row[10],
            row[12],
        )


def _horizon(conn: psycopg.Connection) -> int:
    row = conn.execute(_HORIZON).fetchone()
    assert row is not None
    return int(row[0])
