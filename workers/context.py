"""What a job needs (database pool, event store, the command path, Redis), built once per
worker process from the configuration."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import redis
from psycopg_pool import ConnectionPool

from service.app.commands import Commands
from service.app.redis_client import connect
from service.app.tables import Tables
from service.app.work import enqueuer, table_enqueuer
from service.config import Config
from service.store import EventStore, StateCache, open_pool
from service.store.tables import TableStore


@dataclass
class Context:
    config: Config
    pool: ConnectionPool
    store: EventStore
    commands: Commands
    redis: redis.Redis
    tables: Tables


@functools.cache
def context() -> Context:
    config = Config.from_env()
    pool = open_pool(
        config.database_url, config.worker_db_pool_size, "ddz-worker", config.db_timeout
    )
    store = EventStore(pool, StateCache(config.state_cache_size))
    connection = connect(config)
    # After an append, the work the new state calls for (the next bot turn, the settlement).
    commands = Commands(store, enqueuer(connection))
    tables = Tables(
        store, TableStore(store, config.bot_account_tables), commands, table_enqueuer(connection)
    )
    return Context(config, pool, store, commands, connection, tables)
