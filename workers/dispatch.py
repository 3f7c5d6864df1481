"""After every append: if the seat to act is played by the system (a bot seat, or a
disconnected player), enqueue one bot-turn job for that match and version."""

from __future__ import annotations

import logging

import redis
from rq import Queue

from service.game import State
from service.game.state import BIDDING, PLAYING, REPORT, SHOW_HAND

log = logging.getLogger(__name__)

QUEUE = "ddz"
#: How long the mark that a (match, version) job was enqueued is kept.
DEDUP_SECONDS = 24 * 3600
DECISION_PHASES = (BIDDING, SHOW_HAND, REPORT, PLAYING)


def queue(connection: redis.Redis) -> Queue:
    return Queue(QUEUE, connection=connection)


def system_to_act(state: State) -> bool:
    return state.phase in DECISION_PHASES and state.turn is not None and state.is_system(state.turn)


def enqueue_bot_turn(connection: redis.Redis, match_id: str, version: int) -> bool:
    """Enqueues the bot turn of (match, version) once: a second call, a retry, or another
    process asking for the same version enqueues nothing. Returns whether it enqueued."""
    job_id = f"bot-turn-{match_id}-{version}"
    if not connection.set(f"ddz:enqueued:{job_id}", 1, nx=True, ex=DEDUP_SECONDS):
        return False
    queue(connection).enqueue("workers.jobs.bot_turn", match_id, version, job_id=job_id, result_ttl=60, failure_ttl=86400)
    return True


def after_append(connection: redis.Redis, match_id: str, state: State) -> None:
    """Enqueues what the new state calls for. Redis only carries work: when it is down, the
    events are safe in PostgreSQL and the sweeper enqueues the work later."""
    try:
        if system_to_act(state):
            enqueue_bot_turn(connection, match_id, state.version)
    except redis.RedisError as exc:
        log.warning("could not enqueue work for match %s at version %s: %s", match_id, state.version, exc)
