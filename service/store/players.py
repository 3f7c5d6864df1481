"""Players and their bearer tokens (stored only as SHA-256 hashes)."""

from __future__ import annotations

import hashlib
import secrets
import uuid

from psycopg_pool import ConnectionPool


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Players:
    def __init__(self, pool: ConnectionPool):
        self.pool = pool

    def create(self, name: str) -> tuple[uuid.UUID, str]:
        """A new player and its token; the token is never stored and cannot be shown again."""
        player_id = uuid.uuid4()
        token = secrets.token_urlsafe(32)
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO players (player_id, name, token_hash) VALUES (%s, %s, %s)",
                (player_id, name, token_hash(token)),
            )
        return player_id, token

    def by_token(self, token: str) -> uuid.UUID | None:
        with self.pool.connection() as conn:
            row = conn.execute("SELECT player_id FROM players WHERE token_hash = %s", (token_hash(token),)).fetchone()
        return None if row is None else row[0]

    def exists(self, player_id: uuid.UUID) -> bool:
        with self.pool.connection() as conn:
            return conn.execute("SELECT 1 FROM players WHERE player_id = %s", (player_id,)).fetchone() is not None
