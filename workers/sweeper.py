"""Deadlines and recovery, both from the ``matches`` table: PostgreSQL is the source of
truth and Redis only carries work.

- The deadline scan (every ``deadline_scan_seconds`` of the configuration) enqueues a turn timeout for each player
  whose deadline has passed, and enqueues again each started job whose worker is gone.
- The table scan (as often as the deadline scan) enqueues the job of each table whose
  wait is over (its next deal, bots for its empty seats, closing, a settled hand to
  record) and seats the lobby's waiting tickets.
- The sweep (at worker start, then every ``sweep_seconds``) finds work lost with Redis (a
  flush, a restart) or with a worker and enqueues it again: a bot or disconnected seat to
  act with no live job, an ended hand with no settlement, a settled hand not rated, the
  next batch of a full ledger check under way.
- The pruning (at worker start, then every ``prune_seconds``) deletes what is kept no
  longer: old idempotency keys, expired tokens and console sessions; on the same timer,
  the settled hands without a stored ledger verdict get their check enqueued.

A worker is alive while its heartbeat is (``service.app.work.beat``): it renews it three
times per ``worker_heartbeat_seconds`` from a thread of its own, and it lapses
``worker_heartbeat_seconds`` after the last renewal. So the job of a killed worker is enqueued again within seconds,
while a job that is merely slow keeps its live worker and is left alone (and even if a
job ran twice, each acts only at the version it was made for, and settlement pays once).

Every worker process runs all this on timers of its own, so they go on while any worker
lives, whatever happens to Redis; two workers finding the same work enqueue it once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import cast

import psycopg
import redis
from psycopg_pool import PoolTimeout
from rq.exceptions import NoSuchJobError
from rq.executions import Execution, ExecutionRegistry
from rq.job import Job, JobStatus

from service.app.work import (
    BOT_TURN,
    CHECK_LEDGER,
    CHECK_UNVERDICTED,
    KIND_OF,
    RATE_HAND,
    SETTLE_MATCH,
    TABLE_DUE,
    TURN_TIMEOUT,
    beat,
    enqueue_once,
    id_of_job,
    job_args,
    missed,
    queue,
    stopped,
    unmark,
    work_for,
    worker_is_alive,
)
from service.store import DatabaseUnavailable, ledger, retention
from service.store.ratings import RatingStore

from .context import context
from .jobs import match_tickets

log = logging.getLogger(__name__)

#: Set when this process saw Redis fail (the heartbeat, a job's end, an enqueue): the
#: sweep runs as soon as Redis answers again, not at its next turn.
_sweep_wanted = threading.Event()
#: Set when a server that was away answers again (the heartbeat's thread saw Redis
#: back; a job went through, so PostgreSQL and Redis both answer): the timers stop
#: backing off.
_back = threading.Event()


def sweep_soon() -> None:
    """Has the sweep run at the timers' next pass (Redis lost work of this process)."""
    _sweep_wanted.set()


def answering() -> None:
    """Tells the timers that PostgreSQL and Redis answer (a job went through): if they are
    backing off from an outage, they try again now."""
    _back.set()


#: A job to make sure of: (job id, kind, the arguments of its function).
Work = tuple[str, str, Sequence[object]]


def job_of(kind: str, key: str, version: int) -> Work:
    """The job of ``kind`` for ``key`` (a match, a table, a check) at ``version``, as
    :func:`ensure_each` takes it: its id, its kind and its function's arguments."""
    return id_of_job(kind, key, version), kind, job_args(kind, key, version)


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
        return worker_is_alive(connection, job.worker_name)
    return False


def forget(connection: redis.Redis, job_id: str) -> None:
    """Deletes what RQ keeps of a job, whole or in part (a partial flush, a killed worker)."""
    q = queue(connection)
    # A worker that died holding the job left its id in RQ's intermediate list, where RQ's
    # cleanup would later report the re-enqueued job failed; and its execution in the
    # started registry, where RQ's cleanup would report it abandoned.
    connection.lrem(q.intermediate_queue_key, 0, job_id)
    started = q.started_job_registry
    # RQ's connection does not decode responses: members come back as bytes.
    mine = [
        entry
        for entry in cast(list[bytes], connection.zrange(started.key, 0, -1))
        if entry.decode().split(":", 1)[0] == job_id
    ]
    if mine:
        connection.zrem(started.key, *mine)
    # An execution listed without its hash (it expired, or was flushed) makes RQ's own
    # delete raise "Execution … not found": drop such listings first.
    executions = ExecutionRegistry(job_id, connection)
    for execution_id in cast(list[bytes], connection.zrange(executions.key, 0, -1)):
        if not connection.exists(Execution(execution_id.decode(), job_id, connection).key):
            connection.zrem(executions.key, execution_id)
    unmark(connection, job_id)
    try:
        Job.fetch(job_id, connection=connection).delete()
    except NoSuchJobError:
        pass


def ensure(connection: redis.Redis, job_id: str, kind: str, *args: object) -> bool:
    """Enqueues the job unless a live one exists; returns whether it enqueued."""
    if job_is_live(connection, job_id):
        return False
    forget(connection, job_id)
    return enqueue_once(connection, job_id, kind, *args)


def ensure_each(connection: redis.Redis, work: Iterable[Work], lost: bool = True) -> dict[str, int]:
    """``ensure`` for each (job id, kind, args): one broken job (a half-flushed Redis)
    is logged and skipped, and the others are still enqueued. Redis itself gone ends the
    pass: the caller backs off. Each job enqueued is logged as lost work unless told
    otherwise (a passed deadline is no loss)."""
    enqueued: dict[str, int] = {}
    for job_id, kind, args in work:
        try:
            if ensure(connection, job_id, kind, *args):
                enqueued[kind] = enqueued.get(kind, 0) + 1
                if lost:
                    log.info("enqueued lost work: %s", job_id)
        except (redis.ConnectionError, redis.TimeoutError):
            raise
        except Exception as exc:  # noqa: BLE001 - one job's trouble is not the pass's
            log.warning(
                "skipped job %s, which Redis holds in a broken state: %s: %s",
                job_id,
                type(exc).__name__,
                exc,
            )
    return enqueued


def scan_deadlines() -> int:
    """Enqueues a turn timeout for every player whose deadline has passed."""
    ctx = context()
    rows = ctx.store.past_deadline()
    timeouts = [job_of(TURN_TIMEOUT, str(m), v) for m, v in rows]
    return ensure_each(ctx.redis, timeouts, lost=False).get(TURN_TIMEOUT, 0)


def scan_tables() -> int:
    """Enqueues the job of each table whose wait is over (its next deal, bots for its
    empty seats, closing, a settled hand to record), and seats the lobby's waiting tickets: what
    Redis lost (a flush, a killed worker) is found again here, from PostgreSQL."""
    ctx = context()
    rows = ctx.tables.table_store.due_now()
    due = [job_of(TABLE_DUE, str(t), v) for t, v in rows]
    found = ensure_each(ctx.redis, due, lost=False).get(TABLE_DUE, 0)
    match_tickets()
    return found


def rescue_started() -> int:
    """Enqueues again each started job whose worker's heartbeat is gone: a bot turn or a
    settlement is back on the queue within seconds of its worker's death."""
    connection = context().redis
    work = []
    for job_id, _ in queue(connection).started_job_registry.get_job_and_execution_ids(
        cleanup=False
    ):
        try:
            job = Job.fetch(job_id, connection=connection)
        except NoSuchJobError:
            continue  # the sweep finds its work from PostgreSQL
        kind = None if job.func_name is None else KIND_OF.get(job.func_name)
        if (
            kind
            and job.get_status(refresh=False) == JobStatus.STARTED
            and not worker_is_alive(connection, job.worker_name)
        ):
            work.append((job_id, kind, job.args))
    return sum(ensure_each(connection, work).values())


def sweep() -> dict[str, int]:
    """Finds lost work and enqueues it; returns how many of each it enqueued."""
    ctx = context()
    found = {
        BOT_TURN: 0,
        SETTLE_MATCH: 0,
        RATE_HAND: 0,
        CHECK_LEDGER: 0,
        TURN_TIMEOUT: scan_deadlines(),
    }
    work = []
    for match_id in ctx.store.awaiting_system():
        loaded = ctx.store.load(match_id)
        kind = work_for(loaded.state, loaded.last_recorded_at)
        if kind is not None:
            work.append(job_of(kind, str(match_id), loaded.state.version))
    # Settled hands whose rating is still to be done (a job lost, or hands settled before
    # ratings existed).
    for match_id in RatingStore(ctx.pool).pending():
        work.append(job_of(RATE_HAND, str(match_id), 0))
    # A full ledger check under way whose next batch was lost: its batch from where it
    # stands (a batch run twice is recorded once).
    for check_id, done in ledger.checks_running(ctx.pool):
        work.append(job_of(CHECK_LEDGER, str(check_id), done))
    for kind, count in ensure_each(ctx.redis, work).items():
        found[kind] += count
    return found


def find_unverdicted() -> int:
    """Enqueues the check of the settled hands without a stored verdict (settled before
    verdicts were kept), a batch at a time, each batch enqueuing the next; 1 if it
    enqueued it. On the pruning's timer, not the sweep's: none is made any more (the
    settlement job and ``ddz rebuild`` store theirs), and looking reads every settled
    hand's id (40–70 ms at 100,000)."""
    ctx = context()
    unverdicted = ledger.unverdicted(ctx.pool, 1)
    if not unverdicted:
        return 0
    check = job_of(CHECK_UNVERDICTED, str(unverdicted[0]), 0)
    return ensure_each(ctx.redis, [check], lost=False).get(CHECK_UNVERDICTED, 0)


#: What a pass may fail on while a server is away, by the server's name.
OUTAGES = (
    (redis.ConnectionError, "Redis"),
    (redis.TimeoutError, "Redis"),
    (psycopg.OperationalError, "PostgreSQL"),
    (PoolTimeout, "PostgreSQL"),
    (DatabaseUnavailable, "PostgreSQL"),
)


def prune() -> dict[str, int]:
    """Deletes what is kept no longer (``service.store.retention``): idempotency and
    creation keys past ``keep_keys_days``, tokens and console sessions expired longer ago
    than ``keep_expired_days``; how many of each, logged when any."""
    ctx = context()
    pruned = retention.prune(
        ctx.pool,
        timedelta(days=ctx.config.keep_keys_days),
        timedelta(days=ctx.config.keep_expired_days),
    )
    if any(pruned.values()):
        log.info("pruned: %s", ", ".join(f"{n} {what}" for what, n in pruned.items() if n))
    return pruned


def run_periodically(stop: threading.Event) -> threading.Thread:
    """Runs the deadline scan, the rescue of dead workers' jobs, the sweep and the pruning
    on their timers in a daemon thread until ``stop`` is set. A failed pass (a server
    away) is logged once per back-off step, and its end once."""

    config = context().config

    def loop() -> None:
        next_sweep = 0.0
        next_prune = 0.0
        backoff = 0.0
        away: str | None = None
        while not stop.is_set():
            if _sweep_wanted.is_set() or missed.is_set():
                _sweep_wanted.clear()
                missed.clear()
                next_sweep = 0.0
            try:
                if time.monotonic() >= next_sweep:
                    sweep()
                    next_sweep = time.monotonic() + config.sweep_seconds
                else:
                    scan_deadlines()
                scan_tables()
                rescue_started()
                if time.monotonic() >= next_prune:
                    prune()
                    find_unverdicted()
                    next_prune = time.monotonic() + config.prune_seconds
            except Exception as exc:  # noqa: BLE001 - keep the timers alive through outages
                backoff = min(
                    max(backoff * 2, config.min_backoff_seconds), config.max_backoff_seconds
                )
                away = next((name for kind, name in OUTAGES if isinstance(exc, kind)), None)
                if away is None:
                    log.exception("deadline scan or sweep failed; trying again in %g s", backoff)
                else:
                    log.warning(
                        "%s is unreachable (%s); trying again in %g s",
                        away,
                        str(exc).strip() or type(exc).__name__,
                        backoff,
                    )
                # What was lost meanwhile is found by the sweep that follows the outage,
                # at once when the server is seen back.
                next_sweep = 0.0
                _back.clear()
                _back.wait(backoff)
                continue
            if backoff:
                log.info(
                    "%s is back: the deadline scan and the sweep go on", away or "the failing part"
                )
                backoff, away = 0.0, None
            stop.wait(config.deadline_scan_seconds)

    thread = threading.Thread(target=loop, name="ddz-sweeper", daemon=True)
    thread.start()
    return thread


def keep_alive(stop: threading.Event, worker_name: str) -> threading.Thread:
    """Refreshes the worker's heartbeat in a daemon thread of its own (a slow scan must not
    let it lapse) until ``stop`` is set, then removes it."""
    connection = context().redis
    lasting = context().config.worker_heartbeat_seconds
    beat(connection, worker_name, lasting)

    def loop() -> None:
        failing = False
        while not stop.wait(lasting / 3):
            try:
                beat(connection, worker_name, lasting)
            except redis.RedisError:
                # The sweeper's timer reports the outage, and sweeps once Redis is back.
                failing = True
                _sweep_wanted.set()
                continue
            if failing:
                failing = False
                _back.set()
        try:
            stopped(connection, worker_name)
        except redis.RedisError:
            pass  # it expires on its own

    thread = threading.Thread(target=loop, name="ddz-heartbeat", daemon=True)
    thread.start()
    return thread
