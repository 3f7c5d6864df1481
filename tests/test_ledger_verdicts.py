"""The ledger's stored verdicts kept current without anyone asking (docs/operations.md,
"Stored verdicts"): settled hands without one (settled before verdicts were kept, or
written by ``ddz rebuild``) are found by the workers' sweep and checked in the background
a batch at a time, each batch enqueuing the next, with real RQ workers (burst mode, in this
process) on PostgreSQL and Redis."""

from __future__ import annotations

import re

import pytest
from api_support import OP
from jobs import bot_match, drain, run_burst

from service.app import audit, work
from workers import sweeper

# Slow: plays hands through real workers (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


def settled_hand(api, rconn) -> str:
    match_id = bot_match(api)
    drain(
        rconn,
        until=lambda: api.get(f"/v1/matches/{match_id}/settlement", headers=OP).status_code == 200,
    )
    return match_id


def verdict(db, match_id: str) -> list[str] | None:
    row = db.execute(
        "SELECT problems FROM ledger_verdicts WHERE match_id = %s", (match_id,)
    ).fetchone()
    return None if row is None else row[0]


def unchecked(api) -> float:
    text = api.get("/metrics").get_data(as_text=True)
    return float(re.search(r"^ddz_ledger_unchecked_hands (\S+)$", text, re.M).group(1))


def test_hands_without_a_verdict_are_checked_in_the_background_batch_by_batch(
    api, db, rconn, jobs_env, monkeypatch
):
    hands = [settled_hand(api, rconn) for _ in range(3)]
    assert all(verdict(db, m) == [] for m in hands)  # each checked as it was settled
    assert sweeper.sweep()[work.CHECK_UNVERDICTED] == 0  # nothing to check: no job
    # As before verdicts were kept: none stored; and one hand's ledger is wrong, though
    # every movement balances (ten moved from seat 1 to seat 0).
    db.execute("DELETE FROM ledger_verdicts WHERE match_id = ANY(%s::uuid[])", (hands,))
    wrong = hands[1]
    db.execute(
        "INSERT INTO ledger_entries (match_id, movement, account, seat, kind, amount)"
        " SELECT match_id, max(movement) + 1, 'bots', s, 'stake',"
        "  CASE s WHEN 0 THEN 10 ELSE -10 END"
        " FROM ledger_entries, (VALUES (0), (1)) AS seats (s)"
        " WHERE match_id = %s GROUP BY match_id, s",
        (wrong,),
    )
    assert unchecked(api) == 3
    # One hand a batch: the sweep enqueues the first, and each enqueues the next.
    monkeypatch.setattr(audit, "BATCH", 1)
    assert sweeper.sweep()[work.CHECK_UNVERDICTED] == 1
    assert sweeper.sweep()[work.CHECK_UNVERDICTED] == 0  # the job waiting is left alone
    run_burst(rconn)
    assert unchecked(api) == 0
    assert verdict(db, hands[0]) == [] and verdict(db, hands[2]) == []
    problems = verdict(db, wrong)
    assert problems and all(p.startswith(f"match {wrong} seat ") for p in problems)
    text = api.get("/metrics").get_data(as_text=True)
    assert re.search(r"^ddz_ledger_check_ok 0\.0$", text, re.M)
    assert re.search(
        r'^ddz_job_duration_seconds_count\{kind="check_unverdicted"\} 3\.0$', text, re.M
    )
    # Checked: the sweep finds nothing more to check.
    assert sweeper.sweep()[work.CHECK_UNVERDICTED] == 0
