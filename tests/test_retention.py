"""Retention: what only serves a while is pruned by the workers' timer (idempotency keys
and creation keys by age, player tokens and console sessions by expiry, each age a
setting), and nothing younger than its age is touched."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid

import pytest
from jobs import new_player

import workers.context
from workers import sweeper

# Slow: runs the workers' timer thread (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

PRUNED = ("idempotency_keys", "creation_keys", "tokens", "console_sessions")


def rows(db, player: str, operator: uuid.UUID) -> dict[str, list]:
    """The labels of the rows each table holds of this test's player or operator."""
    return {
        "idempotency_keys": sorted(
            r[0]
            for r in db.execute("SELECT key FROM idempotency_keys WHERE player_id = %s", (player,))
        ),
        "creation_keys": sorted(
            r[0]
            for r in db.execute("SELECT key FROM creation_keys WHERE player_id = %s", (player,))
        ),
        "tokens": sorted(
            str(r[0])
            for r in db.execute("SELECT label FROM tokens WHERE player_id = %s", (player,))
        ),
        "console_sessions": sorted(
            bytes(r[0]).decode()
            for r in db.execute(
                "SELECT session_hash FROM console_sessions WHERE operator_id = %s", (operator,)
            )
        ),
    }


def kept_and_expired(db) -> tuple[str, uuid.UUID]:
    """A player and an operator with, in each table, rows past the default ages ('old')
    and rows within them ('new')."""
    player = str(uuid.uuid4())
    db.execute("INSERT INTO players (player_id, name) VALUES (%s, 'kept')", (player,))
    for key, age in (("old", "8 days"), ("new", "6 days")):
        db.execute(
            "INSERT INTO idempotency_keys (player_id, key, match_id, request_hash, first_version,"
            " last_version, created_at) VALUES (%s, %s, %s, '\\x00', 1, 1, now() - %s::interval)",
            (player, key, uuid.uuid4(), age),
        )
        db.execute(
            "INSERT INTO creation_keys (player_id, operation, key, request_hash, status, body,"
            " created_at) VALUES (%s, 'POST /v1/tables', %s, '\\x00', 201, '{}', now() - %s::interval)",
            (player, key, age),
        )
    for label, expiry in (("old", "-31 days"), ("new", "-29 days"), ("never", None)):
        db.execute(
            "INSERT INTO tokens (token_id, player_id, token_hash, label, expires_at)"
            " VALUES (%s, %s, %s, %s, now() + %s::interval)",
            (uuid.uuid4(), player, hashlib.sha256(uuid.uuid4().bytes).digest(), label, expiry),
        )
    operator = uuid.uuid4()
    db.execute(
        "INSERT INTO operators (operator_id, name, role, password_hash) VALUES (%s, %s, 'auditor', 'x')",
        (operator, f"op-{operator.hex[:8]}"),
    )
    for label, expiry in (("old", "-31 days"), ("new", "-29 days"), ("live", "1 hour")):
        db.execute(
            "INSERT INTO console_sessions (session_hash, operator_id, expires_at)"
            " VALUES (%s, %s, now() + %s::interval)",
            (label.encode(), operator, expiry),
        )
    return player, operator


def test_the_workers_timer_prunes_what_is_past_its_age_and_keeps_the_rest(
    api, db, jobs_env, monkeypatch
):
    player, operator = kept_and_expired(db)
    before = rows(db, player, operator)
    assert before["tokens"] == ["never", "new", "old"]
    # Longer ages, as set: nothing of this test's is old enough yet.
    monkeypatch.setenv("DDZ_KEEP_KEYS_DAYS", "10")
    monkeypatch.setenv("DDZ_KEEP_EXPIRED_DAYS", "40")
    workers.context.context.cache_clear()
    sweeper.prune()
    assert rows(db, player, operator) == before
    # The defaults, on the workers' own timer: the old rows go, the rest stay.
    monkeypatch.delenv("DDZ_KEEP_KEYS_DAYS")
    monkeypatch.delenv("DDZ_KEEP_EXPIRED_DAYS")
    workers.context.context.cache_clear()
    stop = threading.Event()
    thread = sweeper.run_periodically(stop)
    try:
        deadline = time.monotonic() + 20
        while rows(db, player, operator)["console_sessions"] != ["live", "new"]:
            assert time.monotonic() < deadline, rows(db, player, operator)
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert rows(db, player, operator) == {
        "idempotency_keys": ["new"],
        "creation_keys": ["new"],
        "tokens": ["never", "new"],
        "console_sessions": ["live", "new"],
    }
    # A player's working token is untouched: it still signs requests.
    _, token = new_player(api, "still")
    assert (
        api.get("/v1/me/matches", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    )
