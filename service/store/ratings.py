"""Ratings on PostgreSQL (docs/ratings.md): each player's rating per ruleset (``ratings``),
each change (``rating_changes``), each settled hand with its rating pending or done
(``rated_hands``, a row added by a trigger in the settlement's own transaction), what
decides whom a hand rates (the lobby's tables, the bot accounts) and the hands whose
rating an operator voided (``rating_voids``).

A hand is rated once: its rating claims the hand's row (``rated_at``) in the transaction
that writes the changes, so a retried or repeated job finds it done. The players' rows are
locked in one order, so that two hands of one player at once are rated one after the
other. A rebuild holds the ratings' lock, under which every rating is written, while it
reads every settled hand and makes the ratings again."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ..game.ratings import LADDER, QUICK_MATCH, Change, Rating, Terms
from .pool import retried

#: The advisory lock of the ratings: shared by each hand's rating, held alone by a rebuild.
_LOCK = 0x64647A72  # "ddzr"


#: The kind of lobby table that dealt a hand (:class:`Terms`), by its table's rows.
_LOBBY_OF_HAND = (
    "(SELECT CASE WHEN EXISTS (SELECT 1 FROM ladder_tables l WHERE l.table_id = h.table_id)"
    f" THEN '{LADDER}' WHEN EXISTS (SELECT 1 FROM lobby_tables l WHERE l.table_id = h.table_id)"
    f" THEN '{QUICK_MATCH}' END FROM table_hands h WHERE h.match_id = %(match)s)"
)
#: What an operator's void of a hand's rating found: done now, done before, or no settled
#: hand to void.
VOIDED, VOIDED_ALREADY, NOT_SETTLED = "voided", "voided already", "not settled"


@dataclass(frozen=True)
class Owner:
    """The person a bot account belongs to."""

    player_id: uuid.UUID
    name: str


@dataclass(frozen=True)
class Ranked:
    """A row of a leaderboard (a bot account's with its owner, when it has one)."""

    rank: int
    player_id: uuid.UUID
    name: str
    rating: Rating
    owner: Owner | None = None


@dataclass(frozen=True)
class RatingVoid:
    """An operator's void of a hand's rating: who, why and when."""

    operator: str
    reason: str
    at: datetime


@dataclass(frozen=True)
class Rated:
    """A player's rating in a ruleset, and when it last changed."""

    ruleset: str
    rating: Rating
    updated_at: datetime


@dataclass(frozen=True)
class Changed:
    """A player's rating change at one hand."""

    match_id: uuid.UUID
    ruleset: str
    won: bool
    before: Rating
    after: Rating
    changed_at: datetime
    #: An operator voided the hand's rating: the change was taken back.
    voided: bool = False


class RatingStore:
    def __init__(self, pool: ConnectionPool):
        self.pool = pool

    def rate_hand(
        self,
        match_id: uuid.UUID,
        ruleset: str,
        players: Sequence[str],
        rate: Callable[[dict[str, Rating]], list[Change]],
    ) -> list[Change] | None:
        """Rates the settled hand once: ``rate`` is given the players' ratings before it
        (the prior for a player not rated yet) and answers their changes, written with
        the hand marked rated in one transaction. None when the hand is rated already (or
        not settled)."""

        def work(conn: psycopg.Connection) -> list[Change] | None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_LOCK,))
                claimed = conn.execute(
                    "UPDATE rated_hands SET rated_at = now() WHERE match_id = %s"
                    " AND rated_at IS NULL RETURNING match_id",
                    (match_id,),
                ).fetchone()
                if claimed is None:
                    return None
                voided = conn.execute(
                    "SELECT 1 FROM rating_voids WHERE match_id = %s", (match_id,)
                ).fetchone()
                if voided is not None:
                    return []  # voided before it was rated: it rates no one
                before = self._locked(conn, ruleset, sorted(players))
                changes = rate(before)
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "UPDATE ratings SET mu = %s, sigma = %s, hands = %s, updated_at = now()"
                        " WHERE player_id = %s AND ruleset = %s",
                        [
                            (c.after.mu, c.after.sigma, c.after.hands, c.player, ruleset)
                            for c in changes
                        ],
                    )
                _record(conn, [(match_id, ruleset, c) for c in changes])
                return changes

        return retried(self.pool, work)

    @staticmethod
    def _locked(conn: psycopg.Connection, ruleset: str, players: list[str]) -> dict[str, Rating]:
        """The players' ratings, their rows locked (made with the prior for a player not
        rated yet: a row that does not exist cannot be locked) in the players' order."""
        prior = Rating()
        found = {}
        for player in players:
            conn.execute(
                "INSERT INTO ratings (player_id, ruleset, bot_account, mu, sigma, hands)"
                " SELECT player_id, %s, bot_account, %s, %s, 0 FROM players WHERE player_id = %s"
                " ON CONFLICT (player_id, ruleset) DO NOTHING",
                (ruleset, prior.mu, prior.sigma, player),
            )
            row = conn.execute(
                "SELECT mu, sigma, hands FROM ratings WHERE player_id = %s AND ruleset = %s"
                " FOR UPDATE",
                (player, ruleset),
            ).fetchone()
            if row is not None:
                found[player] = Rating(*row)
        return found

    def terms(self, match_id: uuid.UUID, players: Sequence[str]) -> Terms:
        """What decides whom the hand rates: its lobby table's kind, whether its rating is
        voided (a void after this read is still honoured: :meth:`rate_hand`), and which of
        ``players`` are bot accounts."""
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                f"SELECT {_LOBBY_OF_HAND},"
                " EXISTS (SELECT 1 FROM rating_voids WHERE match_id = %(match)s),"
                " array(SELECT player_id::text FROM players"
                "  WHERE player_id = ANY(%(players)s::uuid[]) AND bot_account)",
                {"match": match_id, "players": list(players)},
            ).fetchone(),
        )
        assert row is not None  # a SELECT without FROM answers one row
        lobby, voided, bots = row
        return Terms(lobby, voided, frozenset(bots))

    def void(self, match_id: uuid.UUID, operator: str, reason: str) -> str:
        """Voids the settled hand's rating effect, once (:data:`VOIDED`, or
        :data:`VOIDED_ALREADY`, or :data:`NOT_SETTLED`), with who and why: each of its
        changes is taken back from the player's rating as it stands (its mean less the
        hand's change, its deviation widened by what the hand narrowed it, a rated hand
        fewer), in one transaction. A hand not rated yet is rated for no one."""

        def work(conn: psycopg.Connection) -> str:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_LOCK,))
                # The hand's row, locked: its rating, under way, is done first or after.
                if (
                    conn.execute(
                        "SELECT 1 FROM rated_hands WHERE match_id = %s FOR UPDATE", (match_id,)
                    ).fetchone()
                    is None
                ):
                    return NOT_SETTLED
                if (
                    conn.execute(
                        "INSERT INTO rating_voids (match_id, operator, reason)"
                        " VALUES (%s, %s, %s) ON CONFLICT (match_id) DO NOTHING RETURNING 1",
                        (match_id, operator, reason),
                    ).fetchone()
                    is None
                ):
                    return VOIDED_ALREADY
                for player, ruleset in conn.execute(
                    "SELECT player_id, ruleset FROM rating_changes WHERE match_id = %s"
                    " ORDER BY player_id",
                    (match_id,),
                ).fetchall():
                    conn.execute(
                        "UPDATE ratings r SET mu = r.mu - (c.mu - c.mu_before),"
                        " sigma = sqrt(r.sigma ^ 2 + greatest(0, c.sigma_before ^ 2 - c.sigma ^ 2)),"
                        " hands = r.hands - 1, updated_at = now() FROM rating_changes c"
                        " WHERE c.match_id = %s AND c.player_id = %s"
                        " AND r.player_id = c.player_id AND r.ruleset = %s",
                        (match_id, player, ruleset),
                    )
                return VOIDED

        return retried(self.pool, work)

    def voided_among(self, match_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Which of these hands' ratings an operator voided."""
        return retried(
            self.pool,
            lambda conn: {
                row[0]
                for row in conn.execute(
                    "SELECT match_id FROM rating_voids WHERE match_id = ANY(%s)",
                    (list(match_ids),),
                )
            },
        )

    def voided(self, match_id: uuid.UUID) -> RatingVoid | None:
        """The void of the hand's rating, if an operator voided it."""
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT operator, reason, at FROM rating_voids WHERE match_id = %s", (match_id,)
            ).fetchone(),
        )
        return None if row is None else RatingVoid(*row)

    def pending(self, limit: int = 1000) -> list[uuid.UUID]:
        """Settled hands whose rating is still to be done, the oldest first."""
        return retried(
            self.pool,
            lambda conn: [
                row[0]
                for row in conn.execute(
                    "SELECT match_id FROM rated_hands WHERE rated_at IS NULL"
                    " ORDER BY settled_at, match_id LIMIT %s",
                    (limit,),
                )
            ],
        )

    def leaderboard(
        self, ruleset: str, bot_accounts: bool, after: tuple[int, float, str] | None, limit: int
    ) -> list[Ranked]:
        """The players of one kind rated in the ruleset, by conservative rating (then by
        id), from after the row ``after`` (its rank, conservative rating and player)."""
        rank, conservative, player = after if after is not None else (0, float("inf"), "")
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT r.player_id, p.name, r.mu, r.sigma, r.hands, o.player_id, o.name"
                " FROM ratings r JOIN players p USING (player_id)"
                " LEFT JOIN players o ON o.player_id = p.owner_id"
                " WHERE r.ruleset = %s AND r.bot_account = %s AND r.hands > 0"
                " AND (r.conservative < %s OR (r.conservative = %s AND r.player_id::text > %s))"
                " ORDER BY r.conservative DESC, r.player_id LIMIT %s",
                (ruleset, bot_accounts, conservative, conservative, player, limit),
            ).fetchall(),
        )
        return [
            Ranked(
                rank + n,
                player_id,
                name,
                Rating(mu, sigma, hands),
                None if owner_id is None else Owner(owner_id, owner_name),
            )
            for n, (player_id, name, mu, sigma, hands, owner_id, owner_name) in enumerate(rows, 1)
        ]

    def of_player(self, player_id: uuid.UUID) -> list[Rated]:
        """The player's ratings, by ruleset."""
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT ruleset, mu, sigma, hands, updated_at FROM ratings"
                " WHERE player_id = %s AND hands > 0 ORDER BY ruleset",
                (player_id,),
            ).fetchall(),
        )
        return [
            Rated(ruleset, Rating(mu, sigma, hands), at) for ruleset, mu, sigma, hands, at in rows
        ]

    def history(
        self,
        player_id: uuid.UUID,
        ruleset: str | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[Changed]:
        """The player's rating changes, newest first (in one ruleset, or all), after the
        change (its time and match) ``after``."""
        query = (
            "SELECT match_id, ruleset, won, mu_before, sigma_before, mu, sigma, hands,"
            " changed_at, EXISTS (SELECT 1 FROM rating_voids v WHERE v.match_id = c.match_id)"
            " FROM rating_changes c WHERE player_id = %(player)s"
            " AND (%(ruleset)s::text IS NULL OR ruleset = %(ruleset)s)"
        )
        params: dict[str, Any] = {"player": player_id, "ruleset": ruleset, "limit": limit}
        if after is not None:
            query += " AND (changed_at, match_id) < (%(at)s, %(match)s)"
            params |= {"at": after[0], "match": after[1]}
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                query + " ORDER BY changed_at DESC, match_id DESC LIMIT %(limit)s", params
            ).fetchall(),
        )
        return [
            Changed(
                match_id,
                ruleset_,
                won,
                Rating(mu_before, sigma_before, hands - 1),
                Rating(mu, sigma, hands),
                at,
                voided,
            )
            for match_id, ruleset_, won, mu_before, sigma_before, mu, sigma, hands, at, voided in (
                rows
            )
        ]

    @contextmanager
    def rebuilding(self) -> Iterator[Rebuild]:
        """A rebuild: under the ratings' lock (ratings of hands wait for it), the settled
        hands in the order they were settled (:meth:`Rebuild.hands`), read without writing
        (a writing transaction that long would hold back every player's stream), then
        every rating written again from the changes added, in one short transaction."""
        with self.pool.connection() as lock:
            lock.execute("SELECT pg_advisory_lock(%s)", (_LOCK,))
            try:
                with self.pool.connection() as conn:
                    rebuild = Rebuild(conn)
                    yield rebuild
                    rebuild.write()
            finally:
                lock.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))


@dataclass
class Rebuild:
    """The ratings made again, hand after hand (see :meth:`RatingStore.rebuilding`)."""

    conn: psycopg.Connection
    #: The rows of rating_changes (each with its hand and ruleset), in the hands' order.
    changes: list[tuple[uuid.UUID, str, Change]] = field(default_factory=list)
    #: The hands read whose rating was pending: rated by the rebuild.
    pending: list[uuid.UUID] = field(default_factory=list)

    def hands(self) -> Iterator[tuple[uuid.UUID, Terms]]:
        """Every settled hand, in the order they were settled, with what decides whom it
        rates (every bot account is named as one)."""
        bots = frozenset(
            row[0]
            for row in self.conn.execute(
                "SELECT player_id::text FROM players WHERE bot_account"
            ).fetchall()
        )
        rows = self.conn.execute(
            "SELECT r.match_id, r.rated_at IS NULL, v.match_id IS NOT NULL,"
            f" CASE WHEN l.table_id IS NOT NULL THEN '{LADDER}'"
            f" WHEN q.table_id IS NOT NULL THEN '{QUICK_MATCH}' END"
            " FROM rated_hands r LEFT JOIN rating_voids v ON v.match_id = r.match_id"
            " LEFT JOIN table_hands h ON h.match_id = r.match_id"
            " LEFT JOIN ladder_tables l ON l.table_id = h.table_id"
            " LEFT JOIN lobby_tables q ON q.table_id = h.table_id"
            " ORDER BY r.settled_at, r.match_id"
        ).fetchall()
        for match_id, pending, voided, lobby in rows:
            if pending:
                self.pending.append(match_id)
            yield match_id, Terms(lobby, voided, bots)

    def add(self, match_id: uuid.UUID, ruleset: str, changes: Sequence[Change]) -> None:
        self.changes += ((match_id, ruleset, c) for c in changes)

    def write(self) -> None:
        latest = {(c.player, ruleset): c.after for _, ruleset, c in self.changes}
        with self.conn.transaction():
            self.conn.execute("TRUNCATE ratings, rating_changes")
            with self.conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO ratings (player_id, ruleset, bot_account, mu, sigma, hands)"
                    " SELECT player_id, %s, bot_account, %s, %s, %s FROM players"
                    " WHERE player_id = %s",
                    [(r, a.mu, a.sigma, a.hands, p) for (p, r), a in latest.items()],
                )
            _record(self.conn, self.changes)
            self.conn.execute(
                "UPDATE rated_hands SET rated_at = now() WHERE rated_at IS NULL"
                " AND match_id = ANY(%s)",
                (self.pending,),
            )


def _record(conn: psycopg.Connection, changes: Sequence[tuple[uuid.UUID, str, Change]]) -> None:
    """The changes (each with its hand and ruleset) into rating_changes."""
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY rating_changes (match_id, player_id, ruleset, won, mu_before, sigma_before,"
            " mu, sigma, hands) FROM STDIN"
        ) as copy,
    ):
        for match_id, ruleset, c in changes:
            copy.write_row(
                (
                    match_id,
                    c.player,
                    ruleset,
                    c.won,
                    c.before.mu,
                    c.before.sigma,
                    c.after.mu,
                    c.after.sigma,
                    c.after.hands,
                )
            )
