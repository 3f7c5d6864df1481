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
from datetime import datetime

import redis
from rq import Queue, Worker
from rq.utils import now

from service.game import State
from service.game.state import ENDED
from service.store import deadline

log = logging.getLogger(__name__)

QUEUE = "ddz"
#: RQ's ``worker_ttl`` for our workers: an idle RQ worker tells Redis it lives every
#: ``worker_ttl - 15`` seconds (420 - 15 by default), so that /readyz can tell within
#: seconds, not minutes, that no worker is left.
WORKER_TTL = 30
#: How long the mark that a job was enqueued is kept.
MARK_SECONDS = 24 * 3600


def queue(connection: redis.Redis) -> Queue:
    return Queue(QUEUE, connection=connection)


def worker_alive(connection: redis.Redis, within: float) -> bool:
    """Whether a worker of the queue has told Redis that it lives in the last ``within``
    seconds (RQ's heartbeat; a worker that stopped cleanly has unregistered)."""
    seen = [w.last_heartbeat for w in Worker.all(queue=queue(connection))]
    return any(beat is not None and (now() - beat).total_seconds() < within for beat in seen)


def job_ids(match_id: str, version: int) -> dict[str, str]:
    return {
        "bot_turn": f"bot-turn-{match_id}-{version}",
        "turn_timeout": f"timeout-{match_id}-{version}",
        "settle_match": f"settle-{match_id}",
    }


def enqueue_once(connection: redis.Redis, job_id: str, function: str, *args) -> bool:
    """Enqueues the job unless this job id was enqueued already (one pipelined round trip
    after the mark)."""
    if not connection.set(f"ddz:enqueued:{job_id}", 1, nx=True, ex=MARK_SECONDS):
        return False
    with connection.pipeline() as pipe:
        queue(connection).enqueue(
            f"workers.jobs.{function}", *args, job_id=job_id, result_ttl=600, failure_ttl=7 * 86400, pipeline=pipe
        )
        pipe.execute()
    return True


def work_for(state: State, last_recorded_at: datetime | None) -> str | None:
    """The job the state calls for now (its function name), if any."""
    if state.phase == ENDED:
        return None if state.settled else "settle_match"
    if deadline(state, last_recorded_at) is not None and state.is_system(state.turn):
        return "bot_turn"
    return None


def after_append(connection: redis.Redis, match_id: str, state: State, last_recorded_at: datetime | None) -> None:
    """Enqueues what the new state calls for. Redis only carries work: when it is down, the
    events are safe in PostgreSQL and the sweeper enqueues the work later."""
    function = work_for(state, last_recorded_at)
    if function is None:
        return
    args = (match_id,) if function == "settle_match" else (match_id, state.version)
    try:
        enqueue_once(connection, job_ids(match_id, state.version)[function], function, *args)
    except redis.RedisError as exc:
        log.warning("could not enqueue %s for match %s at version %s: %s", function, match_id, state.version, exc)
