"""What the benchmarks share: their command line (the smoke mode among it), the figures'
arithmetic, and the services they start.

Every benchmark is a script, run as ``.venv/bin/python benchmarks/NAME.py``. Python puts
``benchmarks/`` first on the path, so a script imports this module and the other scripts
by their names (``from common import percentile``, ``from api_bench import Http``), and
the service as the virtualenv installs it (``bin/venv dev``), never from the checkout by
a path of its own: ``PYTHONPATH=$(bin/compiled)`` then puts the compiled rules first.

``--smoke`` runs a script's code paths at tiny sizes, in seconds, and prints its figures
under a line saying that they mean nothing (tests/test_benchmarks.py runs every script
so). The PostgreSQL server a benchmark makes its scratch database on, and the Redis
database it flushes, default to this machine's, or to ``DDZ_BENCH_ADMIN_URL`` and
``DDZ_BENCH_REDIS_URL`` where set (the test sets them to the test run's).

This module imports the service and its libraries only where a function needs them:
``rlcard_bench.py`` runs under any interpreter that has numpy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The first line a smoke run prints (the test looks for it).
SMOKE_NOTE = "smoke run: tiny sizes, to show that the code runs; the figures mean nothing"
#: A rate far above any benchmark's load.
UNLIMITED = "1000000/second"
#: Far more streams than any benchmark holds open.
UNBOUNDED = 1_000_000


def unlimited() -> dict[str, Any]:
    """Every rate limit of the service (the settings ``rate_limit_*`` that are rates) at
    :data:`UNLIMITED`, and every bound on the streams one caller holds open
    (``max_streams_per_*``) at :data:`UNBOUNDED`: for a benchmark that keeps the limits
    on, so that their cost is measured, but out of its load's way."""
    from dataclasses import fields

    from service.config import Config

    limits: dict[str, Any] = {}
    for field in fields(Config):
        if field.name.startswith("rate_limit_") and isinstance(field.default, str):
            limits[field.name] = UNLIMITED
        elif field.name.startswith("max_streams_per_"):
            limits[field.name] = UNBOUNDED
    return limits


def unlimited_environment() -> dict[str, str]:
    """:func:`unlimited` as the service's environment variables; a limit this process's
    environment sets keeps its value (to measure the cost of a limit at its rate)."""
    from service.config import Config

    return {
        Config._ENV[name]: os.environ.get(Config._ENV[name], str(value))
        for name, value in unlimited().items()
    }


# ---------------------------------------------------------------------------------------
# The command line


def command_line(
    doc: str | None, postgres: bool = False, redis_database: bool = False
) -> argparse.ArgumentParser:
    """A script's parser: described by the first paragraph of its ``doc``, with
    ``--smoke``, and ``--admin-url`` and ``--redis-url`` when it uses those services."""
    summary = (doc or "").split("\n\n")[0].replace("\n", " ")
    parser = argparse.ArgumentParser(description=summary)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the same code paths at tiny sizes, in seconds: to see that it runs",
    )
    if postgres:
        parser.add_argument(
            "--admin-url",
            default=os.environ.get(
                "DDZ_BENCH_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
            ),
            help="a PostgreSQL server where the benchmark creates its scratch database",
        )
    if redis_database:
        parser.add_argument(
            "--redis-url",
            default=os.environ.get("DDZ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/12"),
            help="a Redis database of the benchmark's own; flushed",
        )
    return parser


def parse(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None = None, **smoke: Any
) -> argparse.Namespace:
    """The command line. With ``--smoke``, the values in ``smoke`` replace the defaults
    (what the command line names keeps its value) and :data:`SMOKE_NOTE` is printed."""
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**smoke)
        args = parser.parse_args(argv)
        print(SMOKE_NOTE, flush=True)
    return args


# ---------------------------------------------------------------------------------------
# Figures


def percentile(values: Sequence[float], fraction: float) -> float:
    """The value below which ``fraction`` of ``values`` lie (NaN when there are none)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def percentiles(times: Sequence[float]) -> str:
    """p50, p95, p99 and the longest of ``times`` (seconds), in ms."""
    shown = ", ".join(f"p{q:g} {percentile(times, q / 100) * 1e3:.1f}" for q in (50, 95, 99))
    return f"{shown}, max {max(times) * 1e3:.1f} ms"


def spread(
    label: str, values: Sequence[float], unit: str = "ms", scale: float = 1e3, extra: str = ""
) -> None:
    """Prints a line of the median and the p99 of ``values`` (seconds, shown in ``unit``:
    ``scale`` of them to a second)."""
    print(
        f"{label:<40} median {statistics.median(values) * scale:8.3f} {unit}   "
        f"p99 {percentile(values, 0.99) * scale:8.3f} {unit}   ({len(values):,} samples){extra}"
    )


# ---------------------------------------------------------------------------------------
# Services


@contextmanager
def scratch_database(admin_url: str) -> Iterator[tuple[str, str]]:
    """A new database (``ddz_bench_…``) on the server of ``admin_url``, migrated; its name
    and URL. Dropped at the end."""
    import psycopg

    from service.store import migrate

    name = f"ddz_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = psycopg.conninfo.make_conninfo(admin_url, dbname=name)
        migrate(url)
        yield name, url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def flushed(redis_url: str) -> Iterator[str]:
    """The Redis database of ``redis_url``, flushed before and after."""
    import redis

    connection = redis.Redis.from_url(redis_url)
    try:
        connection.flushdb()
        yield redis_url
    finally:
        try:
            connection.flushdb()
        except redis.RedisError:
            pass  # the server went first (a Ctrl-C): nothing of ours to flush
        connection.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def redis_server() -> Iterator[str]:
    """A Redis server of the benchmark's own, on a free port, keeping nothing on disk (the
    machine's ``redis-server``, or the one the virtualenv has); its URL. Stopped at the
    end."""
    import redis

    port = free_port()
    executable = shutil.which("redis-server") or str(Path(sys.executable).parent / "redis-server")
    server = subprocess.Popen(
        [executable, "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=15)


def gunicorn(port: int, *options: str) -> list[str]:
    """The command that serves the API under gunicorn with the settings ``ddz serve`` uses
    (``service/gunicorn_conf.py``) on ``127.0.0.1:port``, ``options`` added."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        "python:service.gunicorn_conf",
        "--bind",
        f"127.0.0.1:{port}",
        *options,
    ]


def start_workers(count: int, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    """``count`` worker processes (``ddz worker``) with the environment ``env``."""
    return [
        subprocess.Popen(
            [sys.executable, "-m", "service.cli", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


def terminate(processes: Sequence[subprocess.Popen[bytes]], timeout: float = 30) -> None:
    """Terminates the processes, then waits for each."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(timeout=timeout)


def wait_ready(
    url: str, server: subprocess.Popen[bytes], timeout: float = 90, log: Path | None = None
) -> None:
    """Returns when ``url`` answers 200; raises if ``server`` exits first or ``timeout``
    seconds pass (with the end of its ``log``)."""
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}{tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer 200 within {timeout:.0f} s{tail(log)}")
        time.sleep(0.2)


def tail(log: Path | None, lines: int = 30) -> str:
    """The last ``lines`` of ``log``, to add to a message (nothing when there is none)."""
    if log is None:
        return ""
    try:
        return ":\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
