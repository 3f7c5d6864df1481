"""After every append, the work the new state calls for, on RQ:

- the seat to act is played by the system (a bot seat, or a disconnected player): one
  bot-turn job for that match and version;
- the hand has ended and is not settled: one settlement job.

A player's deadline needs nothing here: it is in the ``matches`` table, written with the
events, and the workers' deadline scan enqueues a turn timeout once it has passed.

Each job id names its match and version, and a Redis mark keeps a second enqueue from
adding a second job. Even so, every job acts only at the version it was made for (the
append is at the expected version), so nothing can act twice.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import datetime

import redis
from rq import Queue

from ..game import State, deadline
from ..game.state import ENDED
from ..store import Outcome
from ..store.tables import TableLoaded

log = logging.getLogger(__name__)

QUEUE = "ddz"
#: How long the mark that a job was enqueued is kept: it only has to keep the command
#: path from enqueueing a job twice while the first waits or runs; the scans look at the
#: job itself (``workers.sweeper.ensure``), and a job run twice acts once. Each key a
#: job leaves in Redis expires, so that Redis holds a few minutes of work whatever the
#: traffic (a day's marks were 1.7 million keys at 700 players).
MARK_SECONDS = 600
#: How long a finished job and its result are kept (about 6 KiB a job in RQ 2): read by
#: nobody but a person or a test looking just after; a failed job is kept a week.
RESULT_SECONDS = 60
FAILURE_SECONDS = 7 * 86400
_HEARTBEAT = "ddz:worker-alive:"
_ENQUEUED = "ddz:enqueued:"
#: What Redis away (stopped, unreachable, or a master demoted under a client that has
#: not yet followed the new one) raises.
REDIS_AWAY = (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ReadOnlyError)
#: Set when an enqueue of this process failed: the work is in PostgreSQL, and a worker
#: process sweeps for it as soon as Redis answers again (workers/sweeper.py).
missed = threading.Event()


def queue(connection: redis.Redis) -> Queue:
    return Queue(QUEUE, connection=connection)


def depths(connection: redis.Redis) -> dict[str, int]:
    """The jobs of the queue by state: waiting, running (started), failed, scheduled."""
    q = queue(connection)
    return {
        "queued": q.count,
        "started": q.started_job_registry.count,
        "failed": q.failed_job_registry.count,
        "scheduled": q.scheduled_job_registry.count,
    }


# One sign of life per worker, for both who asks: the workers (is a started job's worker
# gone?) and /readyz (is any worker left?). RQ's own registry heartbeat is too slow for
# either (its TTL is minutes, renewed only between jobs).
def beat(connection: redis.Redis, worker_name: str, lasting: float) -> None:
    """Tells Redis that the worker lives for the next ``lasting`` seconds."""
    connection.set(_HEARTBEAT + worker_name, 1, px=int(lasting * 1000))


def stopped(connection: redis.Redis, worker_name: str) -> None:
    connection.delete(_HEARTBEAT + worker_name)


def worker_is_alive(connection: redis.Redis, worker_name: str | None) -> bool:
    return bool(worker_name and connection.exists(_HEARTBEAT + worker_name))


def any_worker_alive(connection: redis.Redis) -> bool:
    return next(connection.scan_iter(match=_HEARTBEAT + "*", count=1000), None) is not None


def workers_alive(connection: redis.Redis) -> list[str]:
    """The names of the workers whose heartbeat lives."""
    return sorted(
        key.decode()[len(_HEARTBEAT) :]
        for key in connection.scan_iter(match=_HEARTBEAT + "*", count=1000)
    )


#: The kinds of job, each with the function a worker runs for it. The function is named by
#: its path, as RQ stores it, so that the API enqueues jobs without importing the workers.
BOT_TURN, TURN_TIMEOUT, SETTLE_MATCH = "bot_turn", "turn_timeout", "settle_match"
#: A table's wait is over (its next deal, bots for its empty seats, its settled hand to
#: record); the lobby has tickets to seat.
TABLE_DUE, MATCH_TICKETS = "table_due", "match_tickets"
#: A settled hand's rating (docs/ratings.md).
RATE_HAND = "rate_hand"
#: A batch of a full check of the ledger (its id for the key, and the hands checked before
#: the batch for the version).
CHECK_LEDGER = "check_ledger"
#: A batch of the settled hands without a stored verdict, checked in the background (the
#: first of them for the key: the batch after it is a job of its own).
CHECK_UNVERDICTED = "check_unverdicted"
JOBS = {
    kind: f"workers.jobs.{kind}"
    for kind in (
        BOT_TURN,
        TURN_TIMEOUT,
        SETTLE_MATCH,
        TABLE_DUE,
        MATCH_TICKETS,
        RATE_HAND,
        CHECK_LEDGER,
        CHECK_UNVERDICTED,
    )
}
KIND_OF = {function: kind for kind, function in JOBS.items()}


def id_of_job(kind: str, match_id: str, version: int) -> str:
    """The id of the job of that kind for that match (or table) at that version (a match is
    settled once, whatever its version; the lobby's job is woken by a ticket, its id)."""
    return {
        BOT_TURN: f"bot-turn-{match_id}-{version}",
        TURN_TIMEOUT: f"timeout-{match_id}-{version}",
        SETTLE_MATCH: f"settle-{match_id}",
        TABLE_DUE: f"table-{match_id}-{version}",
        MATCH_TICKETS: f"lobby-{match_id}",
        RATE_HAND: f"rate-{match_id}",
        CHECK_LEDGER: f"ledger-check-{match_id}-{version}",
        CHECK_UNVERDICTED: f"ledger-unverdicted-{match_id}",
    }[kind]


def job_args(kind: str, match_id: str, version: int) -> tuple[()] | tuple[str] | tuple[str, int]:
    """The arguments of the job's function."""
    if kind in (MATCH_TICKETS, CHECK_UNVERDICTED):
        return ()
    return (match_id,) if kind in (SETTLE_MATCH, RATE_HAND, CHECK_LEDGER) else (match_id, version)


def enqueue_once(connection: redis.Redis, job_id: str, kind: str, *args: object) -> bool:
    """Enqueues the job unless this job id was enqueued already (one pipelined round trip
    after the mark)."""
    if not connection.set(_ENQUEUED + job_id, 1, nx=True, ex=MARK_SECONDS):
        return False
    with connection.pipeline() as pipe:
        queue(connection).enqueue(
            JOBS[kind],
            *args,
            job_id=job_id,
            result_ttl=RESULT_SECONDS,
            failure_ttl=FAILURE_SECONDS,
            pipeline=pipe,
        )
        pipe.execute()
    return True


def unmark(connection: redis.Redis, job_id: str) -> None:
    """Forgets that the job was enqueued, so that :func:`enqueue_once` enqueues it again."""
    connection.delete(_ENQUEUED + job_id)


def work_for(state: State, last_recorded_at: datetime | None) -> str | None:
    """The kind of job the state calls for now, if any."""
    if state.phase == ENDED:
        return None if state.settled else SETTLE_MATCH
    if (
        deadline(state, last_recorded_at) is not None
        and state.turn is not None
        and state.is_system(state.turn)
    ):
        return BOT_TURN
    return None


def enqueuer(connection: redis.Redis) -> Callable[[uuid.UUID, Outcome], None]:
    """The ``on_appended`` callback of the command path (:class:`~service.app.commands.Commands`)
    that enqueues on this Redis what each new state calls for."""
    return lambda match_id, outcome: after_append(
        connection, str(match_id), outcome.state, outcome.last_recorded_at
    )


def after_append(
    connection: redis.Redis, match_id: str, state: State, last_recorded_at: datetime | None
) -> None:
    """Enqueues what the new state calls for. Redis only carries work: when it is down, the
    events are safe in PostgreSQL and the sweeper enqueues the work later."""
    kind = work_for(state, last_recorded_at)
    if kind is not None:
        _enqueue(connection, kind, match_id, state.version)


def table_enqueuer(connection: redis.Redis) -> Callable[[uuid.UUID, TableLoaded], None]:
    """The ``on_table`` callback of :class:`~service.app.tables.Tables`: a table whose wait
    is over at once (four seated for their first hand, bots due now) gets its job now; a
    later one is found by the workers' scan of the ``tables`` table when it is due."""

    def after_table(table_id: uuid.UUID, loaded: TableLoaded) -> None:
        waiting = loaded.waiting()
        if (
            waiting is not None
            and loaded.last_recorded_at is not None
            and waiting[1] <= loaded.last_recorded_at
        ):
            _enqueue(connection, TABLE_DUE, str(table_id), loaded.state.version)

    return after_table


def wake_lobby(connection: redis.Redis, ticket_id: uuid.UUID) -> None:
    """Wakes the matcher for a new ticket. The ticket is in PostgreSQL already: if Redis
    loses this, the workers' scan finds the ticket within a second."""
    _enqueue(connection, MATCH_TICKETS, str(ticket_id), 0)


def rate_later(connection: redis.Redis, match_id: str) -> None:
    """Enqueues the settled hand's rating. Its row in ``rated_hands`` is in PostgreSQL
    already: if Redis loses this, the workers' sweep finds the hand."""
    _enqueue(connection, RATE_HAND, match_id, 0)


def check_ledger_later(connection: redis.Redis, check_id: int, done: int = 0) -> None:
    """Enqueues the batch of the full ledger check ``check_id`` that follows the ``done``
    hands checked. Redis down, it is not enqueued: the check stalls, and is taken for lost
    after 10 minutes (another may then be started)."""
    _enqueue(connection, CHECK_LEDGER, str(check_id), done)


def check_unverdicted_later(connection: redis.Redis, first: uuid.UUID) -> None:
    """Enqueues the check of the unverdicted hands from ``first`` on (the workers' sweep
    finds them again if Redis loses it)."""
    _enqueue(connection, CHECK_UNVERDICTED, str(first), 0)


def _enqueue(connection: redis.Redis, kind: str, key: str, version: int) -> None:
    try:
        enqueue_once(connection, id_of_job(kind, key, version), kind, *job_args(kind, key, version))
    except redis.RedisError as exc:
        missed.set()
        log.warning("could not enqueue %s for %s at version %s: %s", kind, key, version, exc)
