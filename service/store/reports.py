"""What the operators' console reads (docs/operations.md): matches searched, players'
figures, the house's takings by day, settlements for export, the audit trail searched.
Read-only queries of the read model, the ledger and the trail; none touches the events of
a match but for disconnects."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ..rules import SEATS
from .ledger import HOUSE
from .operators import TRAIL_FIELDS
from .pool import retried


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


#: Up to this many rows a list's count is exact; past it, it is the planner's estimate
#: (counting every row of a long history at each page is what made its pages slow).
COUNTED_AT_MOST = 10_000


class BadKey(ValueError):
    """A page's key that this list did not give (edited, or of another sort)."""


@dataclass(frozen=True)
class At:
    """Where a page of a list starts: after the row of a key the list gave (the next
    page), before one (the previous page), or, with neither, at a position: ``page``, as
    the page numbers of links from before the lists were read by key."""

    after: str | None = None
    before: str | None = None
    page: int = 1


@dataclass(frozen=True)
class Page:
    """A page of a list, the keys of the pages on either side (None at an end) and how
    many rows the list holds: ``counted`` says how that was found, ``exact``, ``about``
    (the planner's estimate, past :data:`COUNTED_AT_MOST`), ``more`` (more than
    ``total``, where the estimate says fewer) or ``least`` (at least ``total``: those of
    some of the players a search names)."""

    rows: list[dict[str, Any]]
    total: int
    counted: str
    after: str | None
    before: str | None


@dataclass(frozen=True)
class _Part:
    """A run of a list's rows: those that meet ``condition``, in the order of ``key``
    (SQL expressions, the last one unique; each never NULL in the run), whose values a
    page's key gives as ``types`` (SQL types). A list is its parts one after another.
    ``alone`` is the table of the list's that holds the key and the condition: an old
    link's page number is found by skipping keys there (its index alone) when the list
    has no conditions of its own."""

    condition: str
    key: tuple[str, ...]
    types: tuple[str, ...]
    alone: str


#: The SQL types a page's key may hold, and how its text is read back.
_KEY_TYPES: dict[str, Callable[[str], Any]] = {
    "timestamptz": dt.datetime.fromisoformat,
    "numeric": Decimal,
    "uuid": uuid.UUID,
    "integer": int,
    "bigint": int,
    "text": str,
}


def _key_text(part: int, values: Sequence[Any]) -> str:
    """The key of a row of part ``part``: its values as text, in URL-safe base64."""
    shown = [v.isoformat() if isinstance(v, dt.datetime) else str(v) for v in values]
    raw = json.dumps([part, *shown], ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _key_values(text: str, parts: Sequence[_Part]) -> tuple[int, list[Any]]:
    """The part and the values of a key :func:`_key_text` made; :class:`BadKey` if it is
    none of this list's."""
    try:
        part, *values = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        types = parts[part].types
        if not isinstance(part, int) or part < 0 or len(values) != len(types):
            raise BadKey(text)
        read = [_KEY_TYPES[t](v) for t, v in zip(types, values, strict=True)]
    except (ValueError, TypeError, IndexError, ArithmeticError) as exc:
        raise BadKey(text) from exc
    for t, v in zip(types, read, strict=True):
        if (t == "timestamptz" and v.tzinfo is None) or (t == "numeric" and not v.is_finite()):
            raise BadKey(text)
        if (t == "integer" and abs(v) >= 2**31) or (t == "bigint" and abs(v) >= 2**63):
            raise BadKey(text)
        if isinstance(v, str) and "\x00" in v:
            raise BadKey(text)
    return part, read


def _order(part: _Part, descending: bool) -> str:
    direction = " DESC" if descending else " ASC"
    return ", ".join(column + direction for column in part.key)


@dataclass(frozen=True)
class _Listing:
    """A list: ``select`` from ``table`` under the conditions, its parts in order, each
    part's key highest first when ``descending``; counted in ``counted`` (the table
    alone, when what ``table`` joins to it neither adds rows nor takes part in the
    conditions)."""

    select: str
    table: str
    where: list[str]
    params: list[Any]
    parts: tuple[_Part, ...]
    descending: bool
    counted: str | None = None
    #: The conditions and their values to count by, when not the list's own: the same
    #: rows found another way, faster for counting them all; or, when its last item is
    #: true, some of them (the count is then a least).
    counting: tuple[list[str], list[Any], bool] | None = None

    def run(
        self,
        conn: psycopg.Connection,
        part: int,
        values: list[Any] | None,
        forward: bool,
        limit: int,
    ) -> list[tuple[tuple[Any, ...], int, tuple[Any, ...]]]:
        """Up to ``limit`` rows from the key (``part``, ``values``; from the start of
        ``part`` when None), not including it, in the list's order (``forward``) or
        against it: each (row, its part, its key)."""
        found: list[tuple[tuple[Any, ...], int, tuple[Any, ...]]] = []
        order = range(part, len(self.parts)) if forward else range(part, -1, -1)
        for index in order:
            run = self.parts[index]
            where, params = [*self.where, run.condition], list(self.params)
            down = self.descending == forward
            if values is not None and index == part:
                cast = ", ".join(f"%s::{t}" for t in run.types)
                where.append(f"({', '.join(run.key)}) {'<' if down else '>'} ({cast})")
                params += values
            rows = conn.execute(
                f"SELECT {self.select}, {', '.join(run.key)} FROM {self.table}"
                f" WHERE {' AND '.join(where)} ORDER BY {_order(run, down)} LIMIT %s",
                [*params, limit - len(found)],
            ).fetchall()
            width = len(run.key)
            found += [(row[:-width], index, row[-width:]) for row in rows]
            if len(found) >= limit:
                break
            values = None
        return found

    def skip(self, conn: psycopg.Connection, rows: int) -> tuple[int, list[Any]] | None:
        """The key of the row at position ``rows`` from the start (1 is the first), read
        by skipping keys; None past the end."""
        for index, run in enumerate(self.parts):
            where = " AND ".join([*self.where, run.condition])
            table = self.table if self.where else run.alone
            row = conn.execute(
                f"SELECT {', '.join(run.key)} FROM {table} WHERE {where}"
                f" ORDER BY {_order(run, self.descending)} OFFSET %s LIMIT 1",
                [*self.params, rows - 1],
            ).fetchone()
            if row is not None:
                return index, list(row)
            counted = conn.execute(
                f"SELECT count(*) FROM {table} WHERE {where}", self.params
            ).fetchone()
            rows -= counted[0] if counted else 0
        return None

    def count(self, conn: psycopg.Connection) -> tuple[int, str]:
        """How many rows the list holds, and how that was found (:class:`Page`)."""
        conditions, params, some = self.counting or (self.where, self.params, False)
        where = " WHERE " + " AND ".join(conditions) if conditions else ""
        table = self.counted or self.table
        row = conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {table}{where} LIMIT %s) AS rows",
            [*params, COUNTED_AT_MOST + 1],
        ).fetchone()
        exact = row[0] if row else 0
        if some:
            return min(exact, COUNTED_AT_MOST), "least"
        if exact <= COUNTED_AT_MOST:
            return exact, "exact"
        plan = conn.execute(
            f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {table}{where}", params
        ).fetchone()
        estimate = int(plan[0][0]["Plan"]["Plan Rows"]) if plan else 0
        if estimate > COUNTED_AT_MOST:
            return estimate, "about"
        return COUNTED_AT_MOST, "more"


def _page(
    pool: ConnectionPool, listing: _Listing, at: At, per_page: int
) -> tuple[list[tuple[Any, ...]], Page]:
    """The page of ``listing`` at ``at``: its rows (as selected; :attr:`Page.rows` is
    left to the caller to fill) and the page's keys and count."""
    start: tuple[int, list[Any]] | None = None
    forward = at.before is None
    if at.after is not None or at.before is not None:
        start = _key_values(at.after or at.before or "", listing.parts)

    def read(conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], Page]:
        nonlocal start
        with conn.transaction():
            if start is None and at.page > 1:
                start = listing.skip(conn, (at.page - 1) * per_page)
                if start is None:  # past the end: an empty page, the list's first before it
                    total, counted = listing.count(conn)
                    return [], Page([], total, counted, None, None)
            part, values = start if start is not None else (0, None)
            found = listing.run(conn, part, values, forward, per_page + 1)
            total, counted = listing.count(conn)
        more = len(found) > per_page
        found = found[:per_page]
        if not forward:
            found.reverse()
        keys = [_key_text(index, key) for _, index, key in found]
        came = start is not None  # from a row on the other side
        after = keys[-1] if keys and (more if forward else True) else None
        before = keys[0] if keys and (came if forward else more) else None
        return [row for row, _, _ in found], Page([], total, counted, after, before)

    return retried(pool, read)


#: The players whose names a search by name looks for in the seats, at most.
NAMED_AT_MOST = 200
#: Up to this many players named, their matches are found by the seats' index, at least;
#: and at most this many (each match found is checked against every name).
BY_INDEX_AT_LEAST, BY_INDEX_AT_MOST = 5, 30
#: A condition in SQL, and its values.
_Condition = tuple[str, list[Any]]


def _finding(pool: ConnectionPool, text: str) -> tuple[_Condition, _Condition, bool]:
    """The condition that a match is the one ``text`` names, one of the table's it names,
    or one where the player it names (by id, or by part of their name) has a seat: to
    read a page by, and to count by; and whether that count is of only some of the
    players named (at least as many matches, then)."""
    ident = _uuid(text.strip())
    if ident is not None:
        named = (
            "(m.match_id = %s OR m.match_id IN (SELECT match_id FROM table_hands"
            " WHERE table_id = %s) OR m.seats @> %s)",
            [ident, ident, Jsonb([{"player": str(ident)}])],
        )
        return named, named, False

    def read(conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], float]:
        # The names found first (by the trigram index, where there is one), then the first
        # of them by id: asked for in one query, the planner may read the players in the
        # order of their ids instead, every name checked (0.3-0.5 s at 100,000 players).
        found = conn.execute(
            "WITH named AS MATERIALIZED (SELECT player_id FROM players WHERE name ILIKE %s)"
            " SELECT player_id FROM named ORDER BY player_id LIMIT %s",
            (_containing(text), NAMED_AT_MOST),
        ).fetchall()
        everyone = conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'players'::regclass"
        ).fetchone()
        return found, float(everyone[0]) if everyone else 0.0

    rows, players = retried(pool, read)
    if not rows:
        return ("false", []), ("false", []), False

    def by_index(named: list[tuple[Any, ...]]) -> _Condition:
        # Each player's matches by the seats' index (0.03 ms a player at 1,000,000
        # matches), each match found then checked against every name (111 names: 1,111
        # matches checked 111 times, 250 ms).
        return (
            "(" + " OR ".join(["m.seats @> %s"] * len(named)) + ")",
            [Jsonb([{"player": str(row[0])}]) for row in named],
        )

    # Past a few names, a page is found sooner by reading the matches in the page's order,
    # each seat's player looked up in the names' ids, until the page is full: about 25 /
    # share rows read, the share of the matches theirs about their share of the players;
    # the index costs about as much at sqrt(players / 28) names (at 100,000 players, 11
    # names: 3 ms by the index against 300 ms; 111 names: 30 ms in order). Counting so
    # would read every match: the count is then of the first names' matches.
    if len(rows) <= min(BY_INDEX_AT_MOST, max(BY_INDEX_AT_LEAST, (max(players, 0) / 28) ** 0.5)):
        return by_index(rows), by_index(rows), False
    ids = [str(row[0]) for row in rows]
    in_order = (
        "(" + " OR ".join(f"m.seats->{seat}->>'player' = ANY(%s)" for seat in range(SEATS)) + ")",
        [ids] * SEATS,
    )
    return in_order, by_index(rows[:BY_INDEX_AT_MOST]), len(rows) > BY_INDEX_AT_MOST


#: The match list's parts under each sort (:class:`_Part`): by creation, every match; by
#: the house's take, the settled matches, then the others (no take yet) newest first.
_BY_TIME = ("m.created_at", "m.match_id"), ("timestamptz", "uuid")
MATCH_SORTS = {
    "created": (_Part("true", *_BY_TIME, "matches m"),),
    "house": (
        _Part(
            "s.match_id IS NOT NULL",
            ("s.house", "s.match_id"),
            ("numeric", "uuid"),
            "settlements s",
        ),
        _Part("NOT m.settled", *_BY_TIME, "matches m"),
    ),
}


def matches(pool: ConnectionPool, query: MatchQuery, at: At, per_page: int) -> Page:
    """The page at ``at`` of the matches the query finds, in its order."""
    where, params = _days("m.created_at", query.since, query.until)
    for column, value in (("status", query.status), ("ruleset", query.ruleset)):
        if value:
            where.append(f"m.{column} = %s")
            params.append(value)
    counting = None
    if query.player:
        (paged, paged_params), (counted, counted_params), some = _finding(pool, query.player)
        counting = ([*where, counted], [*params, *counted_params], some)
        where, params = [*where, paged], [*params, *paged_params]
    listing = _Listing(
        "m.match_id, m.ruleset, m.status, m.phase, m.version, m.seats, m.settled,"
        " m.created_at, m.updated_at, s.result->>'winner', (s.result->>'landlord')::int,"
        " s.house,"
        " s.result->'settlement'->'gross' <> s.result->'settlement'->'after_cap',"
        " s.result->'first_disconnect' <> 'null'::jsonb, s.result->'settlement'->'net'",
        "matches m LEFT JOIN settlements s ON s.match_id = m.match_id",
        where,
        params,
        MATCH_SORTS[query.sort],
        query.descending,
        # A match has one settlement at most, and no condition reads it.
        counted="matches m",
        counting=counting,
    )
    rows, page = _page(pool, listing, at, per_page)
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
    return replace(page, rows=found)


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


def _by(column: str, kind: str, table: str = "player_figures f") -> tuple[_Part, ...]:
    # The tie is broken by the id of the table whose index holds the column.
    alias = table.split()[-1]
    return (_Part("true", (column, f"{alias}.player_id"), (kind, "uuid"), table),)


#: The players page's columns it may be sorted by, and the list's parts under each
#: (:class:`_Part`): by the disconnect rate, the players with hands, then those without.
PLAYER_SORTS = {
    "name": _by("p.name", "text", "players p"),
    "balance": _by("f.balance", "numeric"),
    "hands": _by("f.hands", "integer"),
    "disconnects": _by("f.disconnects", "integer"),
    "rate": (
        _Part(
            "f.rate IS NOT NULL", ("f.rate", "f.player_id"), ("numeric", "uuid"), "player_figures f"
        ),
        _Part("f.rate IS NULL", ("f.player_id",), ("uuid",), "player_figures f"),
    ),
}


def players(
    pool: ConnectionPool,
    sort: str,
    descending: bool,
    at: At,
    per_page: int,
    bot_account: bool | None = None,
    search: str | None = None,
) -> Page:
    """Each player's balance, settled hands, the hands they disconnected from (left or
    missed a deadline) and the share of hands that is, and whether it is a bot account
    (read from ``player_figures``, which the settlements and the ledger keep); the page at
    ``at``, sorted. ``bot_account``: only bot accounts (true), only people (false);
    ``search``: the player of an id, or those whose name holds it (any case)."""
    where: list[str] = []
    params: list[Any] = []
    if bot_account is not None:
        where.append("p.bot_account = %s")
        params.append(bot_account)
    if search and search.strip():
        ident = _uuid(search.strip())
        if ident is not None:
            where.append("p.player_id = %s")
            params.append(ident)
        else:
            where.append("p.name ILIKE %s")
            params.append(_containing(search))
    listing = _Listing(
        "p.player_id, p.name, p.bot_account, f.balance, f.hands, f.disconnects, f.rate",
        "players p JOIN player_figures f USING (player_id)",
        where,
        params,
        PLAYER_SORTS[sort],
        descending,
        # Each player has their row of figures (a trigger adds it with the player).
        counted="players p",
    )
    rows, page = _page(pool, listing, at, per_page)
    keys = ("player_id", "name", "bot_account", "balance", "hands", "disconnects", "rate")
    return replace(page, rows=[dict(zip(keys, row)) for row in rows])


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


#: The audit trail's one part: newest first, by its entries' ids.
TRAIL_ORDER = (_Part("true", ("audit_id",), ("bigint",), "audit_trail"),)


def audit_trail(pool: ConnectionPool, query: AuditQuery, at: At, per_page: int) -> Page:
    """The page at ``at`` of the audit trail's entries the query finds, newest first."""
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
    listing = _Listing(
        ", ".join(TRAIL_FIELDS), "audit_trail", where, params, TRAIL_ORDER, descending=True
    )
    rows, page = _page(pool, listing, at, per_page)
    return replace(page, rows=[dict(zip(TRAIL_FIELDS, row)) for row in rows])
