"""``ddz serve``: the whole service on one machine — migrations, the API under gunicorn
and a worker — on DATABASE_URL / REDIS_URL, or on embedded servers when they are unset.

One ``serve`` per data directory (a lock on ``<data>/serve.lock``); a taken port is
refused before anything starts. SIGINT, SIGTERM and SIGHUP (a closed terminal) stop
everything it started, the API and worker first, then the servers, and it exits 0."""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from . import embedded
from .store import migrate

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Refused(Exception):
    """``serve`` will not start; the message says why, for people."""


def say(message: str) -> None:
    """Prints to the terminal, which may have been closed (SIGHUP): then prints nowhere."""
    try:
        print(message, flush=True)
    except OSError:
        sys.stdout = open(os.devnull, "w")


def _lock(data: Path) -> IO[str]:
    """Holds ``data/serve.lock`` for as long as the returned file stays open (the lock
    goes with the process, however it ends)."""
    lock = open(data / "serve.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        raise Refused(
            f"another ddz serve (pid {holder}) is using the data directory {data}; stop it first"
        ) from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


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
        lock = _lock(data)
    except Refused as exc:
        print(f"ddz serve: {exc}", file=sys.stderr)
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
    if not env.get("DATABASE_URL") or not env.get("REDIS_URL"):
        sockets = embedded.socket_dir(data)
        shutil.rmtree(sockets, ignore_errors=True)  # a crashed run's
        sockets.mkdir(mode=0o700, parents=True)
        stack.callback(shutil.rmtree, sockets, ignore_errors=True)  # once the servers have stopped
        stack.callback(embedded.stop, servers)
        for name, start in (("DATABASE_URL", embedded.postgres), ("REDIS_URL", embedded.redis)):
            if not env.get(name) and not stopping.is_set():
                child, env[name] = start(data, sockets, stopping.is_set)
                servers.append(child)
                say(f"embedded {child.name}: {env[name]}")
    if stopping.is_set():
        return 0
    if not env.get("DDZ_OPERATOR_TOKEN"):
        env["DDZ_OPERATOR_TOKEN"] = secrets.token_urlsafe(24)
        say(f"operator token (set DDZ_OPERATOR_TOKEN to choose it): {env['DDZ_OPERATOR_TOKEN']}")
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
    apps.append(
        embedded.start("the worker", [sys.executable, "-m", "service.cli", "worker"], env=env)
    )
    apps.append(
        embedded.start(
            "gunicorn",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:service.gunicorn_conf",
                "--bind",
                f"{host}:{port}",
                *(["--workers", str(workers)] if workers else []),
                "service.api.wsgi:app",
            ],
            env=env,
        )
    )
    say(f"ddz is serving on http://{host}:{port}  (Ctrl-C stops it)")
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
