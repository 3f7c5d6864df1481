"""Recovery. PostgreSQL is the source of truth and Redis only carries work, so work lost
with Redis (a flush, a restart) or with a worker (killed mid-job) is found again from the
matches table and enqueued: a bot or disconnected seat to act with no live job, a
deadline that passed, an ended hand with no settlement. Runs at worker start and then
every ``SWEEP_SECONDS``, scheduled by RQ."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import redis
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.registry import ScheduledJobRegistry

from .context import context
from .dispatch import enqueue_once, job_ids, queue

log = logging.getLogger(__name__)

SWEEP_SECONDS = 15
#: A job started longer ago than this is taken for lost with its worker (a turn takes ms).
STARTED_TIMEOUT = timedelta(seconds=60)


def job_is_live(connection: redis.Redis, job_id: str) -> bool:
    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return False
    status = job.get_status(refresh=False)
    q = queue(connection)
    if status == JobStatus.QUEUED:
        # A worker that died right after taking the job leaves it "queued" but in no
        # queue that a worker reads.
        return connection.lpos(q.key, job_id) is not None
    if status == JobStatus.SCHEDULED:
        return job_id in ScheduledJobRegistry(queue=q)
    if status == JobStatus.DEFERRED:
        return True
    if status == JobStatus.STARTED:
        started = job.started_at
        if started is not None and started.tzinfo is None:
            started = started.replace(tzinfo=timezone.utc)
        return started is not None and datetime.now(timezone.utc) - started < STARTED_TIMEOUT
    return False


def ensure(connection: redis.Redis, job_id: str, function: str, *args, at: datetime | None = None) -> bool:
    """Enqueues the job (now, or scheduled ``at``) unless a live one exists; returns
    whether it enqueued."""
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
    return enqueue_once(connection, job_id, function, *args, at=at)


def sweep() -> dict[str, int]:
    """Finds lost work and enqueues it; returns how many of each it enqueued."""
    ctx = context()
    found = {"bot_turn": 0, "turn_timeout": 0, "settle_match": 0}
    with ctx.pool.connection() as conn:
        rows = conn.execute(
            "SELECT match_id, version, status, system_to_act, deadline < now() FROM matches"
            " WHERE (status = 'playing' AND (system_to_act OR deadline < now()))"
            " OR (status = 'ended' AND NOT settled)"
        ).fetchall()
    for match_id, version, status, system, overdue in rows:
        match = str(match_id)
        if status == "ended":
            function, args = "settle_match", (match,)
        elif system:
            function, args = "bot_turn", (match, version)
        elif overdue:
            function, args = "turn_timeout", (match, version)
        else:
            continue
        found[function] += ensure(ctx.redis, job_ids(match, version)[function], function, *args)
    if any(found.values()):
        log.warning("sweeper enqueued lost work: %s", found)
    return found


def sweep_and_reschedule() -> dict[str, int]:
    """The periodic sweep: sweeps, then schedules the next sweep (one at a time)."""
    try:
        return sweep()
    finally:
        schedule_sweep(context().redis)


def schedule_sweep(connection: redis.Redis, delay: float = SWEEP_SECONDS) -> None:
    # The mark expires with the delay, so exactly one next sweep is pending at any time.
    if connection.set("ddz:sweep-scheduled", 1, nx=True, ex=max(1, int(delay))):
        queue(connection).enqueue_in(timedelta(seconds=delay), "workers.sweeper.sweep_and_reschedule", result_ttl=60)
