"""Deadlines and recovery, both from the ``matches`` table: PostgreSQL is the source of
truth and Redis only carries work.

- The deadline scan (every ``SCAN_SECONDS``) enqueues a turn timeout for each player
  whose deadline has passed.
- The sweep (at worker start, then every ``SWEEP_SECONDS``) finds work lost with Redis (a
  flush, a restart) or with a worker (killed mid-job) and enqueues it again: a bot or
  disconnected seat to act with no live job, an ended hand with no settlement.

Every worker process runs both on a timer of its own, so they go on while any worker
lives, whatever happens to Redis; two workers finding the same work enqueue it once.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta, timezone

import redis
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from .context import context
from .dispatch import enqueue_once, job_ids, queue

log = logging.getLogger(__name__)

SCAN_SECONDS = 1.0
SWEEP_SECONDS = 15.0
#: A job started longer ago than this is taken for lost with its worker (a turn takes ms).
STARTED_TIMEOUT = timedelta(seconds=60)


def job_is_live(connection: redis.Redis, job_id: str) -> bool:
    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return False
    status = job.get_status(refresh=False)
    if status == JobStatus.QUEUED:
        # A worker that died right after taking the job leaves it "queued" but in no
        # queue that a worker reads.
        return connection.lpos(queue(connection).key, job_id) is not None
    if status == JobStatus.STARTED:
        started = job.started_at
        if started is not None and started.tzinfo is None:
            started = started.replace(tzinfo=timezone.utc)
        return started is not None and datetime.now(timezone.utc) - started < STARTED_TIMEOUT
    return False


def ensure(connection: redis.Redis, job_id: str, function: str, *args) -> bool:
    """Enqueues the job unless a live one exists; returns whether it enqueued."""
    if job_is_live(connection, job_id):
        return False
    # A worker that died holding the job left its id in RQ's intermediate list, where RQ's
    # cleanup would later report the re-enqueued job failed.
    connection.lrem(f"{queue(connection).key}:intermediate", 0, job_id)
    connection.delete(f"ddz:enqueued:{job_id}")
    try:
        Job.fetch(job_id, connection=connection).delete()
    except NoSuchJobError:
        pass
    return enqueue_once(connection, job_id, function, *args)


def scan_deadlines() -> int:
    """Enqueues a turn timeout for every player whose deadline has passed."""
    ctx = context()
    with ctx.pool.connection() as conn:
        rows = conn.execute(
            "SELECT match_id, version FROM matches"
            " WHERE status = 'playing' AND NOT system_to_act AND deadline <= now()"
        ).fetchall()
    enqueued = 0
    for match_id, version in rows:
        match = str(match_id)
        enqueued += ensure(ctx.redis, job_ids(match, version)["turn_timeout"], "turn_timeout", match, version)
    return enqueued


def sweep() -> dict[str, int]:
    """Finds lost work and enqueues it; returns how many of each it enqueued."""
    ctx = context()
    found = {"bot_turn": 0, "settle_match": 0, "turn_timeout": scan_deadlines()}
    with ctx.pool.connection() as conn:
        rows = conn.execute(
            "SELECT match_id, version, status FROM matches"
            " WHERE (status = 'playing' AND system_to_act) OR (status = 'ended' AND NOT settled)"
        ).fetchall()
    for match_id, version, status in rows:
        match = str(match_id)
        function, args = ("settle_match", (match,)) if status == "ended" else ("bot_turn", (match, version))
        found[function] += ensure(ctx.redis, job_ids(match, version)[function], function, *args)
    if found["bot_turn"] or found["settle_match"]:
        log.warning("sweeper enqueued lost work: %s", found)
    return found


def run_periodically(stop: threading.Event) -> threading.Thread:
    """Runs the deadline scan and the sweep on their timers in a daemon thread until
    ``stop`` is set. A failure (the database or Redis away) is logged and tried again."""

    def loop() -> None:
        next_sweep = 0.0
        while not stop.is_set():
            try:
                if time.monotonic() >= next_sweep:
                    sweep()
                    next_sweep = time.monotonic() + SWEEP_SECONDS
                else:
                    scan_deadlines()
            except Exception:  # noqa: BLE001 - keep the timers alive through outages
                log.exception("deadline scan or sweep failed; trying again")
            stop.wait(SCAN_SECONDS)

    thread = threading.Thread(target=loop, name="ddz-sweeper", daemon=True)
    thread.start()
    return thread
