"""Ratings on PostgreSQL (docs/ratings.md): each player's rating per ruleset (``ratings``),
each change (``rating_changes``) and each settled hand with its rating pending or done
(``rated_hands``, a row added by a trigger in the settlement's own transaction).

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

from ..game.ratings import Change, Rating
from .pool import retried

#: The advisory lock of the ratings: shared by each hand's rating, held alone by a rebuild.
_LOCK = 0x64647A72  # "ddzr"


@dataclass(frozen=True)
class Ranked:
    """A row of a leaderboard."""

    rank: int
    player_id: uuid.UUID
    name: str
    rating: Rating


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
                "SELECT r.player_id, p.name, r.mu, r.sigma, r.hands FROM ratings r"
                " JOIN players p USING (player_id)"
                " WHERE r.ruleset = %s AND r.bot_account = %s AND r.hands > 0"
                " AND (r.conservative < %s OR (r.conservative = %s AND r.player_id::text > %s))"
                " ORDER BY r.conservative DESC, r.player_id LIMIT %s",
                (ruleset, bot_accounts, conservative, conservative, player, limit),
            ).fetchall(),
        )
        return [
            Ranked(rank + n, player_id, name, Rating(mu, sigma, hands))
            for n, (player_id, name, mu, sigma, hands) in enumerate(rows, 1)
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
            " changed_at FROM rating_changes WHERE player_id = %(player)s"
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
            )
            for match_id, ruleset_, won, mu_before, sigma_before, mu, sigma, hands, at in rows
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

    def hands(self) -> Iterator[uuid.UUID]:
        """Every settled hand, in the order they were settled."""
        rows = self.conn.execute(
            "SELECT match_id, rated_at IS NULL FROM rated_hands ORDER BY settled_at, match_id"
        ).fetchall()
        for match_id, pending in rows:
            if pending:
                self.pending.append(match_id)
            yield match_id

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
