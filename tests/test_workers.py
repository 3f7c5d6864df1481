"""Integration tests of the RQ workers (bot turns, turn timeouts, settlement, the
sweeper) on a real PostgreSQL (the server of ``servers.py``) and a real Redis.

The jobs run in this process (``ddz worker``'s class, a ``rq.SimpleWorker``, in burst mode) and read
DATABASE_URL / REDIS_URL from the environment through ``workers.context.context()``.

Isolation: a PostgreSQL database and a Redis server of this module's own (the fixtures of
``jobs.py``, which says why).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from decimal import Decimal
from fractions import Fraction

import pytest
import redis as redis_lib
from api_support import bearer
from jobs import (
    assert_settled_once,
    bot_match,
    drain,
    events,
    failed_jobs,
    human_match,
    is_settled,
    match_view,
    money,
    phase,
    run_burst,
)
from rq import SimpleWorker
from rq.job import Job, JobStatus

import workers.context
import workers.jobs
from service.app import work
from workers import sweeper
from workers.worker import JobWorker

# Slow: plays hands through real workers and waits for deadlines (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

#: The first factors of M, without bombs (docs/rules.md §5).
PLAIN_FACTORS = {
    "marked_joker": Fraction(2),
    "first_bid_three": Fraction(4, 3),
    "show_hand": Fraction(2),
}


# --- running jobs in this process ------------------------------------------------------


def step_until(conn: redis_lib.Redis, stop, limit: int = 1000) -> None:
    """Runs queued jobs one at a time, and stops before the job ``stop(job_id)`` names."""
    q = work.queue(conn)
    for _ in range(limit):
        ids = q.get_job_ids()
        assert ids, "the queue emptied before the awaited job"
        if stop(ids[0]):
            return
        JobWorker([q], connection=conn).work(burst=True, max_jobs=1, logging_level="WARNING")
    raise AssertionError("the awaited job never came")


NOTHING = {"bot_turn": 0, "turn_timeout": 0, "settle_match": 0}


def sweep_for(conn: redis_lib.Redis, *match_ids: str) -> dict[str, int]:
    """``sweeper.sweep()``, counting what it enqueued for these matches; what it enqueued
    for other matches (left unfinished by other tests of this module) is taken back."""
    q = work.queue(conn)
    before = set(q.get_job_ids())
    sweeper.sweep()
    found = dict(NOTHING)
    for job_id in q.get_job_ids():
        if job_id in before:
            continue
        job = Job.fetch(job_id, connection=conn)
        if job.args[0] in match_ids:
            found[job.func_name.rsplit(".", 1)[1]] += 1
        else:
            job.delete()
            conn.delete(f"ddz:enqueued:{job_id}")
    return found


# --- what is checked after a hand --------------------------------------------------------


def plain_multiplier(factors: dict) -> Fraction:
    """M without bomb factors (docs/rules.md §5)."""
    m = Fraction(1)
    for name, factor in PLAIN_FACTORS.items():
        if factors[name]:
            m *= factor
    if factors["report"] == "play":
        m *= 2
    return m


def cents(x: Fraction) -> Decimal:
    """Toward zero, to the cent."""
    return Decimal(int(x * 100)) / 100


# --- 1. an all-bot match, played and settled by the worker ------------------------------


def test_all_bot_match_plays_to_the_end_and_settles(api, db, rconn, jobs_env):
    match_id = bot_match(api, unit="2.00", rake="0.05")
    assert len(work.queue(rconn)) == 1, "dealing enqueues the first bot turn"

    drain(rconn, until=lambda: is_settled(api, match_id))

    assert phase(api, match_id) == "ended"
    s = assert_settled_once(api, db, match_id)
    assert failed_jobs(rconn) == []
    assert s["first_disconnect"] is None and all(money(p) == 0 for p in s["penalty"])
    assert s["winner"] in ("landlord", "farmers")
    # Zero-sum, with the system cut to the house.
    assert sum(money(x) for x in s["net"]) + money(s["house"]) == 0
    assert money(s["house"]) == sum(money(x) for x in s["rake"])
    # Every winner's gain is cut (a hand of 报到 then 打 that the farmers win moves nothing).
    assert (money(s["house"]) > 0) == any(money(x) > 0 for x in s["after_cap"])
    # Every decision after the deal was the system's.
    decisions = [e for e in events(api, match_id) if "by" in e["payload"]]
    assert decisions and all(e["payload"]["by"] == "bot" for e in decisions)
    # Nothing is left to do: no job queued, and the sweeper finds nothing.
    assert len(work.queue(rconn)) == 0
    assert sweep_for(rconn, match_id) == NOTHING


def test_redis_forgets_a_hands_jobs_within_minutes(api, rconn, jobs_env):
    """Redis carries work, not history: every key a played hand's jobs left (the job, its
    result, the mark that it was enqueued) expires within the marks' 10 minutes, so that
    what Redis holds follows the traffic of the last minutes, not of the day."""
    match_id = bot_match(api)
    drain(rconn, until=lambda: is_settled(api, match_id))
    left = {key.decode(): rconn.ttl(key) for key in rconn.scan_iter(f"*{match_id}*")}
    assert any(key.startswith("ddz:enqueued:") for key in left)
    assert any(key.startswith("rq:results:") for key in left), "a finished job's result"
    for key, ttl in left.items():
        assert 0 < ttl <= 600, f"{key} expires in {ttl} s"


@pytest.mark.parametrize("level", ["easy", "hard"])
def test_a_match_at_each_bot_level_plays_to_the_end(api, db, rconn, jobs_env, level):
    match_id = bot_match(api, bot_level=level)
    drain(rconn, until=lambda: is_settled(api, match_id))
    assert phase(api, match_id) == "ended"
    assert failed_jobs(rconn) == []
    assert_settled_once(api, db, match_id)


# --- 2. disconnects: 系统代打 and the penalty ---------------------------------------------


def disconnects_of(api, match_id, seat) -> list[dict]:
    return [
        e
        for e in events(api, match_id)
        if e["type"] == "disconnect" and e["payload"]["seat"] == seat
    ]


def first_event(api, match_id, kind, **payload):
    for e in events(api, match_id):
        if e["type"] == kind and all(e["payload"].get(k) == v for k, v in payload.items()):
            return e
    return None


def test_missed_deadline_system_plays_the_seat_and_first_disconnect_pays_once(
    api, db, rconn, jobs_env
):
    match_id, players = human_match(api, humans=2, turn_seconds=1, unit="2.00")

    # Run until one of the two players misses a deadline.
    drain(rconn, until=lambda: first_event(api, match_id, "disconnect") is not None)
    first = first_event(api, match_id, "disconnect")
    assert first["payload"]["reason"] == "deadline"
    late = first["payload"]["seat"]
    other = 1 - late
    late_token, other_token = players[late][1], players[other][1]
    assert match_view(api, match_id)["seats"][late]["disconnected"] is True

    # The system played the late seat's turn at once (系统代打): by="bot".
    after = events(api, match_id, first["version"])
    assert after[0]["payload"]["seat"] == late and after[0]["payload"]["by"] == "bot", after[0]
    assert phase(api, match_id) != "ended"

    # The other player leaves: disconnected too, but the penalty stays the first seat's.
    assert match_view(api, match_id)["seats"][other]["disconnected"] is False
    r = api.post(f"/v1/matches/{match_id}/leave", headers=bearer(other_token))
    assert r.status_code == 200, r.json
    assert [(e["type"], e["payload"]) for e in r.json["events"]] == [
        ("disconnect", {"seat": other, "reason": "left"})
    ]
    # The late player takes control back: the seat is theirs again; the penalty stands.
    r = api.post(
        f"/v1/matches/{match_id}/commands", json={"action": "resume"}, headers=bearer(late_token)
    )
    assert r.status_code == 200, r.json
    assert [e["type"] for e in r.json["events"]] == ["resume"]
    assert match_view(api, match_id, bearer(late_token))["seats"][late]["disconnected"] is False
    resumed_at = r.json["version"]
    # Until the late player's next turn times out again, the system does not act for it.
    drain(
        rconn,
        until=lambda: is_settled(api, match_id) or len(disconnects_of(api, match_id, late)) > 1,
    )
    between = [
        e
        for e in events(api, match_id, resumed_at)
        if e["payload"].get("seat") == late and "by" in e["payload"]
    ]
    cut = [e["version"] for e in events(api, match_id, resumed_at) if e["type"] == "disconnect"]
    assert all(e["payload"]["by"] == "bot" and cut and e["version"] > cut[0] for e in between), (
        between
    )

    drain(rconn, until=lambda: is_settled(api, match_id))
    s = assert_settled_once(api, db, match_id)
    assert failed_jobs(rconn) == []

    found = events(api, match_id)
    disconnects = [e["payload"] for e in found if e["type"] == "disconnect"]
    assert disconnects[:2] == [
        {"seat": late, "reason": "deadline"},
        {"seat": other, "reason": "left"},
    ]
    assert s["first_disconnect"] == late
    penalty = cents(3 * Fraction(2) * s["bid"] * plain_multiplier(s["factors"]))
    assert money(s["penalty"][late]) == penalty > 0
    assert [money(p) for seat, p in enumerate(s["penalty"]) if seat != late] == [0, 0, 0]
    assert money(s["net"][late]) == money(s["after_cap"][late]) - money(s["rake"][late]) - penalty
    assert money(s["house"]) == penalty + sum(money(x) for x in s["rake"])

    # Each player's ledger: the late player has exactly one penalty entry, the other none.
    for seat, (player_id, token) in enumerate(players):
        r = api.get(f"/v1/players/{player_id}/ledger", headers=bearer(token))
        assert r.status_code == 200, r.json
        mine = [e for e in r.json["entries"] if e["match_id"] == match_id]
        penalties = [money(e["amount"]) for e in mine if e["kind"] == "penalty"]
        assert penalties == ([-penalty] if seat == late else [])
        assert sum(money(e["amount"]) for e in mine) == money(s["net"][seat])


def test_leave_then_a_deadline_miss_the_leaver_pays_the_penalty(api, db, rconn, jobs_env):
    """The first disconnect is a leave (POST /leave); the other player later misses a
    deadline: the penalty is the leaver's only."""
    match_id, players = human_match(api, humans=2, turn_seconds=1)
    r = api.post(f"/v1/matches/{match_id}/leave", headers=bearer(players[1][1]))
    assert r.status_code == 200, r.json
    assert match_view(api, match_id)["seats"][1]["disconnected"] is True
    drain(rconn, until=lambda: is_settled(api, match_id))
    s = assert_settled_once(api, db, match_id)
    disconnects = [e["payload"] for e in events(api, match_id) if e["type"] == "disconnect"]
    assert disconnects == [{"seat": 1, "reason": "left"}, {"seat": 0, "reason": "deadline"}]
    assert s["first_disconnect"] == 1
    penalty = cents(3 * s["bid"] * plain_multiplier(s["factors"]))
    assert [money(p) for p in s["penalty"]] == [0, penalty, 0, 0]
    assert failed_jobs(rconn) == []


# --- 3. the settlement job, twice and at once ------------------------------------------


def ended_unsettled_bot_match(api, rconn, queued: bool = True) -> str:
    """An all-bot hand played to its end by the worker, not settled: its settlement job
    queued (not run), or with ``queued=False`` lost (its enqueue mark set, no job)."""
    match_id = bot_match(api)
    mark = f"ddz:enqueued:settle-{match_id}"
    rconn.set(mark, 1)
    run_burst(rconn)  # only this hand's bot turns (deadlines wait for the scan)
    assert phase(api, match_id) == "ended" and not is_settled(api, match_id)
    if queued:
        rconn.delete(mark)
        assert work.enqueue_once(rconn, f"settle-{match_id}", "settle_match", match_id)
    return match_id


def test_settlement_job_run_twice_pays_once(api, db, rconn, jobs_env):
    match_id = ended_unsettled_bot_match(api, rconn)
    assert workers.jobs.settle_match(match_id) == "settled"
    assert workers.jobs.settle_match(match_id) == "settled already"
    # The queued job runs too, and a second job under another id (bypassing the mark).
    work.queue(rconn).enqueue("workers.jobs.settle_match", match_id, job_id=f"again-{match_id}")
    drain(rconn, until=lambda: is_settled(api, match_id))
    assert Job.fetch(f"again-{match_id}", connection=rconn).return_value() == "settled already"
    assert_settled_once(api, db, match_id)
    assert failed_jobs(rconn) == []


@pytest.mark.parametrize("runners", [2, 4])
def test_settlement_jobs_at_once_pay_once(api, db, rconn, jobs_env, runners):
    match_id = ended_unsettled_bot_match(api, rconn, queued=False)  # only the threads settle
    barrier = threading.Barrier(runners)
    answers, errors = [], []

    def run():
        try:
            barrier.wait(10)
            answers.append(workers.jobs.settle_match(match_id))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=run) for _ in range(runners)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert sorted(answers) == ["settled"] + ["settled already"] * (runners - 1)
    assert_settled_once(api, db, match_id)


# --- 4. recovery: lost jobs, a killed worker, a flushed Redis ---------------------------


def test_sweep_leaves_live_work_alone(api, rconn, jobs_env):
    match_id = bot_match(api)
    q = work.queue(rconn)
    assert q.get_job_ids() == [f"bot-turn-{match_id}-6"]
    assert sweep_for(rconn, match_id)["bot_turn"] == 0
    assert q.get_job_ids() == [f"bot-turn-{match_id}-6"]


def test_lost_bot_turn_job_is_found_by_the_sweeper(api, db, rconn, jobs_env):
    """A worker died with a bot turn: the job is gone but its enqueue mark stays, so no one
    would enqueue it again. The sweep does, and the hand finishes."""
    match_id = bot_match(api)
    run_burst(rconn, max_jobs=5)
    q = work.queue(rconn)
    (job_id,) = q.get_job_ids()
    assert job_id.startswith(f"bot-turn-{match_id}-")
    Job.fetch(job_id, connection=rconn).delete()
    assert rconn.exists(f"ddz:enqueued:{job_id}")
    run_burst(rconn)
    assert phase(api, match_id) != "ended", "without the sweep, the hand is stuck"

    assert sweep_for(rconn, match_id) == {**NOTHING, "bot_turn": 1}
    assert sweep_for(rconn, match_id) == NOTHING, "a second sweep adds nothing"
    drain(rconn, until=lambda: is_settled(api, match_id))
    assert_settled_once(api, db, match_id)
    assert failed_jobs(rconn) == []


def start_job(conn: redis_lib.Redis, job_id: str, alive: bool) -> SimpleWorker:
    """What a worker leaves while it runs the job (RQ's own steps: dequeue, execution,
    started): with ``alive`` its heartbeat goes on, as a live worker's does; without, the
    worker was killed mid-job and its heartbeat lapsed."""
    q = work.queue(conn)
    worker = SimpleWorker([q], connection=conn)
    job, _ = type(q).dequeue_any([q], timeout=None, connection=conn)
    assert job.id == job_id, "the job to start is not the first in the queue"
    worker.prepare_execution(job)
    worker.prepare_job_execution(job, remove_from_intermediate_queue=True)
    assert job.get_status() == JobStatus.STARTED
    if alive:
        work.beat(conn, worker.name, lasting=60)
    return worker


def bot_match_under_way(api, rconn) -> str:
    """A bot match whose first bot turn has been run: the one job queued is the next bot
    turn, whatever the deal (a few more turns could end the hand, and queue its settlement
    instead: a first bid of 3, then 摊打, then 报到 without play)."""
    match_id = bot_match(api)
    run_burst(rconn, max_jobs=1)
    return match_id


def test_bot_turn_started_by_a_worker_that_died_is_run_again(api, db, rconn, jobs_env):
    """A started job is left alone while its worker's heartbeat lives, however long it
    takes; once the heartbeat is gone (the worker was killed), the next deadline scan's
    rescue enqueues it again, without waiting for a sweep."""
    match_id = bot_match_under_way(api, rconn)
    (job_id,) = work.queue(rconn).get_job_ids()

    worker = start_job(rconn, job_id, alive=True)
    rconn.hset(Job.key_for(job_id), "started_at", "2000-01-01T00:00:00.000000Z")  # a slow one
    assert sweeper.rescue_started() == 0
    assert sweep_for(rconn, match_id)["bot_turn"] == 0
    assert work.queue(rconn).get_job_ids() == []

    work.stopped(rconn, worker.name)  # killed: its heartbeat lapses
    assert sweeper.rescue_started() == 1
    assert work.queue(rconn).get_job_ids() == [job_id]
    assert sweeper.rescue_started() == 0, "a second scan (another worker's) enqueues it once"
    drain(rconn, until=lambda: is_settled(api, match_id))
    assert_settled_once(api, db, match_id)
    assert failed_jobs(rconn) == []


def test_bot_turn_dequeued_by_a_worker_that_died_is_run_again(api, db, rconn, jobs_env):
    """A worker took the bot turn off the queue (RQ moves it to the queue's intermediate
    list) and was killed before it started it: the job is in no queue a worker reads, its
    status still says queued. The sweep must enqueue the turn again and the hand finish
    (RQ's own clean-up of the intermediate list only comes with a worker's maintenance,
    every 10 minutes, and only for a job seen there a minute before)."""
    match_id = bot_match_under_way(api, rconn)
    q = work.queue(rconn)
    (job_id,) = q.get_job_ids()
    job, _ = type(q).dequeue_any([q], timeout=None, connection=rconn)  # what a worker does first
    assert job.id == job_id and q.get_job_ids() == [] and job.get_status() == JobStatus.QUEUED
    assert rconn.lrange(f"{q.key}:intermediate", 0, -1) == [job_id.encode()]
    # ... and the worker is killed here.

    found = sweep_for(rconn, match_id)
    drain(rconn, until=lambda: True)
    assert found == {**NOTHING, "bot_turn": 1}, (
        f"the sweep takes the lost turn for live (status {job.get_status()}, in no queue a worker"
        f" reads) and enqueues nothing: the hand is stuck at version {match_view(api, match_id)['version']}"
    )
    drain(rconn, until=lambda: is_settled(api, match_id))
    assert_settled_once(api, db, match_id)


def test_bot_turn_recovered_from_a_dead_workers_hands_is_not_reported_failed_later(
    api, db, rconn, jobs_env
):
    """After the sweep re-enqueued (and a worker ran) a turn a dead worker had taken off
    the queue, nothing may later report that turn as failed: RQ's maintenance marks a job
    failed ("stuck in intermediate queue") when its id is still in the intermediate list
    a minute after a worker first saw it there."""
    match_id = bot_match_under_way(api, rconn)
    q = work.queue(rconn)
    (job_id,) = q.get_job_ids()
    type(q).dequeue_any([q], timeout=None, connection=rconn)  # taken, then the worker is killed
    assert sweep_for(rconn, match_id)["bot_turn"] == 1
    drain(rconn, until=lambda: is_settled(api, match_id))
    assert Job.fetch(job_id, connection=rconn).get_status() == JobStatus.FINISHED
    left = rconn.lrange(f"{q.key}:intermediate", 0, -1)
    # A worker's maintenance, more than a minute after one first saw the id there.
    first_seen = f"{q.key}:intermediate:first_seen:{job_id}"
    if rconn.exists(first_seen):
        rconn.set(first_seen, time.time() - 120)
    run_burst(rconn)
    assert failed_jobs(rconn) == [], (
        f"the recovery left the job's id in the intermediate list: {left}"
    )
    assert Job.fetch(job_id, connection=rconn).get_status() == JobStatus.FINISHED


def test_a_passed_deadline_is_found_by_the_scan_and_the_seat_taken_over(api, db, rconn, jobs_env):
    """A player's deadline is a row in PostgreSQL, not a job in Redis: nothing waits in any
    queue before it passes; once it has, the workers' scan enqueues the timeout and the
    seat is taken over."""
    match_id, _ = human_match(api, humans=4, turn_seconds=1)
    version = match_view(api, match_id)["version"]
    assert len(work.queue(rconn)) == 0
    assert sweeper.scan_deadlines() == 0, "nothing is due before the deadline"
    time.sleep(max(0.0, earliest_deadline(db, match_id) - time.time()) + 0.1)

    assert sweeper.scan_deadlines() == 1
    assert sweeper.scan_deadlines() == 0, "a second scan (another worker's) enqueues it once"
    assert work.queue(rconn).get_job_ids() == [f"timeout-{match_id}-{version}"]
    run_burst(rconn)
    assert first_event(api, match_id, "disconnect")["payload"]["reason"] == "deadline"


def test_worker_killed_during_settlement(api, db, rconn, jobs_env):
    """The hand ended but the worker died with its settlement (the transaction rolled back):
    the sweep enqueues settle_match again, and the hand is settled once."""
    match_id = ended_unsettled_bot_match(api, rconn)
    job_id = f"settle-{match_id}"
    start_job(rconn, job_id, alive=False)
    run_burst(rconn)
    assert not is_settled(api, match_id)
    assert db.execute(
        "SELECT settled, status FROM matches WHERE match_id = %s", (uuid.UUID(match_id),)
    ).fetchone() == (False, "ended")

    assert sweep_for(rconn, match_id) == {**NOTHING, "settle_match": 1}
    drain(rconn, until=lambda: is_settled(api, match_id))
    assert_settled_once(api, db, match_id)
    assert sweep_for(rconn, match_id) == NOTHING


def test_settlement_job_lost_with_its_mark(api, db, rconn, jobs_env):
    match_id = ended_unsettled_bot_match(api, rconn, queued=False)
    assert sweep_for(rconn, match_id) == {**NOTHING, "settle_match": 1}
    drain(rconn, until=lambda: is_settled(api, match_id))
    assert_settled_once(api, db, match_id)


def test_redis_flushed_mid_hand_sweep_finds_the_work(api, db, rconn, jobs_env):
    """FLUSHDB loses every queue, job and mark: the sweep finds each match's work from
    PostgreSQL (a bot turn, an overdue deadline, a settlement) and every hand finishes,
    nothing lost or doubled."""
    human, players = human_match(api, humans=1, turn_seconds=1)  # a player to act, deadline to come
    drain(rconn, until=lambda: match_view(api, human)["turn"] == 0 and not len(work.queue(rconn)))
    ended = ended_unsettled_bot_match(api, rconn, queued=False)  # ended, not settled
    bots = bot_match(api)  # mid-play
    step_until(
        rconn, lambda job_id: job_id.startswith("settle-") or int(job_id.rsplit("-", 1)[1]) > 14
    )
    assert phase(api, bots) == "playing" and phase(api, human) != "ended"
    assert match_view(api, human)["seats"][0]["disconnected"] is False

    before = {m: match_view(api, m)["version"] for m in (bots, ended, human)}
    rconn.flushdb()
    run_burst(rconn)
    assert {m: match_view(api, m)["version"] for m in (bots, ended, human)} == before, (
        "nothing runs without the sweep"
    )

    time.sleep(max(0.0, earliest_deadline(db, human) - time.time()) + 0.1)
    assert sweep_for(rconn, bots, ended, human) == {
        "bot_turn": 1,
        "turn_timeout": 1,
        "settle_match": 1,
    }
    drain(rconn, until=lambda: all(is_settled(api, m) for m in (bots, ended, human)))
    for m in (bots, ended, human):
        assert_settled_once(api, db, m)
    assert first_event(api, human, "disconnect")["payload"] == {"seat": 0, "reason": "deadline"}
    assert failed_jobs(rconn) == []


def test_a_half_flushed_redis_does_not_end_the_sweep(api, db, rconn, jobs_env, caplog):
    """Three hands whose bot turn is lost: one started by a worker that died, whose
    execution record a partial flush took (RQ's own delete of the job raises "Execution …
    not found"); one whose job record is broken beyond use; one whose job is simply gone.
    The sweep enqueues the first and the third, tells of the second in one line and skips
    it; once its record is gone, the next sweep enqueues it, and every hand finishes."""
    died, broken, lost = bot_match(api), bot_match(api), bot_match(api)
    q = work.queue(rconn)
    died_id, broken_id, lost_id = q.get_job_ids()
    start_job(rconn, died_id, alive=False)
    assert rconn.delete(*rconn.keys(f"rq:execution:{died_id}:*")) == 1
    for job_id in (broken_id, lost_id):
        Job.fetch(job_id, connection=rconn).delete()
    rconn.set(Job.key_for(broken_id), "not a job")

    caplog.set_level(logging.INFO, logger="workers")
    assert sweep_for(rconn, died, broken, lost) == {**NOTHING, "bot_turn": 2}
    assert set(q.get_job_ids()) >= {died_id, lost_id}
    skipped = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(skipped) == 1 and broken_id in skipped[0].getMessage(), [
        r.getMessage() for r in caplog.records
    ]

    rconn.delete(Job.key_for(broken_id))
    assert sweep_for(rconn, died, broken, lost) == {**NOTHING, "bot_turn": 1}
    drain(rconn, until=lambda: all(is_settled(api, m) for m in (died, broken, lost)))
    for m in (died, broken, lost):
        assert_settled_once(api, db, m)
    assert failed_jobs(rconn) == []


def test_the_worker_log_has_one_line_per_bot_turn_and_settlement_and_no_card(
    api, rconn, jobs_env, caplog
):
    caplog.set_level(logging.INFO, logger="workers")
    match_id = bot_match(api, unit="1.00")
    drain(rconn, until=lambda: is_settled(api, match_id))
    # Only this match's lines: the drain may also finish what earlier tests of this
    # module's database left to the system (the worker under xdist runs them in any order).
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("workers") and f"match {match_id} " in r.getMessage()
    ]
    found = events(api, match_id)
    decisions = [e for e in found if e["payload"].get("by") == "bot"]
    turns = [line for line in lines if line.startswith("bot turn")]
    assert len(turns) == len(decisions) > 0
    for line, e in zip(turns, decisions):
        assert line.startswith(
            f"bot turn: match {match_id} v{e['version'] - 1} seat {e['payload']['seat']} "
        ), line
        if e["type"] == "play":
            count = len(e["payload"]["cards"])
            assert f" played {e['payload']['combination']} ({count} card" in line, line
    settled = found[-1]["payload"]
    assert (
        lines[-1]
        == f"settled: match {match_id} v{found[-1]['version'] - 1} net {' '.join(settled['net'])} house {settled['house']}"
    )
    assert len(lines) == len(decisions) + 1, "one line each, nothing else"
    card = re.compile(r"\b(?:[SHDC][3-9TJQKA2]|[BR]J)\b")
    assert [line for line in lines if card.search(line)] == []


def earliest_deadline(db, match_id: str) -> float:
    (due,) = db.execute(
        "SELECT deadline FROM matches WHERE match_id = %s", (uuid.UUID(match_id),)
    ).fetchone()
    return due.timestamp()


# --- 6. bot-turn dedup and stale jobs ---------------------------------------------------


def decisions_after(api, match_id: str, version: int) -> list[dict]:
    return [e for e in events(api, match_id, version) if "by" in e["payload"]]


def test_same_bot_turn_enqueued_twice_runs_once(api, rconn, jobs_env):
    match_id = bot_match(api)
    version = match_view(api, match_id)["version"]
    job_id = f"bot-turn-{match_id}-{version}"
    q = work.queue(rconn)
    assert q.get_job_ids() == [job_id]
    assert work.enqueue_once(rconn, job_id, "bot_turn", match_id, version) is False
    assert q.get_job_ids() == [job_id]

    # A copy of the job under another id (past the mark), both run; then the turn directly.
    q.enqueue("workers.jobs.bot_turn", match_id, version, job_id=f"copy-{job_id}")
    run_burst(rconn, max_jobs=2)
    assert Job.fetch(job_id, connection=rconn).return_value().endswith(f"at version {version}")
    assert Job.fetch(f"copy-{job_id}", connection=rconn).return_value() == "stale"
    assert workers.jobs.bot_turn(match_id, version) == "stale"
    found = events(api, match_id, version)
    assert [e["version"] for e in found] == list(range(version + 1, version + 1 + len(found)))
    assert len([e for e in found if e["version"] == version + 1]) == 1
    assert len(decisions_after(api, match_id, version)) == 1, (
        "one decision for the seat at that version"
    )


def test_same_bot_turn_run_at_once_by_two_threads_acts_once(api, rconn, jobs_env):
    match_id = bot_match(api)
    version = match_view(api, match_id)["version"]
    workers.context.context()  # built once, before the threads (a worker is one thread)
    barrier = threading.Barrier(2)
    answers = []

    def run():
        barrier.wait(10)
        answers.append(workers.jobs.bot_turn(match_id, version))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(answers) == 2
    assert sum(a.endswith(f"at version {version}") for a in answers) == 1, answers
    assert len(decisions_after(api, match_id, version)) == 1


def test_stale_bot_turn_does_nothing(api, rconn, jobs_env):
    match_id = bot_match(api)
    run_burst(rconn, max_jobs=4)
    version = match_view(api, match_id)["version"]
    for old in (1, 5, version - 1, version + 1):
        assert workers.jobs.bot_turn(match_id, old) == "stale"
    assert workers.jobs.bot_turn(str(uuid.uuid4()), 7) == "no such match"
    assert match_view(api, match_id)["version"] == version


def test_bot_turn_for_a_players_seat_does_nothing(api, rconn, jobs_env):
    match_id, players = human_match(api, humans=4, turn_seconds=60)
    view = match_view(api, match_id)
    assert workers.jobs.bot_turn(match_id, view["version"]) == "stale"
    assert workers.jobs.turn_timeout(match_id, view["version"]) == "not due yet"
    assert match_view(api, match_id)["version"] == view["version"]
    # Nothing is queued for a player's turn: its deadline waits in the database.
    assert len(work.queue(rconn)) == 0


# --- turn timeouts run a little early -------------------------------------------------


def test_turn_timeout_run_a_little_early_waits_for_the_deadline(api, rconn, jobs_env):
    """A worker's clock and the database's differ a little: a timeout that runs just
    before the deadline waits it out and takes the seat over, rather than leave it."""
    match_id, players = human_match(api, humans=4, turn_seconds=2)
    view = match_view(api, match_id)
    time.sleep(max(0.0, view_deadline(view) - time.time() - 1.0))
    assert workers.jobs.turn_timeout(match_id, view["version"]).startswith("disconnect")
    assert time.time() >= view_deadline(view) - 0.01
    assert first_event(api, match_id, "disconnect")["payload"]["reason"] == "deadline"


def view_deadline(view: dict) -> float:
    from datetime import datetime

    return datetime.fromisoformat(view["deadline"]).timestamp()
