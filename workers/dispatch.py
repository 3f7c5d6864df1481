"""After every append, the work the new state calls for, on RQ:

- the seat to act is played by the system (a bot seat, or a disconnected player): one
  bot-turn job for that match and version;
- a player is to act: a turn-timeout job at the deadline (系统代打 when it passes);
- the hand has ended and is not settled: one settlement job.

Each job id names its match and version, and a Redis mark keeps a second enqueue from
adding a second job. Even so, every job acts only at the version it was made for (the
append is at the expected version), so nothing can act twice.
"""

from __future__ import annotations

import logging
from datetime import datetime

import redis
from rq import Queue

from service.game import State
from service.game.state import ENDED
from service.store import deadline

log = logging.getLogger(__name__)

QUEUE = "ddz"
#: How long the mark that a job was enqueued is kept.
MARK_SECONDS = 24 * 3600


def queue(connection: redis.Redis) -> Queue:
    return Queue(QUEUE, connection=connection)


def job_ids(match_id: str, version: int) -> dict[str, str]:
    return {
        "bot_turn": f"bot-turn-{match_id}-{version}",
        "turn_timeout": f"timeout-{match_id}-{version}",
        "settle_match": f"settle-{match_id}",
    }


def enqueue_once(connection: redis.Redis, job_id: str, function: str, *args, at: datetime | None = None) -> bool:
    """Enqueues (or schedules ``at``) the job unless this job id was enqueued already."""
    if not connection.set(f"ddz:enqueued:{job_id}", 1, nx=True, ex=MARK_SECONDS):
        return False
    q = queue(connection)
    with connection.pipeline() as pipe:
        options = dict(job_id=job_id, result_ttl=600, failure_ttl=7 * 86400, pipeline=pipe)
        if at is None:
            q.enqueue(f"workers.jobs.{function}", *args, **options)
        else:
            q.enqueue_at(at, f"workers.jobs.{function}", *args, **options)
        pipe.execute()
    return True


def work_for(state: State, last_recorded_at: datetime | None) -> tuple[str, datetime | None] | None:
    """The job the state calls for (its function name) and when, if any."""
    if state.phase == ENDED:
        return None if state.settled else ("settle_match", None)
    due = deadline(state, last_recorded_at)
    if due is None:
        return None
    if state.is_system(state.turn):
        return "bot_turn", None
    return "turn_timeout", due


def after_append(connection: redis.Redis, match_id: str, state: State, last_recorded_at: datetime | None) -> None:
    """Enqueues what the new state calls for. Redis only carries work: when it is down, the
    events are safe in PostgreSQL and the sweeper enqueues the work later."""
    work = work_for(state, last_recorded_at)
    if work is None:
        return
    function, at = work
    args = (match_id,) if function == "settle_match" else (match_id, state.version)
    try:
        enqueue_once(connection, job_ids(match_id, state.version)[function], function, *args, at=at)
    except redis.RedisError as exc:
        log.warning("could not enqueue %s for match %s at version %s: %s", function, match_id, state.version, exc)
