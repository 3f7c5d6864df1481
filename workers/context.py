"""What a job needs (database pool, event store, Redis), built once per worker process
from the environment (DATABASE_URL, REDIS_URL)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import redis
from psycopg_pool import ConnectionPool

from service.api.config import Config
from service.store import EventStore, open_pool


@dataclass
class Context:
    config: Config
    pool: ConnectionPool
    store: EventStore
    redis: redis.Redis


@functools.cache
def context() -> Context:
    config = Config.from_env()
    pool = open_pool(config.database_url, 4, "ddz-worker")
    return Context(config, pool, EventStore(pool), redis.Redis.from_url(config.redis_url))
