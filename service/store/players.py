"""Players and their bearer tokens (stored only as SHA-256 hashes)."""

from __future__ import annotations

import hashlib
import secrets
import threading
import uuid

from psycopg_pool import ConnectionPool

from .pool import retried


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Players:
    #: Tokens never change owner, so a known token is remembered (up to this many).
    CACHE_SIZE = 10_000

    def __init__(self, pool: ConnectionPool):
        self.pool = pool
        self._known: dict[bytes, uuid.UUID] = {}
        self._lock = threading.Lock()

    def create(self, name: str) -> tuple[uuid.UUID, str]:
        """A new player and its token; the token is never stored and cannot be shown again."""
        player_id = uuid.uuid4()
        token = secrets.token_urlsafe(32)
        # A second run, after a connection that broke once the first had committed, finds
        # the player there and leaves it.
        retried(
            self.pool,
            lambda conn: conn.execute(
                "INSERT INTO players (player_id, name, token_hash) VALUES (%s, %s, %s) ON CONFLICT (player_id) DO NOTHING",
                (player_id, name, token_hash(token)),
            ),
        )
        return player_id, token

    def by_token(self, token: str) -> uuid.UUID | None:
        digest = token_hash(token)
        known = self._known.get(digest)
        if known is not None:
            return known
        row = retried(
            self.pool, lambda conn: conn.execute("SELECT player_id FROM players WHERE token_hash = %s", (digest,)).fetchone()
        )
        if row is None:
            return None  # unknown tokens are not remembered: forged ones would fill the cache
        with self._lock:
            if len(self._known) >= self.CACHE_SIZE:
                self._known.clear()
            self._known[digest] = row[0]
        return row[0]
