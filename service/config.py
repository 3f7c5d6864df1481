"""The configuration of every process (the API, gunicorn, the workers, the CLI): one field
per setting, each read from the environment variable named next to it; tests pass a
mapping instead. Nothing here imports the app: gunicorn's master reads it before gevent
patches the standard library."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Config:
    #: PostgreSQL (libpq URL or DSN): DATABASE_URL.
    database_url: str = "postgresql://postgres@127.0.0.1:5432/ddz"
    #: Redis: REDIS_URL.
    redis_url: str = "redis://127.0.0.1:6379/0"
    #: The operator's bearer token: DDZ_OPERATOR_TOKEN. Unset: no operator access.
    operator_token: str | None = None
    #: Largest request body in bytes: DDZ_MAX_BODY_BYTES.
    max_body_bytes: int = 16 * 1024
    #: How long one event stream stays open before the client reconnects: DDZ_STREAM_SECONDS.
    stream_seconds: float = 300.0
    #: Seconds between keep-alive comments on a quiet stream: DDZ_KEEPALIVE_SECONDS.
    keepalive_seconds: float = 15.0
    #: Database connections per process: DDZ_DB_POOL_SIZE.
    db_pool_size: int = 16
    #: Origins whose browser pages may call the API (CORS), comma-separated, e.g.
    #: ``https://play.example,https://admin.example``: DDZ_CORS_ORIGINS. Empty: none.
    cors_origins: str = ""
    #: Seconds a request waits for a database connection before it answers 503: DDZ_DB_TIMEOUT.
    db_timeout: float = 10.0
    #: /readyz fails when no worker has told Redis it lives for this long (seconds; an
    #: idle worker does so every 15 s): DDZ_WORKER_GRACE_SECONDS.
    worker_grace_seconds: float = 30.0
    #: Rate limits on or off (``off``, ``false`` or ``0``): DDZ_RATE_LIMITS. Each limit below
    #: is one or more of ``N/second``, ``N/minute``, ``N/hour`` joined by ``;``.
    rate_limits: bool = True
    #: Commands (POST commands, seats, leave; new matches and tokens, revocations) per
    #: token: DDZ_RATE_LIMIT_COMMANDS; and per client address: DDZ_RATE_LIMIT_COMMANDS_PER_ADDRESS.
    rate_limit_commands: str = "10/second;300/minute"
    rate_limit_commands_per_address: str = "100/second;3000/minute"
    #: Reads (views, events, legal plays, records, lists, ledger) per token:
    #: DDZ_RATE_LIMIT_READS; per address: DDZ_RATE_LIMIT_READS_PER_ADDRESS.
    rate_limit_reads: str = "20/second;600/minute"
    rate_limit_reads_per_address: str = "200/second;6000/minute"
    #: Opening event streams and long polls per token: DDZ_RATE_LIMIT_STREAMS; per address:
    #: DDZ_RATE_LIMIT_STREAMS_PER_ADDRESS.
    rate_limit_streams: str = "10/second;300/minute"
    rate_limit_streams_per_address: str = "100/second;3000/minute"
    #: New players per address: DDZ_RATE_LIMIT_SIGNUPS_PER_ADDRESS.
    rate_limit_signups_per_address: str = "10/minute;100/hour"
    #: A caller refused again while it is known to be over a limit gets its 429 after this
    #: many seconds (at most until its window ends): a client that ignores Retry-After
    #: then sends a request per connection per hold, not thousands a second, and others
    #: keep the CPU: DDZ_RATE_LIMIT_HOLD_SECONDS.
    rate_limit_hold_seconds: float = 1.0
    #: gunicorn worker processes for the API: WEB_CONCURRENCY (the usual name on platforms
    #: that set it). 0: one per core, since a gevent worker runs on one.
    web_concurrency: int = 0
    #: Open connections per gunicorn worker (streams included): DDZ_WORKER_CONNECTIONS.
    worker_connections: int = 1000
    #: Requests one client connection carries before the API closes it (as nginx's
    #: ``keepalive_requests``; the client opens another): DDZ_REQUESTS_PER_CONNECTION.
    requests_per_connection: int = 100
    #: Database connections per RQ worker process (a worker runs one job at a time, plus its
    #: sweeper's timer): DDZ_WORKER_DB_POOL_SIZE.
    worker_db_pool_size: int = 4
    #: Milliseconds the ``hard`` bot level searches per decision: DDZ_BOT_SEARCH_MS.
    bot_search_ms: float = 50.0

    _ENV = {
        "database_url": "DATABASE_URL",
        "redis_url": "REDIS_URL",
        "operator_token": "DDZ_OPERATOR_TOKEN",
        "max_body_bytes": "DDZ_MAX_BODY_BYTES",
        "stream_seconds": "DDZ_STREAM_SECONDS",
        "keepalive_seconds": "DDZ_KEEPALIVE_SECONDS",
        "db_pool_size": "DDZ_DB_POOL_SIZE",
        "cors_origins": "DDZ_CORS_ORIGINS",
        "db_timeout": "DDZ_DB_TIMEOUT",
        "worker_grace_seconds": "DDZ_WORKER_GRACE_SECONDS",
        "rate_limits": "DDZ_RATE_LIMITS",
        "rate_limit_commands": "DDZ_RATE_LIMIT_COMMANDS",
        "rate_limit_commands_per_address": "DDZ_RATE_LIMIT_COMMANDS_PER_ADDRESS",
        "rate_limit_reads": "DDZ_RATE_LIMIT_READS",
        "rate_limit_reads_per_address": "DDZ_RATE_LIMIT_READS_PER_ADDRESS",
        "rate_limit_streams": "DDZ_RATE_LIMIT_STREAMS",
        "rate_limit_streams_per_address": "DDZ_RATE_LIMIT_STREAMS_PER_ADDRESS",
        "rate_limit_signups_per_address": "DDZ_RATE_LIMIT_SIGNUPS_PER_ADDRESS",
        "rate_limit_hold_seconds": "DDZ_RATE_LIMIT_HOLD_SECONDS",
        "web_concurrency": "WEB_CONCURRENCY",
        "worker_connections": "DDZ_WORKER_CONNECTIONS",
        "requests_per_connection": "DDZ_REQUESTS_PER_CONNECTION",
        "worker_db_pool_size": "DDZ_WORKER_DB_POOL_SIZE",
        "bot_search_ms": "DDZ_BOT_SEARCH_MS",
    }

    @classmethod
    def from_env(cls, environ=os.environ, **overrides) -> Config:
        values = {}
        for field in fields(cls):
            name = cls._ENV.get(field.name)
            if name and environ.get(name):
                kind = type(field.default) if field.default is not None else str
                if kind is bool:
                    values[field.name] = environ[name].strip().lower() not in (
                        "0",
                        "false",
                        "off",
                        "no",
                    )
                else:
                    values[field.name] = kind(environ[name])
        values.update(overrides)
        return cls(**values)
