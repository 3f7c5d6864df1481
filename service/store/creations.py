"""The keys of creation requests sent with an ``Idempotency-Key`` (a match, a table, a seat
at a table, a lobby ticket) and the answers their first requests got.

A command's key is written with its events, in its transaction (:mod:`.events`). A
creation's is not: the paths that create are many (the match's command path, the table's,
the lobby's). So a key is reserved before its request creates anything, and its answer
recorded after: a duplicate that comes meanwhile is refused (:class:`KeyInUse`), one that
comes after gets the answer. A request that fails releases its key; one whose outcome is
unknown (the database went away in the middle) keeps it reserved, refusing its retries,
rather than let them create a second resource."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool

from .events import IdempotencyMismatch, StoreError
from .pool import retried


class KeyInUse(StoreError):
    code = "idempotency_key_in_use"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


@dataclass(frozen=True)
class CreationKey:
    player: uuid.UUID
    #: The method and the path (the resource created under it).
    operation: str
    key: str
    request_hash: bytes


class CreationKeys:
    def __init__(self, pool: ConnectionPool):
        self.pool = pool

    def reserve(self, key: CreationKey) -> Answer | None:
        """None: the key is the caller's now (create, then :meth:`answer` or
        :meth:`release`). Else the first request's answer (raises
        :class:`IdempotencyMismatch` if that was another request, :class:`KeyInUse` while
        it is under way)."""

        def reserve(conn: psycopg.Connection) -> Answer | None:
            inserted = conn.execute(
                "INSERT INTO creation_keys (player_id, operation, key, request_hash)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING true",
                (key.player, key.operation, key.key, key.request_hash),
            ).fetchone()
            if inserted is not None:
                return None
            row = conn.execute(
                "SELECT request_hash, status, body FROM creation_keys"
                " WHERE player_id = %s AND operation = %s AND key = %s",
                (key.player, key.operation, key.key),
            ).fetchone()
            if row is None:  # released in between: the key is free again
                return reserve(conn)
            if bytes(row[0]) != key.request_hash:
                raise IdempotencyMismatch("this Idempotency-Key was used with another request")
            if row[1] is None:
                raise KeyInUse(
                    "a request with this Idempotency-Key is under way (or its outcome is "
                    "unknown): retry shortly, or look for what it created"
                )
            return Answer(row[1], bytes(row[2]))

        return retried(self.pool, reserve)

    def answer(self, key: CreationKey, answer: Answer) -> None:
        retried(
            self.pool,
            lambda conn: conn.execute(
                "UPDATE creation_keys SET status = %s, body = %s"
                " WHERE player_id = %s AND operation = %s AND key = %s",
                (answer.status, answer.body, key.player, key.operation, key.key),
            ),
        )

    def release(self, key: CreationKey) -> None:
        """The request created nothing: its key is free for a retry."""
        retried(
            self.pool,
            lambda conn: conn.execute(
                "DELETE FROM creation_keys WHERE player_id = %s AND operation = %s AND key = %s"
                " AND status IS NULL",
                (key.player, key.operation, key.key),
            ),
        )
