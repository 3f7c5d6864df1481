"""The service's processes as deployed, started by the tests that need them: the API under
gunicorn (``service/gunicorn_conf.py``) and the worker (``ddz worker``); no tests here.

Also a pytest plugin (``pytest_plugins`` in conftest.py): no process that a test started
outlives the session (:func:`no_process_left_behind`)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from ports import free_port
from servers import (
    OPERATOR_TOKEN,
    ROOT,
    STREAM_BOUNDS,
    UNLIMITED_RATES,
    run_server_pids,
    wait_until_ready,
)

#: How long a process left at the session's end has to stop on its own (a gunicorn worker
#: notices its master's death within a second or two).
LEFT_GRACE_SECONDS = 10
#: The stop signals' handlers of this process as its session began.
_HANDLERS: dict[int, object] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    _HANDLERS.update((sig, signal.getsignal(sig)) for sig in (signal.SIGINT, signal.SIGTERM))


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Puts back the stop signals' handlers that a test changed: RQ's worker, run in the
    test's process (burst mode), leaves its own, and then Ctrl-C or SIGTERM (xdist's
    interruption of a worker at the end) raised RQ's StopRequested in whatever ran next."""
    for sig, handler in _HANDLERS.items():
        if signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind(pytestconfig) -> Iterator[None]:
    """Fails the run (an error at the teardown of this test process's last test) if a
    process started by its tests, or by theirs, still runs once every other fixture is
    torn down; and stops it. This process is made its descendants' subreaper (Linux), so
    that one whose parent died (a server of a ``serve`` killed with SIGKILL) is still
    counted."""
    if sys.platform.startswith("linux"):
        PR_SET_CHILD_SUBREAPER = 36
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)
    yield
    kept = run_server_pids(pytestconfig)
    deadline = time.monotonic() + LEFT_GRACE_SECONDS
    while (left := _running_descendants(kept)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    assert not left, "processes left running after the tests (killed now):\n" + "\n".join(
        left.values()
    )


def _running_descendants(kept: set[int]) -> dict[psutil.Process, str]:
    """This process's descendants but ``kept`` and theirs, each with its pid and command
    line; those that have ended are reaped (an orphan adopted here is nobody else's)."""
    running = {}
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if process.pid in kept or kept & _ancestry(process):
                continue
            if process.status() == psutil.STATUS_ZOMBIE:
                process.wait(0)
                continue
            running[process] = f"{process.pid} {' '.join(process.cmdline()) or process.name()}"
    return running


def separate_session(test_file: Path, plugins: list[str], **env: str) -> subprocess.Popen[str]:
    """A pytest session of its own on ``test_file`` (in its folder), with the suite's
    ``plugins`` (``servers``, …) and ``env`` added to the environment; its output, stderr
    included, on ``stdout``."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *(arg for plugin in plugins for arg in ("-p", plugin)),
            str(test_file),
        ],
        cwd=test_file.parent,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent), **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _ancestry(process: psutil.Process) -> set[int]:
    with contextlib.suppress(psutil.Error):
        return {parent.pid for parent in process.parents()}
    return set()


@contextmanager
def gunicorn(
    database_url, redis_url, log_path: Path, **settings: str
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``gunicorn -c python:service.gunicorn_conf service.api.wsgi:app`` on a free port,
    up: its base URL and process (stopped at the end if still running). It runs no worker,
    so ``/readyz`` would answer 503; ``/healthz`` says the app is loaded. ``settings`` are
    more environment variables (or other values of those set here)."""
    port = free_port()
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        DDZ_OPERATOR_TOKEN=OPERATOR_TOKEN,
        DDZ_STREAM_SECONDS="120",  # streams stay open for the whole test
        DDZ_KEEPALIVE_SECONDS="1",
        DDZ_REQUESTS_PER_CONNECTION="3",
        # Hundreds of streams from one token in a moment: far above the limits for a person.
        **{f"DDZ_RATE_LIMIT_{name.upper()}": "100000/second" for name in UNLIMITED_RATES},
        **{f"DDZ_MAX_STREAMS_PER_{per.upper()}": "100000" for per in STREAM_BOUNDS},
        PYTHONUNBUFFERED="1",
    )
    env.update(settings)  # a setting given overrides the ones above
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:service.gunicorn_conf",
                "--bind",
                f"127.0.0.1:{port}",
                "service.api.wsgi:app",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, proc, log_path, path="/healthz")  # no worker runs here
        yield base, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log = log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]


class WorkerProcess:
    """``python -m service.cli worker`` with DATABASE_URL and REDIS_URL, in a new session
    (process group) so that it and its scheduler process can be killed together."""

    def __init__(self, database_url: str, redis_url: str, log_path: Path, **settings: str):
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(DATABASE_URL=database_url, REDIS_URL=redis_url, PYTHONUNBUFFERED="1", **settings)
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "worker"],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.full_output()[-4000:]

    def full_output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def rq_name(self, rconn) -> str | None:
        """The name it registered under with RQ."""
        for key in rconn.smembers("rq:workers:ddz"):
            if rconn.hget(key, "pid") == str(self.proc.pid).encode():
                return key.decode().rsplit(":", 1)[1]
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL to the worker and its scheduler process: a crash, nothing cleaned up."""
        self._signal_group(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 15) -> int | None:
        """A warm shutdown (SIGTERM); SIGKILL if it does not stop in time."""
        if self.alive():
            self._signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        # The scheduler process it forked, if it outlived the worker.
        self._signal_group(signal.SIGKILL)
        self.log.close()
        return self.proc.returncode
