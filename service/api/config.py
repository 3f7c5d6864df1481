"""Configuration from the environment (names below); tests pass a mapping instead."""

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
    }

    @classmethod
    def from_env(cls, environ=os.environ, **overrides) -> Config:
        values = {}
        for field in fields(cls):
            name = cls._ENV.get(field.name)
            if name and environ.get(name):
                kind = type(field.default) if field.default is not None else str
                values[field.name] = kind(environ[name])
        values.update(overrides)
        return cls(**values)
