"""``ddz serve``: the whole service on one machine — migrations, the API under gunicorn
and a worker — on DATABASE_URL / REDIS_URL (or REDIS_SENTINELS), or on embedded servers
when they are unset.

One ``serve`` per data directory (a lock on ``<data>/serve.lock``); a taken port is
refused before anything starts. SIGINT, SIGTERM and SIGHUP (a closed terminal) stop
everything it started, the API and worker first, then the servers, and it exits 0. Its
operator token, unless DDZ_OPERATOR_TOKEN sets one, is kept with the data.

The other commands that need the database (``ddz operator``) find the one ``serve`` runs
on the same data directory with :func:`database_of`."""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

from . import embedded
from .store import migrate

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Refused(Exception):
    """``serve`` (or another command on its data directory) will not start; the message
    says why, for people."""


def say(message: str) -> None:
    """Prints to the terminal, which may have been closed (SIGHUP): then prints nowhere."""
    try:
        print(message, flush=True)
    except OSError:
        sys.stdout = open(os.devnull, "w")


def _lock(data: Path, command: str) -> IO[str]:
    """Holds ``data/serve.lock`` for as long as the returned file stays open (the lock
    goes with the process, however it ends); ``command`` (``serve``, ``operator``) names
    the holder for whoever finds it taken."""
    lock = open(data / "serve.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        pid, _, holder = lock.read().strip().partition(" ")
        lock.close()
        raise Taken(pid or "unknown", holder or "serve") from None
    lock.truncate(0)
    lock.write(f"{os.getpid()} {command}\n")
    lock.flush()
    return lock


class Taken(Refused):
    """Another ``ddz`` command holds the data directory's lock."""

    def __init__(self, pid: str, command: str):
        super().__init__(f"ddz {command} (pid {pid})")
        self.pid, self.command = pid, command


def operator_token(data: Path) -> str:
    """The shared operator token of ``serve`` on ``data`` when DDZ_OPERATOR_TOKEN is unset:
    drawn once and kept in ``data/operator-token`` (readable by its owner only), so that
    the token a newcomer copied works after a restart too."""
    kept = data / "operator-token"
    try:
        token = kept.read_text().strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = secrets.token_urlsafe(24)
        with os.fdopen(os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(token + "\n")
    return token


def _check_port(host: str, port: int) -> None:
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        socket.create_server((host, port), family=family).close()
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise Refused(f"cannot listen on {host}:{port}: {reason}; choose another --port") from None


def serve(host: str, port: int, workers: int | None, data_dir: str) -> int:
    data = Path(data_dir).resolve()
    created = not data.exists()
    data.mkdir(parents=True, exist_ok=True)
    try:
        lock = _lock(data, "serve")
    except Taken as exc:
        if exc.command == "serve":
            what = f"another {exc} is using the data directory {data}; stop it first"
        else:  # a command that holds it for a few seconds
            what = f"{exc} is using the data directory {data}; try again when it is done"
        print(f"ddz serve: {what}", file=sys.stderr)
        return 2
    try:
        _check_port(host, port)
    except Refused as exc:
        # Refused before anything started: nothing of this run is left, not even its pid.
        lock.truncate(0)
        lock.close()
        if created:
            (data / "serve.lock").unlink()
            data.rmdir()
        print(f"ddz serve: {exc}", file=sys.stderr)
        return 2
    stopping = threading.Event()
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: stopping.set())
    with lock, ExitStack() as stack:
        try:
            return _run(stack, host, port, workers, data, stopping)
        except embedded.StartError as exc:
            print(f"ddz serve: {exc}", file=sys.stderr)
            return 1
        finally:
            say("ddz serve: stopping")


def _sockets(stack: ExitStack, data: Path) -> Path:
    """The embedded servers' socket directory, made afresh (a crashed run's is removed),
    and removed when ``stack`` closes (register the servers' stop after this)."""
    sockets = embedded.socket_dir(data)
    shutil.rmtree(sockets, ignore_errors=True)
    sockets.mkdir(mode=0o700, parents=True)
    stack.callback(shutil.rmtree, sockets, ignore_errors=True)
    return sockets


class NoDatabase(Exception):
    """No database to act on; the message says what to do, for people."""


@contextmanager
def database_of(data_dir: str, command: str) -> Iterator[str]:
    """The URL of the database a ``ddz`` command other than ``serve`` acts on:
    DATABASE_URL when it is set; otherwise the embedded PostgreSQL of ``serve`` on
    ``data_dir`` — the one a running ``serve`` started, or, when none runs, one started
    for the duration of the command (holding the data directory meanwhile, so that a
    ``serve`` started then is refused rather than share it), migrated. Raises
    :class:`NoDatabase` when there is none to reach."""
    url = os.environ.get("DATABASE_URL")
    if url:
        if not embedded.answers(url):
            raise NoDatabase("the database of DATABASE_URL does not answer (is it running?)")
        yield url
        return
    data = Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    try:
        lock = _lock(data, command)
    except Taken as exc:
        url = embedded.postgres_url(embedded.socket_dir(data))
        if not embedded.answers(url):
            raise NoDatabase(
                f"{exc} is using the data directory {data}, but no embedded PostgreSQL answers "
                "there: it is still starting (try again in a few seconds), or it runs on a "
                "DATABASE_URL of its own (set DATABASE_URL to that one)"
            ) from None
        yield url
        return
    with lock, ExitStack() as stack:
        servers: list[embedded.Child] = []
        sockets = _sockets(stack, data)
        stack.callback(embedded.stop, servers)
        print(
            f"ddz {command}: no ddz serve runs on {data}; "
            "starting its embedded PostgreSQL for this command",
            file=sys.stderr,
            flush=True,
        )
        try:
            child, url = embedded.postgres(data, sockets, lambda: False)
        except embedded.StartError as exc:
            raise NoDatabase(str(exc)) from None
        except ImportError:
            raise NoDatabase(
                "DATABASE_URL is unset, and the embedded PostgreSQL is not installed here "
                "(bin/run installs it): set DATABASE_URL"
            ) from None
        servers.append(child)
        migrate(url)
        yield url


def _run(
    stack: ExitStack,
    host: str,
    port: int,
    workers: int | None,
    data: Path,
    stopping: threading.Event,
) -> int:
    env = dict(os.environ)
    servers: list[embedded.Child] = []
    # Redis is given by its URL, or by its sentinels (with REDIS_URL's database).
    missing = [
        name
        for name in ("DATABASE_URL", "REDIS_URL")
        if not env.get(name) and not (name == "REDIS_URL" and env.get("REDIS_SENTINELS"))
    ]
    if missing:
        embedded.check_installed(missing)
        sockets = _sockets(stack, data)
        stack.callback(embedded.stop, servers)
        for name, start in (("DATABASE_URL", embedded.postgres), ("REDIS_URL", embedded.redis)):
            if name in missing and not stopping.is_set():
                child, env[name] = start(data, sockets, stopping.is_set)
                servers.append(child)
                say(f"embedded {child.name}: {env[name]}")
    if stopping.is_set():
        return 0
    if not env.get("DDZ_OPERATOR_TOKEN"):
        env["DDZ_OPERATOR_TOKEN"] = operator_token(data)
        say(
            f"operator token (for the API; kept in {data / 'operator-token'}; "
            f"set DDZ_OPERATOR_TOKEN to choose it): {env['DDZ_OPERATOR_TOKEN']}"
        )
    # The API's and the worker's metrics in one directory, so that /metrics adds up both;
    # the last run's samples are not this run's.
    metrics = data / "metrics"
    shutil.rmtree(metrics, ignore_errors=True)
    metrics.mkdir()
    env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)
    applied = migrate(env["DATABASE_URL"])
    say(f"migrations applied: {', '.join(applied) or 'none needed'}")
    if stopping.is_set():
        return 0

    apps: list[embedded.Child] = []
    stack.callback(embedded.stop, apps)
    for name, args in (
        ("the worker", ["-m", "service.cli", "worker"]),
        (
            "gunicorn",
            [
                "-m",
                "gunicorn",
                "-c",
                "python:service.gunicorn_conf",
                "--bind",
                f"{host}:{port}",
                *(["--workers", str(workers)] if workers else []),
                "service.api.wsgi:app",
            ],
        ),
    ):
        if stopping.is_set():  # a stop signal while the others started: start no more
            return 0
        apps.append(embedded.start(name, [sys.executable, *args], env=env))
    say(f"ddz is serving on http://{host}:{port}  (Ctrl-C stops it)")
    say(f"play in your browser: http://{host}:{port}/play/")
    children = servers + apps
    while not stopping.wait(0.2):
        for child in children:
            if not child.alive():
                print(
                    f"ddz serve: {child.name} exited with code {child.process.returncode}",
                    file=sys.stderr,
                    flush=True,
                )
                return 1
    return 0
