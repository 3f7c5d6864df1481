"""Players and their bearer tokens (stored only as SHA-256 hashes). A player may hold
several tokens, each revocable and optionally expiring."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool

from .pool import retried

#: The channel on which every deletion of a token, a player's or an operator's, names the
#: token's hash (hex), so that every process forgets it at once: a trigger of each table
#: (migrations/0020) sends it, whatever deleted the token.
REVOKED_CHANNEL = "ddz_token_revoked"


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Token:
    """A token as its owner may see it (never the token itself, which is not kept)."""

    token_id: uuid.UUID
    player_id: uuid.UUID
    last4: str | None
    label: str | None
    created_at: dt.datetime
    expires_at: dt.datetime | None
    #: The player's standing: ``active``, or ``suspended`` or ``banned`` by an operator
    #: (every token of theirs refused, with a problem that says so).
    standing: str = "active"

    def expired(self, now: dt.datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or dt.datetime.now(dt.UTC))


_COLUMNS = "token_id, player_id, last4, label, created_at, expires_at"


@dataclass(frozen=True)
class Profile:
    """What other players are shown of a player: its name, whether it is a bot account
    (an author's program) and, for a bot account, the person it belongs to (None for one
    registered before owners were kept). All are set at registration and never change."""

    name: str
    bot_account: bool
    owner_id: str | None = None


@dataclass(frozen=True)
class Registered:
    """A player as operators list it."""

    player_id: uuid.UUID
    name: str
    bot_account: bool
    created_at: dt.datetime
    owner_id: uuid.UUID | None = None


#: A player's standing with its owner's (a bot account is suspended and banned with the
#: person it belongs to): the worse of the two. ``p`` is the player, ``o`` its owner.
_STANDING = (
    "CASE WHEN 'banned' IN (p.standing, o.standing) THEN 'banned'"
    " WHEN 'suspended' IN (p.standing, o.standing) THEN 'suspended' ELSE 'active' END"
)


#: A player's standings: in good standing, suspended (until reinstated), banned.
STANDINGS = ("active", "suspended", "banned")


class Players:
    #: Known tokens are remembered (up to this many) until a notification on
    #: REVOKED_CHANNEL says one was revoked, so that the hot path reads no table.
    CACHE_SIZE = 10_000

    def __init__(self, pool: ConnectionPool):
        self.pool = pool
        self._known: dict[bytes, Token] = {}
        #: Profiles never change: each is read once (views of seats are on the hot path).
        self._profiles: dict[str, Profile] = {}
        self._lock = threading.Lock()
        #: Counts revocations heard, so that a read that raced one is not remembered.
        self._forgotten = 0

    def create(
        self, name: str, bot_account: bool = False, owner: uuid.UUID | None = None
    ) -> tuple[uuid.UUID, str]:
        """A new player (``bot_account``: an author's program, which belongs to the person
        ``owner``) and its first token; the token is never stored and cannot be shown
        again."""
        player_id, token, token_id = uuid.uuid4(), secrets.token_urlsafe(32), uuid.uuid4()

        def insert(conn: psycopg.Connection) -> None:
            with conn.transaction():
                conn.execute(
                    "INSERT INTO players (player_id, name, bot_account, owner_id)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (player_id) DO NOTHING",
                    (player_id, name, bot_account, owner),
                )
                self._issue(conn, player_id, None, None, token, token_id)

        retried(self.pool, insert)
        return player_id, token

    def profiles(self, player_ids: Iterable[str]) -> dict[str, Profile]:
        """Each player's profile, by id (as text); unknown ids are left out."""
        wanted = set(player_ids)
        found = {p: self._profiles[p] for p in wanted if p in self._profiles}
        missing = sorted(wanted - found.keys())
        if not missing:
            return found
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT player_id::text, name, bot_account, owner_id::text FROM players"
                " WHERE player_id = ANY(%s::uuid[])",
                (missing,),
            ).fetchall(),
        )
        read = {player_id: Profile(*profile) for player_id, *profile in rows}
        with self._lock:
            if len(self._profiles) + len(read) > self.CACHE_SIZE:
                self._profiles.clear()
            self._profiles.update(read)
        return found | read

    def registered(
        self, bot_account: bool | None, limit: int, after: tuple[dt.datetime, uuid.UUID] | None
    ) -> list[Registered]:
        """Players newest first (only bot accounts, only people, or all when ``bot_account``
        is None), the page after ``after`` (the last one's ``created_at`` and id)."""
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT player_id, name, bot_account, created_at, owner_id FROM players"
                " WHERE (%(kind)s::boolean IS NULL OR bot_account = %(kind)s)"
                " AND (%(at)s::timestamptz IS NULL OR (created_at, player_id) < (%(at)s, %(id)s))"
                " ORDER BY created_at DESC, player_id DESC LIMIT %(limit)s",
                {
                    "kind": bot_account,
                    "at": None if after is None else after[0],
                    "id": None if after is None else after[1],
                    "limit": limit,
                },
            ).fetchall(),
        )
        return [Registered(*row) for row in rows]

    def issue(
        self, player_id: uuid.UUID, label: str | None, expires_in: int | None
    ) -> tuple[str, Token]:
        """Another token for the player: the token (shown once) and what is kept of it."""
        token, token_id = secrets.token_urlsafe(32), uuid.uuid4()
        return token, retried(
            self.pool, lambda conn: self._issue(conn, player_id, label, expires_in, token, token_id)
        )

    @staticmethod
    def _issue(
        conn: psycopg.Connection,
        player_id: uuid.UUID,
        label: str | None,
        expires_in: int | None,
        token: str,
        token_id: uuid.UUID,
    ) -> Token:
        # Drawn by the caller and written at most once, so that a second run after a
        # connection that broke once the first had committed finds the same token.
        row = conn.execute(
            f"INSERT INTO tokens (token_id, player_id, token_hash, last4, label, expires_at)"
            f" VALUES (%s, %s, %s, %s, %s, now() + %s::integer * interval '1 second')"
            f" ON CONFLICT (token_id) DO UPDATE SET token_id = EXCLUDED.token_id RETURNING {_COLUMNS}",
            (token_id, player_id, token_hash(token), token[-4:], label, expires_in),
        ).fetchone()
        assert row is not None  # RETURNING the inserted or the existing row
        return Token(*row)

    def tokens(self, player_id: uuid.UUID) -> list[Token]:
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                f"SELECT {_COLUMNS} FROM tokens WHERE player_id = %s ORDER BY created_at, token_id",
                (player_id,),
            ).fetchall(),
        )
        return [Token(*row) for row in rows]

    def revoke(self, player_id: uuid.UUID, token_id: uuid.UUID) -> bool:
        """Deletes one of the player's tokens (which tells every process to forget it: see
        REVOKED_CHANNEL); False when the player has no such token."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "DELETE FROM tokens WHERE token_id = %s AND player_id = %s"
                " RETURNING encode(token_hash, 'hex')",
                (token_id, player_id),
            ).fetchone()
        if row is None:
            return False
        self.forget(row[0])  # this process at once; the others when notified
        return True

    def issued(self, digests: list[bytes]) -> set[bytes]:
        """Which of these token hashes are still issued, to a player or to an operator."""
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT token_hash FROM tokens WHERE token_hash = ANY(%(hashes)s)"
                " UNION ALL SELECT token_hash FROM operator_tokens"
                " WHERE token_hash = ANY(%(hashes)s)",
                {"hashes": digests},
            ).fetchall(),
        )
        return {bytes(row[0]) for row in rows}

    def by_token(self, token: str) -> Token | None:
        """The token's record (expired or not: the caller says which), or None."""
        digest = token_hash(token)
        known = self._known.get(digest)
        if known is not None:
            return known
        forgotten = self._forgotten
        row = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT t.token_id, t.player_id, t.last4, t.label, t.created_at, t.expires_at,"
                f" {_STANDING} FROM tokens t JOIN players p USING (player_id)"
                " LEFT JOIN players o ON o.player_id = p.owner_id WHERE t.token_hash = %s",
                (digest,),
            ).fetchone(),
        )
        if row is None:
            return None  # unknown tokens are not remembered: forged ones would fill the cache
        found = Token(*row)
        with self._lock:
            if forgotten != self._forgotten:
                return found  # revoked perhaps after the read: ask the table again next time
            if len(self._known) >= self.CACHE_SIZE:
                self._known.clear()
            self._known[digest] = found
        return found

    def set_standing(self, player_id: uuid.UUID, standing: str) -> list[uuid.UUID] | None:
        """Sets the player's standing (:data:`STANDINGS`), and its bot accounts' with it;
        unless ``active``, cancels their waiting lobby tickets. Every process forgets their
        tokens at once (the notification of REVOKED_CHANNEL, which also ends the streams
        they hold open), so that the next request reads the standing. The players whose
        standing it set (the player first); None when there is no such player."""

        def write(conn: psycopg.Connection) -> tuple[list[uuid.UUID], list[str]] | None:
            with conn.transaction():
                found = conn.execute(
                    "UPDATE players SET standing = %s WHERE player_id = %s RETURNING 1",
                    (standing, player_id),
                ).fetchone()
                if found is None:
                    return None
                bots = conn.execute(
                    "UPDATE players SET standing = %s WHERE owner_id = %s RETURNING player_id",
                    (standing, player_id),
                ).fetchall()
                players = [player_id, *sorted(row[0] for row in bots)]
                if standing != "active":
                    conn.execute(
                        "UPDATE lobby_tickets SET status = 'cancelled', updated_at = now()"
                        " WHERE player_id = ANY(%s) AND status = 'waiting'",
                        (players,),
                    )
                rows = conn.execute(
                    "SELECT encode(token_hash, 'hex'), pg_notify(%s, encode(token_hash, 'hex'))"
                    " FROM tokens WHERE player_id = ANY(%s)",
                    (REVOKED_CHANNEL, players),
                ).fetchall()
            return players, [row[0] for row in rows]

        with self.pool.connection() as conn:
            written = write(conn)
        if written is None:
            return None
        players, hashes = written
        for digest_hex in hashes:
            self.forget(digest_hex)  # this process at once; the others when notified
        return players

    def forget(self, digest_hex: str | None) -> None:
        """A token was revoked (by its hash, hex), or, with None, any may have been (the
        listener reconnected and may have missed notifications)."""
        with self._lock:
            self._forgotten += 1
            if digest_hex is None:
                self._known.clear()
            else:
                self._known.pop(bytes.fromhex(digest_hex), None)
