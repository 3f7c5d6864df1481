"""The service's processes as deployed, started by the tests that need them: the API under
gunicorn (``service/gunicorn_conf.py``) and the worker (``ddz worker``); no tests here."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from servers import OPERATOR_TOKEN, ROOT, STREAM_BOUNDS, UNLIMITED_RATES, wait_until_ready


@contextmanager
def gunicorn(
    database_url, redis_url, log_path: Path, **settings: str
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``gunicorn -c python:service.gunicorn_conf service.api.wsgi:app`` on a free port,
    up: its base URL and process (stopped at the end if still running). It runs no worker,
    so ``/readyz`` would answer 503; ``/healthz`` says the app is loaded. ``settings`` are
    more environment variables (or other values of those set here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
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
