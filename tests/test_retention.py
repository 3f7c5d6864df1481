"""Retention and archiving: what only serves a while is pruned by the workers' timer
(idempotency keys and creation keys by age, player tokens and console sessions by expiry,
each age a setting), and nothing younger than its age is touched; finished hands are
exported to an archive that ``ddz verify`` checks on its own, the ledger check included."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import threading
import time
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from api_support import OP
from jobs import bot_match, drain, new_player

import workers.context
from service.cli import main
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


def ddz(*arguments: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(list(arguments))
    return status, out.getvalue()


def test_settled_hands_archived_verify_with_their_ledger_and_a_changed_one_does_not(
    api, db, rconn, jobs_env, tmp_path
):
    played = [bot_match(api) for _ in range(2)]
    settled = lambda: all(  # noqa: E731
        api.get(f"/v1/matches/{m}/settlement", headers=OP).status_code == 200 for m in played
    )
    drain(rconn, until=settled)
    (cut,) = db.execute("SELECT max(settled_at) FROM settlements").fetchone()
    later = bot_match(api)  # settled after the cut: not archived
    drain(
        rconn,
        until=lambda: api.get(f"/v1/matches/{later}/settlement", headers=OP).status_code == 200,
    )
    archive = tmp_path / "hands.jsonl"
    before = (cut + timedelta(microseconds=1)).isoformat()
    status, out = ddz("archive", "--before", before, "--out", str(archive))
    assert status == 0, out
    lines = [json.loads(line) for line in archive.read_text().splitlines()]
    archived = {line["match_id"] for line in lines}
    assert set(played) <= archived and later not in archived
    status, out = ddz("verify", str(archive))
    assert status == 0 and out.startswith("OK: "), out
    (entries,) = db.execute(
        "SELECT count(*) FROM ledger_entries WHERE match_id = ANY(%s::uuid[])", (list(archived),)
    ).fetchone()
    assert f"{len(lines)} hands, {entries} ledger entries adding to 0.00" in out
    # The file alone is checked: a changed amount, a changed play.
    changed = [dict(line) for line in lines]
    first = changed[0]
    first["ledger"][0]["amount"] = str(Decimal(first["ledger"][0]["amount"]) + 1)
    (archive.parent / "changed.jsonl").write_text("".join(json.dumps(x) + "\n" for x in changed))
    status, out = ddz("verify", str(archive.parent / "changed.jsonl"))
    assert status == 1 and out.splitlines()[-1].startswith("FAILED: "), out
    assert f"line 1: match {first['match_id']} movement 0 adds to 1.00" in out
    assert "the ledger of the archive adds to 1.00, not 0.00" in out
