"""The floor under api_bench's figures: what gunicorn, and Flask on it, cost per request
on this machine when the request does nothing of ours.

    .venv/bin/python benchmarks/floor_bench.py [--seconds S] [--clients 32] [--smoke]

Serves, one after the other, under gunicorn's gevent worker with one worker per core (as
``ddz serve`` does): ``bare``, a WSGI callable that reads the body and answers fixed
bytes of a command answer's size; ``flask``, a Flask app with one route on the
command's path that parses the JSON body and answers the same bytes; ``commit``, that
route committing the body as one row through a psycopg pool first (one round trip, the
least an append can be); and ``read``, that route reading one row by its key through the
pool instead (the least a read of the store can be), both in a scratch database. Each is driven by
api_bench's client (one persistent connection per client thread, the POST a command
sends, with its bearer token) and measured as api_bench measures: requests/s and
gunicorn's CPU per request (master and workers). Set beside api_bench's CPU per command,
it says how much of a command the server and the framework take before the command does
anything, and so what is left of a budget for the command's own work: ``commit`` (and
``read``) over ``flask`` is what one round trip to the store costs before any of the
game's work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from wsgiref.types import StartResponse, WSGIEnvironment

from common import command_line, free_port, parse, scratch_database
from flask import Flask, Response, request

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

HERE = Path(__file__).resolve().parent
#: About the size of a command's answer (its events and the caller's view).
ANSWER = b'{"version": 12, "events": [], "view": {"padding": "' + b"x" * 1400 + b'"}}'
PATH = "/v1/matches/6b1d1f7e-3b8b-4b0e-9d0e-2b7e8f0c1a22/commands"
BODY = {"action": "play", "cards": ["3h", "3d"], "expected_version": 12}


def bare(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    environ["wsgi.input"].read()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(ANSWER)))]
    )
    return [ANSWER]


flask = Flask(__name__)


@flask.post("/v1/matches/<uuid:match_id>/commands")
def command(match_id: uuid.UUID) -> Response:
    request.get_json()
    return Response(ANSWER, mimetype="application/json")


#: The scratch database ``commit`` and ``read`` use (set for gunicorn's workers).
DSN = "FLOOR_BENCH_DSN"


@flask.post("/v1/matches/<uuid:match_id>/commit")
def commit(match_id: uuid.UUID) -> Response:
    request.get_json()
    with _pool().connection() as conn:
        # A key of its own: the read route finds the path's one row among them.
        conn.execute(
            "INSERT INTO floor_rows (match_id, body) VALUES (%s, %s)",
            (uuid.uuid4(), request.get_data()),
        )
    return Response(ANSWER, mimetype="application/json")


@flask.post("/v1/matches/<uuid:match_id>/read")
def read(match_id: uuid.UUID) -> Response:
    request.get_json()
    with _pool().connection() as conn:
        conn.execute("SELECT body FROM floor_rows WHERE match_id = %s", (match_id,)).fetchall()
    return Response(ANSWER, mimetype="application/json")


_POOLS: list[ConnectionPool] = []


def _pool() -> ConnectionPool:
    # Made in the worker, after gunicorn's gevent worker has patched the standard library.
    if not _POOLS:
        from psycopg_pool import ConnectionPool

        _POOLS.append(ConnectionPool(os.environ[DSN], min_size=4, max_size=16, open=True))
    return _POOLS[0]


def measure(
    app: str, clients: int, seconds: float, workers: int, path: str = PATH, dsn: str | None = None
) -> tuple[float, float]:
    """(requests/s, gunicorn's CPU ms per request) of ``app`` ("floor_bench:bare" ...)."""
    # Imported here, not in the module gunicorn serves.
    import psutil
    from api_bench import Http

    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--worker-class",
            "gevent",
            "--workers",
            str(workers),
            "--worker-connections",
            "1000",
            "--keep-alive",
            "60",
            "--bind",
            f"127.0.0.1:{port}",
            app,
        ],
        cwd=HERE,
        env={**os.environ, DSN: dsn or ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                Http(port).send("POST", path, "token", BODY)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        processes = [psutil.Process(server.pid), *psutil.Process(server.pid).children()]

        def cpu() -> float:
            return sum(p.cpu_times().user + p.cpu_times().system for p in processes)

        stop = threading.Event()
        counts = [0] * clients

        def client(i: int) -> None:
            http = Http(port)
            while not stop.is_set():
                status, _, _ = http.send("POST", path, "token", BODY)
                assert status == 200, status
                counts[i] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        before, started = cpu(), time.monotonic()
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        elapsed, used = time.monotonic() - started, cpu() - before
        done = sum(counts)
        return done / elapsed, 1000 * used / done
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> int:
    parser = command_line(__doc__, postgres=True)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parse(parser, seconds=0.5, clients=2, workers=1)
    print(f"{args.clients} clients, {args.workers} gevent workers, {args.seconds:g} s each")
    for name in ("bare", "flask"):
        rate, cpu_ms = measure(f"floor_bench:{name}", args.clients, args.seconds, args.workers)
        print(f"{name:6} {rate:8,.0f} requests/s   gunicorn CPU {cpu_ms:.3f} ms per request")
    for name, (rate, cpu_ms) in measure_store(
        args.admin_url, args.clients, args.seconds, args.workers
    ).items():
        print(f"{name:6} {rate:8,.0f} requests/s   gunicorn CPU {cpu_ms:.3f} ms per request")
    return 0


def measure_store(
    admin_url: str, clients: int, seconds: float, workers: int
) -> dict[str, tuple[float, float]]:
    """``measure`` of the ``commit`` and ``read`` routes, by name, in a scratch database on
    ``admin_url``'s server."""
    import psycopg

    measured = {}
    with scratch_database(admin_url) as (_, dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE floor_rows (match_id uuid PRIMARY KEY, body bytea)")
            conn.execute(
                "INSERT INTO floor_rows VALUES (%s, %s)",
                (PATH.split("/")[3], json.dumps(BODY).encode()),
            )
        for name in ("commit", "read"):
            path = PATH.replace("/commands", f"/{name}")
            measured[name] = measure("floor_bench:flask", clients, seconds, workers, path, dsn)
    return measured


if __name__ == "__main__":
    sys.exit(main())
