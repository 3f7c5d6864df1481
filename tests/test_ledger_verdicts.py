"""The ledger's stored verdicts (docs/operations.md, "Stored verdicts"), with real RQ
workers (burst mode, in this process) on PostgreSQL and Redis: kept current without anyone
asking (settled hands without one, settled before verdicts were kept, are found on the
workers' timer and checked in the background a batch at a time, each batch enqueuing the
next); and read, and the full check started, through the API's
``/v1/admin/ledger/check``."""

from __future__ import annotations

import re

import pytest
from api_support import OP, bearer
from handplay import add_operator
from jobs import bot_match, drain, run_burst
from store_support import book_wrong_movement

from service.app import audit, work
from service.cli import main
from workers import sweeper

CHECK = "/v1/admin/ledger/check"

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


def sample(api, pattern: str) -> float:
    """The value of the sample of ``/metrics`` that ``pattern`` names (0 when none)."""
    text = api.get("/metrics").get_data(as_text=True)
    found = re.search(rf"^{pattern} (\S+)$", text, re.M)
    return 0.0 if found is None else float(found.group(1))


def unchecked(api) -> float:
    return sample(api, "ddz_ledger_unchecked_hands")


CHECKS_RUN = r'ddz_job_duration_seconds_count\{kind="check_unverdicted"\}'


def test_hands_without_a_verdict_are_checked_in_the_background_batch_by_batch(
    api, db, rconn, jobs_env, monkeypatch
):
    hands = [settled_hand(api, rconn) for _ in range(3)]
    assert all(verdict(db, m) == [] for m in hands)  # each checked as it was settled
    assert sweeper.find_unverdicted() == 0  # nothing to check: no job
    # As before verdicts were kept: none stored; and one hand's ledger is wrong, though
    # every movement balances (ten moved from seat 1 to seat 0).
    db.execute("DELETE FROM ledger_verdicts WHERE match_id = ANY(%s::uuid[])", (hands,))
    wrong = hands[1]
    book_wrong_movement(db, wrong)
    assert unchecked(api) == 3
    # One hand a batch: the workers' timer enqueues the first, and each enqueues the next.
    monkeypatch.setattr(audit, "BATCH", 1)
    assert sweeper.find_unverdicted() == 1
    assert sweeper.find_unverdicted() == 0  # the job waiting is left alone
    run = sample(api, CHECKS_RUN)
    run_burst(rconn)
    assert sample(api, CHECKS_RUN) - run == 3  # a job a hand
    assert unchecked(api) == 0
    assert verdict(db, hands[0]) == [] and verdict(db, hands[2]) == []
    problems = verdict(db, wrong)
    assert problems and all(p.startswith(f"match {wrong} seat ") for p in problems)
    assert sample(api, "ddz_ledger_check_ok") == 0
    # Checked: nothing more to check.
    assert sweeper.find_unverdicted() == 0


def operator_token(name: str, role: str, capsys) -> dict[str, str]:
    add_operator(name, role)
    capsys.readouterr()
    assert main(["operator", "token", name]) == 0
    return bearer(capsys.readouterr().out.strip())


def test_the_api_reads_stored_verdicts_and_an_admin_starts_the_full_check(
    api, db, rconn, jobs_env, capsys, monkeypatch
):
    ada, otto = operator_token("ada", "admin", capsys), operator_token("otto", "auditor", capsys)
    hands = [settled_hand(api, rconn) for _ in range(2)]
    check = api.get(CHECK, headers=otto).json
    # The module's other test may have left a failing hand: these two pass.
    failing = check["failing"]
    assert not any(m in p for m in hands for p in check["problems"])
    assert check["ok"] == (failing == 0)
    assert check["matches"] == check["checked"] >= 2 and check["unchecked"] == 0
    assert check["total"] == "0.00" and check["entries"] > 0
    assert check["fully_checked_at"] is None and check["full_check"] is None
    # A wrong movement that balances, and a verdict lost: the GET reads what is stored, it
    # does not recompute (the hand still passes, and one is unchecked).
    wrong = hands[0]
    book_wrong_movement(db, wrong)
    db.execute("DELETE FROM ledger_verdicts WHERE match_id = %s", (hands[1],))
    check = api.get(CHECK, headers=OP).json
    assert check["failing"] == failing and not any(wrong in p for p in check["problems"])
    assert check["unchecked"] == 1 and check["checked"] == check["matches"] - 1

    # An auditor reads only; a player may do neither.
    r = api.post(CHECK, headers=otto)
    assert r.status_code == 403 and r.json["code"] == "admin_required"
    player = bearer(api.post("/v1/players", json={"name": "nosy"}).json["token"])
    assert api.post(CHECK, headers=player).json["code"] == "operator_required"
    assert api.get(CHECK, headers=player).status_code == 403
    assert api.get(CHECK, headers=OP).json["full_check"] is None  # nothing was started

    # An admin starts it: 202, where to follow it, and a second one waits its turn.
    r = api.post(CHECK, headers=ada)
    assert r.status_code == 202 and r.headers["Location"].endswith(CHECK)
    started = r.json
    assert started["requested_by"] == "ada" and started["running"]
    assert started["done"] == 0 and started["finished_at"] is None
    r = api.post(CHECK, headers=OP)
    assert r.status_code == 409 and r.json["code"] == "ledger_check_running"
    assert r.json["check_id"] == started["check_id"]
    assert f"full check {started['check_id']} is running" in r.json["detail"]
    assert api.get(CHECK, headers=otto).json["full_check"] == started
    trail = db.execute(
        "SELECT operator, action, via, subject FROM audit_trail ORDER BY audit_id DESC LIMIT 1"
    ).fetchone()
    assert trail == ("ada", "ledger_check", "api", f"full check {started['check_id']}")

    # A job a batch (one hand a batch here), each enqueuing the next behind the games'
    # jobs: the progress moves batch by batch.
    monkeypatch.setattr(audit, "BATCH", 1)
    run_burst(rconn, max_jobs=1)
    progress = api.get(CHECK, headers=otto).json["full_check"]
    assert progress["running"] and progress["done"] == 1
    assert progress["hands"] == check["matches"] and progress["finished_at"] is None
    # Redis loses its next batch: the workers' sweep finds the check and goes on.
    rconn.flushdb()
    assert sweeper.sweep()[work.CHECK_LEDGER] == 1
    run_burst(rconn)
    check = api.get(CHECK, headers=otto).json
    done = check["full_check"]
    assert done["check_id"] == started["check_id"] and not done["running"]
    assert done["done"] == done["hands"] == check["matches"]
    assert done["failing"] == check["failing"] == failing + 1
    assert check["fully_checked_at"] == done["finished_at"] is not None
    assert not check["ok"] and check["unchecked"] == 0
    assert any(p.startswith(f"match {wrong} seat ") for p in check["problems"])
    # Finished: another may start.
    assert api.post(CHECK, headers=ada).status_code == 202
