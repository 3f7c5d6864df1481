"""What is kept for how long (docs/operations.md, "Retention"): the events, settlements,
ledger entries and audit trail for ever (they refuse deletes); what only serves a while is
pruned here, a batch at a time so that no delete holds its table long: idempotency keys of
commands and of creations past their age, player tokens and console sessions past their
expiry."""

from __future__ import annotations

import functools
from datetime import timedelta

import psycopg
from psycopg_pool import ConnectionPool

from .pool import retried

#: Rows deleted per statement.
BATCH = 5000

#: (what is pruned, its table, the column its time is in, which setting's age it is kept).
PRUNED = (
    ("idempotency keys", "idempotency_keys", "created_at", "keys"),
    ("creation keys", "creation_keys", "created_at", "keys"),
    ("expired tokens", "tokens", "expires_at", "expired"),
    ("expired console sessions", "console_sessions", "expires_at", "expired"),
)


def prune(pool: ConnectionPool, keys: timedelta, expired: timedelta) -> dict[str, int]:
    """Deletes the idempotency and creation keys older than ``keys`` and the tokens and
    console sessions expired longer ago than ``expired``; how many of each."""
    ages = {"keys": keys, "expired": expired}
    pruned = {}
    for what, table, column, age in PRUNED:
        total = 0
        while True:
            deleted = retried(pool, functools.partial(_batch, table, column, ages[age]))
            total += deleted
            if deleted < BATCH:
                break
        pruned[what] = total
    return pruned


def _batch(table: str, column: str, age: timedelta, conn: psycopg.Connection) -> int:
    # Composed from the constants of PRUNED only; the age is a parameter.
    return conn.execute(
        f"DELETE FROM {table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {table}"
        f" WHERE {column} < now() - %s LIMIT %s))",
        (age, BATCH),
    ).rowcount
