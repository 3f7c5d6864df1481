"""What the operators' console reads (docs/operations.md): matches searched, players'
figures, the house's takings by day, settlements for export, the audit trail searched.
Read-only queries of the read model, the ledger and the trail; none touches the events of
a match but for disconnects."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ..rules import SEATS
from .ledger import HOUSE
from .operators import TRAIL_FIELDS
from .pool import retried

#: The match list's columns it may be sorted by, and their SQL.
MATCH_SORTS = {
    "created": "m.created_at",
    "house": "(s.result->'settlement'->>'house')::numeric",
}


@dataclass(frozen=True)
class MatchQuery:
    #: A match's, a table's or a player's id, or part of a player's name (any case).
    player: str | None = None
    status: str | None = None
    ruleset: str | None = None
    #: Created on or after this day, and on or before ``until`` (UTC).
    since: dt.date | None = None
    until: dt.date | None = None
    #: One of :data:`MATCH_SORTS`; newest (or highest) first unless not ``descending``.
    sort: str = "created"
    descending: bool = True


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _containing(text: str) -> str:
    """An ILIKE pattern of any text holding ``text`` (its own ``%`` and ``_`` as such)."""
    escaped = text.strip().replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_")
    return f"%{escaped}%"


def _days(column: str, since: dt.date | None, until: dt.date | None) -> tuple[list[str], list[Any]]:
    """The conditions that ``column`` falls on ``since`` or after, ``until`` or before (UTC)."""
    where: list[str] = []
    params: list[Any] = []
    if since:
        where.append(f"{column} >= %s::date AT TIME ZONE 'UTC'")
        params.append(since)
    if until:
        where.append(f"{column} < (%s::date + 1) AT TIME ZONE 'UTC'")
        params.append(until)
    return where, params


def _page(
    pool: ConnectionPool,
    select: str,
    table: str,
    where: list[str],
    params: list[Any],
    order: str,
    page: int,
    per_page: int,
    counted: str | None = None,
) -> tuple[list[tuple[Any, ...]], int]:
    """One page of ``select`` from ``table`` under the conditions, in ``order``, and how
    many rows the conditions find (counted in ``counted`` when given: the table alone,
    when what ``table`` joins to it neither adds rows nor takes part in the conditions)."""
    condition = (" WHERE " + " AND ".join(where)) if where else ""

    def read(conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], int]:
        with conn.transaction():
            total = conn.execute(
                f"SELECT count(*) FROM {counted or table}{condition}", params
            ).fetchone()
            rows = conn.execute(
                f"SELECT {select} FROM {table}{condition} ORDER BY {order} LIMIT %s OFFSET %s",
                [*params, per_page, (page - 1) * per_page],
            ).fetchall()
        return rows, (total[0] if total else 0)

    return retried(pool, read)


#: The players whose names a search by name looks for in the seats, at most.
NAMED_AT_MOST = 200
#: Up to this many players named, their matches are found by the seats' index.
BY_INDEX_AT_MOST = 5


def _finding(pool: ConnectionPool, text: str, params: list[Any]) -> str:
    """The condition that a match is the one ``text`` names, one of the table's it names,
    or one where the player it names (by id, or by part of their name) has a seat; its
    values added to ``params``. Each seat's player is found by the seats' index."""
    ident = _uuid(text.strip())
    if ident is not None:
        params += [ident, ident, Jsonb([{"player": str(ident)}])]
        return (
            "(m.match_id = %s OR m.match_id IN (SELECT match_id FROM table_hands"
            " WHERE table_id = %s) OR m.seats @> %s)"
        )
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT player_id FROM players WHERE name ILIKE %s ORDER BY player_id LIMIT %s",
            (_containing(text), NAMED_AT_MOST),
        ).fetchall(),
    )
    if not rows:
        return "false"
    if len(rows) > BY_INDEX_AT_MOST:
        # Many players: one pass over the matches beats as many index scans, each seat's
        # player looked up in the names' ids (a hash, for PostgreSQL, past 8 of them): at
        # 100,000 matches and 111 players, about 50 ms for the count and as much for the
        # page, against 300 ms each when each match's seats were a set to search; one
        # player takes 11 ms by the index.
        ids = [str(row[0]) for row in rows]
        params += [ids] * SEATS
        return (
            "("
            + " OR ".join(f"m.seats->{seat}->>'player' = ANY(%s)" for seat in range(SEATS))
            + ")"
        )
    params += [Jsonb([{"player": str(row[0])}]) for row in rows]
    return "(" + " OR ".join(["m.seats @> %s"] * len(rows)) + ")"


def matches(
    pool: ConnectionPool, query: MatchQuery, page: int, per_page: int
) -> tuple[list[dict[str, Any]], int]:
    """One page of the matches the query finds, newest first, and how many it finds."""
    where, params = _days("m.created_at", query.since, query.until)
    if query.player:
        where.append(_finding(pool, query.player, params))
    for column, value in (("status", query.status), ("ruleset", query.ruleset)):
        if value:
            where.append(f"m.{column} = %s")
            params.append(value)
    rows, total = _page(
        pool,
        "m.match_id, m.ruleset, m.status, m.phase, m.version, m.seats, m.settled,"
        " m.created_at, m.updated_at, s.result->>'winner', (s.result->>'landlord')::int,"
        " (s.result->'settlement'->>'house')::numeric,"
        " s.result->'settlement'->'gross' <> s.result->'settlement'->'after_cap',"
        " s.result->'first_disconnect' <> 'null'::jsonb, s.result->'settlement'->'net'",
        "matches m LEFT JOIN settlements s ON s.match_id = m.match_id",
        where,
        params,
        f"{MATCH_SORTS[query.sort]} {'DESC' if query.descending else 'ASC'} NULLS LAST, m.match_id",
        page,
        per_page,
        # A match has one settlement at most, and no condition reads it.
        counted="matches m",
    )
    keys = (
        "match_id",
        "ruleset",
        "status",
        "phase",
        "version",
        "seats",
        "settled",
        "created_at",
        "updated_at",
        "winner",
        "landlord",
        "house",
        "capped",
        "penalty",
        "net",
    )
    found = [dict(zip(keys, row)) for row in rows]
    names = player_names(
        pool, {s["player"] for m in found for s in m["seats"] if s and s["player"]}
    )
    for match in found:
        match["seats"] = [seat_label(seat, names) for seat in match["seats"]]
    return found, total


def playing_seats(pool: ConnectionPool, player_id: uuid.UUID) -> list[tuple[uuid.UUID, int]]:
    """The matches under way where the player has a seat: (match, seat)."""
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT m.match_id, (s.ord - 1)::int FROM matches m,"
            " jsonb_array_elements(m.seats) WITH ORDINALITY AS s (value, ord)"
            " WHERE m.status = 'playing' AND m.seats @> %s AND s.value->>'player' = %s",
            (Jsonb([{"player": str(player_id)}]), str(player_id)),
        ).fetchall(),
    )
    return [(match_id, seat) for match_id, seat in rows]


#: The hands a player page lists (the newest).
PLAYER_HANDS = 50


def player(pool: ConnectionPool, player_id: uuid.UUID) -> dict[str, Any] | None:
    """What the player page shows of a player: profile, standing, the owner of a bot
    account and a person's bot accounts, the tables where they sit now, and their newest
    hands (each with the seat, the status, the player's net in it and its table, if a
    table dealt it)."""

    def read(conn: psycopg.Connection) -> dict[str, Any] | None:
        with conn.transaction():
            row = conn.execute(
                "SELECT p.player_id, p.name, p.bot_account, p.created_at, p.standing,"
                " p.owner_id, o.name FROM players p"
                " LEFT JOIN players o ON o.player_id = p.owner_id WHERE p.player_id = %s",
                (player_id,),
            ).fetchone()
            if row is None:
                return None
            bots = conn.execute(
                "SELECT player_id, name FROM players WHERE owner_id = %s ORDER BY created_at",
                (player_id,),
            ).fetchall()
            seated = Jsonb([{"player": str(player_id)}])
            hands = conn.execute(
                "SELECT m.match_id, m.created_at, m.status, m.ruleset, (s.ord - 1)::int,"
                " (SELECT sum(amount) FROM ledger_entries e"
                "  WHERE e.match_id = m.match_id AND e.account = %s), h.table_id"
                " FROM matches m CROSS JOIN LATERAL jsonb_array_elements(m.seats)"
                "  WITH ORDINALITY AS s (value, ord)"
                " LEFT JOIN table_hands h ON h.match_id = m.match_id"
                " WHERE m.seats @> %s AND s.value->>'player' = %s"
                " ORDER BY m.created_at DESC LIMIT %s",
                (f"player:{player_id}", seated, str(player_id), PLAYER_HANDS),
            ).fetchall()
            tables = conn.execute(
                "SELECT table_id, private, hands, match_id, created_at FROM tables"
                " WHERE seats @> %s ORDER BY created_at DESC",
                (seated,),
            ).fetchall()
        keys: tuple[str, ...] = ("player_id", "name", "bot_account", "created_at", "standing")
        keys += ("owner_id", "owner_name")
        hand_keys = ("match_id", "created_at", "status", "ruleset", "seat", "net", "table_id")
        table_keys = ("table_id", "private", "hands", "match_id", "created_at")
        return {
            **dict(zip(keys, row)),
            "bots": [{"player_id": b, "name": name} for b, name in bots],
            "hands": [dict(zip(hand_keys, h)) for h in hands],
            "tables": [dict(zip(table_keys, t)) for t in tables],
        }

    return retried(pool, read)


def player_names(pool: ConnectionPool, player_ids: set[str]) -> dict[str, tuple[str, bool]]:
    """Each player's name and whether it is a bot account (an author's program)."""
    if not player_ids:
        return {}
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT player_id::text, name, bot_account FROM players"
            " WHERE player_id = ANY(%s::uuid[])",
            (list(player_ids),),
        ).fetchall(),
    )
    return {player_id: (name, bot_account) for player_id, name, bot_account in rows}


#: How the console calls a seat that nobody took, and one the system's bots play.
EMPTY, SYSTEM_BOT = "empty", "system bot"
#: What follows a bot account's name in its seat's label.
BOT_ACCOUNT_MARK = " (bot account)"


def seat_label(seat: dict[str, Any] | None, names: dict[str, tuple[str, bool]]) -> str:
    """How the console names a seat: its player's name (marked when a bot account),
    "system bot", or "empty"."""
    if seat is None:
        return EMPTY
    player: str | None = seat.get("player")
    if player is None:
        return SYSTEM_BOT
    name, bot_account = names.get(player, (player, False))
    return f"{name}{BOT_ACCOUNT_MARK}" if bot_account else name


def entries(pool: ConnectionPool, match_id: uuid.UUID) -> list[dict[str, Any]]:
    """The match's ledger entries, movement by movement."""
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT movement, account, seat, kind, amount FROM ledger_entries"
            " WHERE match_id = %s ORDER BY movement, entry_id",
            (match_id,),
        ).fetchall(),
    )
    keys = ("movement", "account", "seat", "kind", "amount")
    return [dict(zip(keys, row)) for row in rows]


def house_by_day(pool: ConnectionPool, days: int, today: dt.date) -> list[dict[str, Any]]:
    """The house's takings (system cut and penalties) on each of the ``days`` days up to
    ``today`` (UTC), oldest first, days without any included."""
    first = today - dt.timedelta(days=days - 1)
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT (created_at AT TIME ZONE 'UTC')::date, kind, sum(amount) FROM ledger_entries"
            " WHERE account = %s AND created_at >= %s::date AT TIME ZONE 'UTC'"
            " GROUP BY 1, 2",
            (HOUSE, first),
        ).fetchall(),
    )
    taken = {(day, kind): amount for day, kind, amount in rows}
    return [
        {
            "day": day,
            "rake": taken.get((day, "rake"), Decimal(0)),
            "penalty": taken.get((day, "penalty"), Decimal(0)),
        }
        for day in (first + dt.timedelta(days=n) for n in range(days))
    ]


#: The settlements a streamed export reads from the database at a time.
EXPORT_BATCH = 500


def settlements(
    pool: ConnectionPool, since: dt.date, until: dt.date
) -> Generator[dict[str, Any], None, None]:
    """Each seat of each settlement made from ``since`` to ``until`` (UTC days, both
    included), oldest first, a row per seat: the match's ruleset and table, the result,
    the seat's player (id, name, bot account or not) and whether the system took the seat
    over (系统代打). Read as they are wanted, a batch at a time through a server-side
    cursor (a month of a busy service is never held in memory); a connection of the pool
    is held until the last is read or the iterator is closed."""
    with (
        pool.connection() as conn,
        conn.transaction(),
        conn.cursor(name="settlements_export") as cursor,
    ):
        cursor.itersize = EXPORT_BATCH
        cursor.execute(
            "SELECT s.match_id, s.settled_at, m.ruleset, created.payload->'table', s.result,"
            " (seat.ord - 1)::int, seat.value->>'player', p.name, coalesce(p.bot_account, false),"
            " EXISTS (SELECT 1 FROM events d WHERE d.stream_id = s.match_id"
            "  AND d.type = 'disconnect' AND (d.payload->>'seat')::int = seat.ord - 1)"
            " FROM settlements s JOIN matches m USING (match_id)"
            " JOIN events created ON created.stream_id = s.match_id AND created.version = 1"
            " CROSS JOIN LATERAL jsonb_array_elements(m.seats) WITH ORDINALITY AS seat (value, ord)"
            " LEFT JOIN players p ON p.player_id = (seat.value->>'player')::uuid"
            " WHERE s.settled_at >= %s::date AT TIME ZONE 'UTC'"
            " AND s.settled_at < (%s::date + 1) AT TIME ZONE 'UTC'"
            " ORDER BY s.settled_at, s.match_id, seat.ord",
            (since, until),
        )
        keys = (
            "match_id",
            "settled_at",
            "ruleset",
            "table",
            "result",
            "seat",
            "player_id",
            "name",
            "bot_account",
            "taken_over",
        )
        for row in cursor:
            yield dict(zip(keys, row))


#: The players table's columns that it may be sorted by, and their SQL.
PLAYER_SORTS = {
    "name": "name",
    "balance": "balance",
    "hands": "hands",
    "disconnects": "disconnects",
    "rate": "rate",
}


def players(
    pool: ConnectionPool,
    sort: str,
    descending: bool,
    page: int,
    per_page: int,
    bot_account: bool | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Each player's balance, ended hands, the hands they disconnected from (left or
    missed a deadline) and the share of hands that is, and whether it is a bot account;
    one page, sorted. ``bot_account``: only bot accounts (true), only people (false)."""
    order = f"{PLAYER_SORTS[sort]} {'DESC' if descending else 'ASC'} NULLS LAST, player_id"
    sql = f"""
        WITH seated AS (
            SELECT m.match_id, (s.ord - 1)::int AS seat, (s.value->>'player')::uuid AS player_id
            FROM matches m, jsonb_array_elements(m.seats) WITH ORDINALITY AS s(value, ord)
            WHERE m.status = 'ended' AND s.value->>'player' IS NOT NULL
        ),
        dropped AS (
            SELECT DISTINCT stream_id AS match_id, (payload->>'seat')::int AS seat
            FROM events WHERE type = 'disconnect'
        ),
        figures AS (
            SELECT p.player_id, p.name, p.bot_account,
                coalesce((SELECT sum(amount) FROM ledger_entries
                          WHERE account = 'player:' || p.player_id), 0) AS balance,
                count(s.match_id) AS hands,
                count(d.match_id) AS disconnects
            FROM players p
            LEFT JOIN seated s ON s.player_id = p.player_id
            LEFT JOIN dropped d ON d.match_id = s.match_id AND d.seat = s.seat
            WHERE %(kind)s::boolean IS NULL OR p.bot_account = %(kind)s
            GROUP BY p.player_id, p.name, p.bot_account
        )
        SELECT player_id, name, bot_account, balance, hands, disconnects,
            disconnects::numeric / nullif(hands, 0) AS rate, count(*) OVER () AS total
        FROM figures ORDER BY {order} LIMIT %(limit)s OFFSET %(offset)s
    """
    values = {"kind": bot_account, "limit": per_page, "offset": (page - 1) * per_page}
    rows = retried(pool, lambda conn: conn.execute(sql, values).fetchall())
    keys = ("player_id", "name", "bot_account", "balance", "hands", "disconnects", "rate")
    return [dict(zip(keys, row[:7])) for row in rows], (rows[0][7] if rows else 0)


@dataclass(frozen=True)
class AuditQuery:
    #: Part of who acted (an operator's name, or ``cli:`` and a system user), any case.
    operator: str | None = None
    #: One of service.store.operators.ACTIONS, and one of its VIAS.
    action: str | None = None
    via: str | None = None
    #: Part of what it was done to (a match's id, an operator, the days exported) or of
    #: the address it came from.
    about: str | None = None
    #: On or after this day, and on or before ``until`` (UTC).
    since: dt.date | None = None
    until: dt.date | None = None


def audit_trail(
    pool: ConnectionPool, query: AuditQuery, page: int, per_page: int
) -> tuple[list[dict[str, Any]], int]:
    """One page of the audit trail's entries the query finds, newest first, and how many
    it finds."""
    where, params = _days("at", query.since, query.until)
    if query.operator:
        where.append("operator ILIKE %s")
        params.append(_containing(query.operator))
    for column, value in (("action", query.action), ("via", query.via)):
        if value:
            where.append(f"{column} = %s")
            params.append(value)
    if query.about:
        where.append("(match_id::text ILIKE %s OR subject ILIKE %s OR address ILIKE %s)")
        params += [_containing(query.about)] * 3
    rows, total = _page(
        pool, ", ".join(TRAIL_FIELDS), "audit_trail", where, params, "audit_id DESC", page, per_page
    )
    return [dict(zip(TRAIL_FIELDS, row)) for row in rows], total
