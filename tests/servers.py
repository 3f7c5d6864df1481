"""Real PostgreSQL and Redis for the integration tests, and the app on them.

Each comes from, in order: the environment (``DDZ_TEST_DATABASE_URL``, a server where the
tests may create databases; ``DDZ_TEST_REDIS_URL``, a Redis server); containers
(testcontainers: ``postgres:16-alpine``, ``redis:7-alpine``, removed at the end) when a
Docker engine answers, or when ``DDZ_TEST_CONTAINERS=1`` asks for them (then a missing
engine is an error; ``DDZ_TEST_CONTAINERS=0`` never uses them); the servers on this
machine (127.0.0.1:5432 with trust auth, 127.0.0.1:6379); or the run's embedded servers
(:class:`RunServers`: PostgreSQL and Redis as ``ddz serve`` embeds them, one of each for
the whole run, its xdist workers included, with their data and sockets in a folder of the
run's own). Containers come before the machine's servers so that a developer's own
databases are left alone wherever Docker runs. The tests get a fresh database, migrated,
dropped at the end; and every Redis database they use is claimed on the one Redis server
of the run (see :func:`claimed_redis_db`), so that two runs on one machine never flush
each other's, and flushed before and after. Tests that need a Redis server of their own
(to stop it, or for a worker no other module's jobs reach) start one with
:func:`embedded_redis`.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
import redis as redis_lib
from ports import free_port
from werkzeug.serving import make_server

from service import embedded
from service.api import create_app
from service.config import Config
from service.store import migrate

LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS = "redis://127.0.0.1:6379/0"
#: How long a claim on a Redis database outlives a run that died without releasing it: a
#: live run renews its claims every third of this, so a killed run holds nothing for long.
CLAIM_SECONDS = 60
#: How long a claim waits for a database to come free (another run's, or a killed run's
#: claim lapsing) before the test fails.
CLAIM_WAIT_SECONDS = 180
#: Kept in a claimed database: a test run's data, which a later run may flush once the
#: claim has lapsed (a database holding anything else is never claimed).
TEST_DATA_MARK = "ddz-test:data"
OPERATOR_TOKEN = "test-operator-token"
ROOT = Path(__file__).resolve().parents[1]
UNLIMITED_RATES = [
    "commands",
    "commands_per_address",
    "reads",
    "reads_per_address",
    "streams",
    "streams_per_address",
    "signups_per_address",
    "creations",
    "creations_per_address",
]
#: What the bounds on the streams one caller holds open count (``max_streams_per_*``).
STREAM_BOUNDS = ["token", "player", "address"]


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


def _docker_reachable() -> bool:
    import docker

    try:
        client = docker.from_env(timeout=3)
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except docker.errors.DockerException:
        return False
    finally:
        client.close()


@functools.cache
def containers_wanted() -> bool:
    """Whether PostgreSQL and Redis come from containers (see the module's doc)."""
    setting = os.environ.get("DDZ_TEST_CONTAINERS", "").strip().lower()
    if setting in ("0", "false", "off", "no"):
        return False
    return bool(setting) or _docker_reachable()


class RunServers:
    """The run's embedded PostgreSQL and Redis (``service/embedded.py``), started on demand
    and shared by every test process of the run. The process that owns the run (xdist's
    controller, or the one session) makes a folder of the run's own for their data and
    sockets (outside pytest's temporary base, which another run as the same user may close
    to others than its owner: PostgreSQL runs as another user under root) and keeps a
    thread that starts a server once a test process asks for it (a file ``<name>.wanted``
    in the folder), writes its URL there (``<name>.url``) and stops it at the end. The
    servers are that thread's children: Linux stops them if the run dies."""

    STARTERS = {
        # A scratch cluster: nothing to keep through a crash, and room for every worker's
        # pools and services (PostgreSQL's default is 100 connections).
        "PostgreSQL": functools.partial(
            embedded.postgres,
            settings={
                "max_connections": "400",
                "fsync": "off",
                "synchronous_commit": "off",
                "full_page_writes": "off",
            },
        ),
        "Redis": embedded.redis,
    }

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ddz-test-"))
        self.closing = threading.Event()
        self.children: list[embedded.Child] = []
        self.thread = threading.Thread(target=self._keep, name="ddz-test-servers", daemon=True)
        self.thread.start()

    def _keep(self) -> None:
        sockets = embedded.socket_dir(self.folder)
        sockets.mkdir(mode=0o700)
        started: set[str] = set()
        try:
            while not self.closing.wait(0.05):
                for name, start in self.STARTERS.items():
                    if name in started or not (self.folder / f"{name}.wanted").exists():
                        continue
                    started.add(name)
                    try:
                        child, url = start(self.folder, sockets, self.closing.is_set)
                    except Exception as exc:  # told to whoever waits for it
                        _publish(self.folder / f"{name}.failed", f"{type(exc).__name__}: {exc}")
                        continue
                    self.children.append(child)
                    _publish(self.folder / f"{name}.url", url)
        finally:
            embedded.stop(self.children)

    def close(self) -> None:
        self.closing.set()
        self.thread.join()
        shutil.rmtree(self.folder, ignore_errors=True)

    @staticmethod
    def url(folder: Path, name: str, timeout: float = 120) -> str:
        """The URL of the run's embedded server ``name``, started for the caller if it is
        the first to ask."""
        (folder / f"{name}.wanted").touch()
        deadline = time.monotonic() + timeout
        while True:
            for outcome in ("url", "failed"):
                try:
                    said = (folder / f"{name}.{outcome}").read_text()
                except FileNotFoundError:
                    continue
                if outcome == "url":
                    return said
                raise RuntimeError(f"the run's embedded {name} did not start: {said}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the run's embedded {name} did not start in {timeout} s")
            time.sleep(0.05)


def _publish(path: Path, text: str) -> None:
    """Writes ``path`` whole or not at all, for a reader waiting for it."""
    partial = path.with_suffix(".partial")
    partial.write_text(text)
    partial.replace(path)


_RUN_SERVERS = pytest.StashKey[RunServers]()
#: The xdist ``workerinput`` entry naming the run's servers' folder.
_RUN_FOLDER = "ddz_run_servers"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # xdist's workers ask their controller's
        config.stash[_RUN_SERVERS] = RunServers()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist's controller tells each worker where the run's servers are."""
    node.workerinput[_RUN_FOLDER] = str(node.config.stash[_RUN_SERVERS].folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    servers = config.stash.get(_RUN_SERVERS, None)
    if servers is not None:
        servers.close()


def run_server_pids(config: pytest.Config) -> set[int]:
    """The process ids of the run's embedded servers, when this process started them."""
    servers = config.stash.get(_RUN_SERVERS, None)
    return set() if servers is None else {child.process.pid for child in servers.children}


def run_server(config: pytest.Config, name: str) -> str:
    """The URL of the run's embedded ``PostgreSQL`` or ``Redis``."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        folder = Path(workerinput[_RUN_FOLDER])
    else:
        folder = config.stash[_RUN_SERVERS].folder
    return RunServers.url(folder, name)


@pytest.fixture(scope="session")
def postgres_admin_url(pytestconfig):
    """A URL of a PostgreSQL server where the tests may create databases."""
    url = os.environ.get("DDZ_TEST_DATABASE_URL")
    if url:
        yield url
    elif containers_wanted():
        from testcontainers.community.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as server:
            yield server.get_connection_url()
    elif _postgres_reachable(LOCAL_POSTGRES):
        yield LOCAL_POSTGRES
    else:
        yield run_server(pytestconfig, "PostgreSQL")


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


def redis_db_url(server_url: str, db: int) -> str:
    """The URL of database ``db`` on the Redis server of ``server_url`` (TCP or unix socket)."""
    parts = urlsplit(server_url)
    if parts.scheme == "unix":
        # urlunsplit would write "unix:/path" (no empty host), which redis-py refuses.
        query = urlencode({**dict(parse_qsl(parts.query)), "db": str(db)})
        return f"unix://{parts.path}?{query}"
    return urlunsplit(parts._replace(path=f"/{db}"))


@contextmanager
def claimed_redis_db(server_url: str) -> Iterator[str]:
    """A database of the Redis server of ``server_url`` for the caller alone, flushed; its
    URL. A claim is a lock (redis-py's) in database 0, renewed while held and released at
    the end, lapsing :data:`CLAIM_SECONDS` after a run that died. Only an empty database, or
    one a test run left (:data:`TEST_DATA_MARK`), is claimed; database 0 (a service's
    default) never is. When every one is taken, the claim waits for one to come free."""
    admin = redis_lib.Redis.from_url(redis_db_url(server_url, 0))
    try:
        count = int(admin.config_get("databases").get("databases", 16))
    except redis_lib.ResponseError:
        count = 16
    deadline = time.monotonic() + CLAIM_WAIT_SECONDS
    try:
        while True:
            for db in range(count - 1, 0, -1):
                # Not thread-local: the renewing thread holds it too.
                claim = admin.lock(
                    f"ddz-test:claim:{db}", timeout=CLAIM_SECONDS, thread_local=False
                )
                if not claim.acquire(blocking=False):
                    continue
                url = redis_db_url(server_url, db)
                connection = redis_lib.Redis.from_url(url)
                done = threading.Event()
                renewal = threading.Thread(target=_renew, args=(claim, done), daemon=True)
                renewal.start()
                try:
                    if connection.dbsize() and not connection.exists(TEST_DATA_MARK):
                        continue  # someone else's data
                    connection.flushdb()
                    connection.set(TEST_DATA_MARK, 1)
                    yield url
                    connection.flushdb()
                    return
                finally:
                    done.set()
                    renewal.join()
                    connection.close()
                    try:
                        claim.release()
                    except redis_lib.exceptions.LockError:
                        pass  # lapsed: another run may hold it now
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no free Redis database on {server_url} in {CLAIM_WAIT_SECONDS} s:"
                    " every one is claimed or holds other data"
                )
            time.sleep(1)
    finally:
        admin.close()


def _renew(claim: redis_lib.lock.Lock, done: threading.Event) -> None:
    """Keeps ``claim`` from lapsing until ``done``."""
    while not done.wait(CLAIM_SECONDS / 3):
        try:
            claim.reacquire()
        except redis_lib.exceptions.LockError:
            return  # lost (the server restarted, say): nothing more to renew


@contextmanager
def embedded_redis() -> Iterator[str]:
    """A Redis server of the caller's own (as ``ddz serve`` embeds it), stopped at the end:
    its URL."""
    with tempfile.TemporaryDirectory(prefix="ddz-test-redis-") as folder:
        child, url = embedded.redis(Path(folder), Path(folder), lambda: False)
        try:
            yield url
        finally:
            # Its data is thrown away: killed at once (Redis saves its data on SIGTERM).
            child.process.kill()
            child.process.wait()


@pytest.fixture(scope="session")
def redis_server(pytestconfig):
    """The URL of the run's Redis server: ``DDZ_TEST_REDIS_URL``'s, a container's, the local
    one, or the run's embedded one. Every database used on it is claimed."""
    url = os.environ.get("DDZ_TEST_REDIS_URL")
    if url:
        yield url
    elif containers_wanted():
        from testcontainers.community.redis import RedisContainer

        with RedisContainer("redis:7-alpine") as server:
            host, port = server.get_container_host_ip(), server.get_exposed_port(6379)
            yield f"redis://{host}:{port}/0"
    elif _redis_reachable(LOCAL_REDIS):
        yield LOCAL_REDIS
    else:
        yield run_server(pytestconfig, "Redis")


def wait_until_ready(
    base: str, process, log_path, timeout: float = 60, path: str = "/readyz"
) -> None:
    """Waits until the server ``process`` (logging to ``log_path``) answers ``path``:
    ``/readyz`` needs a worker too, ``/healthz`` only the API."""
    import requests

    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, (
            f"the server exited:\n{log_path.read_text(errors='replace')[-3000:]}"
        )
        try:
            if requests.get(f"{base}{path}", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        assert time.monotonic() < deadline, (
            f"not ready:\n{log_path.read_text(errors='replace')[-3000:]}"
        )
        time.sleep(0.2)


@pytest.fixture(scope="session")
def redis_url(redis_server):
    """This test process's Redis database, claimed on :func:`redis_server`."""
    with claimed_redis_db(redis_server) as url:
        yield url


@pytest.fixture()
def own_redis_url(redis_server):
    """A Redis database for one test alone (for a worker that must take no other test's jobs)."""
    with claimed_redis_db(redis_server) as url:
        yield url


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
        **{f"max_streams_per_{per}": 100_000 for per in STREAM_BOUNDS},
    )


@pytest.fixture(scope="session")
def app(config):
    app = create_app(config)
    yield app
    app.extensions["ddz"].close()


class Heartbeat:
    """A worker's heartbeat, renewed every second as a running ``ddz worker`` renews it
    (what ``/readyz`` looks for), with no worker behind it: no job is taken, so that the
    other tests' matches are left as they are. ``stop`` it to play a worker's death."""

    LASTING = 3.0

    def __init__(self, redis_url: str, name: str = "test-worker") -> None:
        self.connection = redis_lib.Redis.from_url(redis_url)
        self.name = name
        self.beating = threading.Event()
        self.closed = threading.Event()
        # A beat sent after stop() would revive the worker for LASTING seconds: seen as
        # /readyz answering 200 right after a test stopped the worker.
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="test-heartbeat", daemon=True)

    def _run(self) -> None:
        from service.app import work

        while not self.closed.wait(1.0):
            with self.lock:
                if self.beating.is_set():
                    work.beat(self.connection, self.name, self.LASTING)

    def start(self) -> None:
        from service.app import work

        work.beat(self.connection, self.name, self.LASTING)
        self.beating.set()

    def stop(self) -> None:
        from service.app import work

        with self.lock:
            self.beating.clear()
            work.stopped(self.connection, self.name)


@contextmanager
def beating_worker(redis_url: str) -> Iterator[Heartbeat]:
    heartbeat = Heartbeat(redis_url)
    heartbeat.start()
    heartbeat.thread.start()
    try:
        yield heartbeat
    finally:
        heartbeat.closed.set()
        heartbeat.thread.join()
        heartbeat.stop()
        heartbeat.connection.close()


@pytest.fixture()
def live_worker(redis_url):
    with beating_worker(redis_url) as worker:
        yield worker


@pytest.fixture()
def client(app):
    return app.test_client()


@contextmanager
def serving(app) -> Iterator[str]:
    """The app served over real HTTP on a free local port (threaded); its base URL."""
    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()


@pytest.fixture(scope="session")
def live_server(app):
    """The session's app over HTTP, for streams, concurrent clients and schemathesis."""
    with serving(app) as url:
        yield url


@contextmanager
def ddz_serve(
    database_url: str, redis_url: str, tmp_path: Path, **env: str
) -> Iterator[tuple[str, Path]]:
    """The service as ``ddz serve`` runs it (the API under gunicorn and one ``ddz worker``,
    real processes) on that database and Redis database, ready (``/readyz``), with ``env``
    added to its environment; its base URL and its log's path. Stopped at the end, its
    whole process group."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DDZ_TEST_")}
    environment.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        DDZ_OPERATOR_TOKEN=OPERATOR_TOKEN,
        PYTHONUNBUFFERED="1",
        **env,
    )
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        serve = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "service.cli",
                "serve",
                "--port",
                str(port),
                "--workers",
                "1",
                "--data",
                str(tmp_path / "data"),
            ],
            cwd=ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, serve, log_path, timeout=90)
        yield base, log_path
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()


@contextmanager
def lobby_service(
    admin_url: str, redis_server: str, tmp_path: Path, name: str, **env: str
) -> Iterator[str]:
    """:func:`ddz_serve` on a database (``ddz_<name>_…``) and a Redis database of its own,
    for clients that play through the lobby: a ticket that allows bots is seated with them
    at the matcher's next round, and nothing is rate limited; ``env`` adds settings. Its
    base URL."""
    with (
        fresh_database(admin_url, f"ddz_{name}") as database_url,
        claimed_redis_db(redis_server) as redis_url,
        ddz_serve(
            database_url,
            redis_url,
            tmp_path,
            DDZ_LOBBY_BOTS_AFTER="0",
            DDZ_KEEPALIVE_SECONDS="1",
            DDZ_RATE_LIMITS="false",
            **env,
        ) as (base, _),
    ):
        yield base


@pytest.fixture(scope="session")
def shared_service(postgres_admin_url, redis_server, tmp_path_factory) -> Iterator[str]:
    """One :func:`lobby_service` per test process (each xdist worker has its own) for the
    end-to-end modules that can share one: their players are their own, so they only
    share the lobby's settings. Streams close every 2 s, so that clients show they resume;
    tables rest a second between hands, time enough for a player to leave after a hand's
    settlement."""
    with lobby_service(
        postgres_admin_url,
        redis_server,
        tmp_path_factory.mktemp("shared"),
        "shared",
        DDZ_TABLE_NEXT_HAND_SECONDS="1",
        DDZ_STREAM_SECONDS="2",
    ) as base:
        yield base
