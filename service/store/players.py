"""Players and their bearer tokens (stored only as SHA-256 hashes). A player may hold
several tokens, each revocable and optionally expiring."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import threading
import uuid
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool

from .pool import retried

#: The channel on which a revocation names the revoked token's hash (hex), so that every
#: process forgets it at once.
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

    def expired(self, now: dt.datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or dt.datetime.now(dt.UTC))


_COLUMNS = "token_id, player_id, last4, label, created_at, expires_at"


class Players:
    #: Known tokens are remembered (up to this many) until a notification on
    #: REVOKED_CHANNEL says one was revoked, so that the hot path reads no table.
    CACHE_SIZE = 10_000

    def __init__(self, pool: ConnectionPool):
        self.pool = pool
        self._known: dict[bytes, Token] = {}
        self._lock = threading.Lock()
        #: Counts revocations heard, so that a read that raced one is not remembered.
        self._forgotten = 0

    def create(self, name: str) -> tuple[uuid.UUID, str]:
        """A new player and its first token; the token is never stored and cannot be shown again."""
        player_id, token, token_id = uuid.uuid4(), secrets.token_urlsafe(32), uuid.uuid4()

        def insert(conn: psycopg.Connection) -> None:
            with conn.transaction():
                conn.execute(
                    "INSERT INTO players (player_id, name) VALUES (%s, %s) ON CONFLICT (player_id) DO NOTHING",
                    (player_id, name),
                )
                self._issue(conn, player_id, None, None, token, token_id)

        retried(self.pool, insert)
        return player_id, token

    def names(self, player_ids: list[str]) -> dict[str, str]:
        """Each player's name, by id (as text)."""
        if not player_ids:
            return {}
        rows = retried(
            self.pool,
            lambda conn: conn.execute(
                "SELECT player_id::text, name FROM players WHERE player_id = ANY(%s::uuid[])",
                (player_ids,),
            ).fetchall(),
        )
        return dict(rows)

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
        """Deletes one of the player's tokens and tells every process to forget it, in one
        statement; False when the player has no such token."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "WITH gone AS (DELETE FROM tokens WHERE token_id = %s AND player_id = %s RETURNING token_hash)"
                " SELECT encode(token_hash, 'hex'), pg_notify(%s, encode(token_hash, 'hex')) FROM gone",
                (token_id, player_id, REVOKED_CHANNEL),
            ).fetchone()
        if row is None:
            return False
        self.forget(row[0])  # this process at once; the others when notified
        return True

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
                f"SELECT {_COLUMNS} FROM tokens WHERE token_hash = %s", (digest,)
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

    def forget(self, digest_hex: str | None) -> None:
        """A token was revoked (by its hash, hex), or, with None, any may have been (the
        listener reconnected and may have missed notifications)."""
        with self._lock:
            self._forgotten += 1
            if digest_hex is None:
                self._known.clear()
            else:
                self._known.pop(bytes.fromhex(digest_hex), None)
