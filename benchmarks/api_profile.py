"""In-process profile of the command path: the WSGI app called directly (no sockets, no
gunicorn; each request an environ as gunicorn builds one), driven by api_bench's player
logic, under cProfile.

    .venv/bin/python benchmarks/api_profile.py [--commands N] [--sort tottime] [--top 40]
                                               [--smoke]

A fresh migrated database on ``--admin-url`` and the Redis database of ``--redis-url``,
dropped and flushed at the end. With ``--read view`` (or ``feed``) it profiles
api_bench's reads of that kind instead, after the warm-up's commands. Prints the CPU per
command (all
requests of the run, the untimed setup ones included, over the timed commands, as the
bench counts) and the profile's top entries; the access log goes to a null stream
(formatted and written all the same), metrics to a scratch multiprocess directory.
Flask's test client would build each request with Werkzeug's EnvironBuilder, which cost
the run more CPU than the app's own routing and hooks.
"""

from __future__ import annotations

import cProfile
import io
import itertools
import json
import os
import pstats
import random
import secrets
import sys
import tempfile
import time
from argparse import Namespace
from typing import cast
from wsgiref.types import StartResponse

from api_bench import ClientStats, Game, Http, Json, feed_reads, view_reads
from common import command_line, flushed, parse, percentile, scratch_database, unlimited
from flask import Flask

READS = {"view": view_reads, "feed": feed_reads}


class WsgiHttp(Http):
    """api_bench's connection, each request a WSGI call of the app."""

    def __init__(self, app: Flask):
        super().__init__(port=0)
        self.app = app

    def send(
        self,
        method: str,
        path: str,
        token: str | None = None,
        body: Json | None = None,
        extra: dict[str, str] | None = None,
    ) -> tuple[int, bytes, float]:
        raw = b"" if body is None else json.dumps(body).encode()
        path, _, query = path.partition("?")
        environ: dict[str, object] = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1:8000",
            "HTTP_ACCEPT": "application/json",
            "CONTENT_LENGTH": str(len(raw)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(raw),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        if body is not None:
            environ["CONTENT_TYPE"] = "application/json"
        if token is not None:
            environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        for name, value in (extra or {}).items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        statuses: list[str] = []

        def start_response(status: str, headers: object, exc_info: object = None) -> None:
            statuses.append(status)

        start = time.perf_counter()
        # The write() that start_response should return is for apps that cannot return
        # their body: Flask never calls it.
        answer = b"".join(self.app(environ, cast(StartResponse, start_response)))
        return int(statuses[0].split()[0]), answer, time.perf_counter() - start


def main() -> None:
    parser = command_line(__doc__, postgres=True, redis_database=True)
    parser.add_argument("--commands", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200, help="untimed commands first")
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--dump", help="write the raw profile here")
    parser.add_argument(
        "--read",
        choices=("view", "feed"),
        help="profile this read instead of commands (the reads of api_bench, for the match "
        "and the players the commands left)",
    )
    args = parse(parser, commands=50, warmup=20, top=10)
    # prometheus_client chooses its multiprocess mode, as under gunicorn, when imported.
    with tempfile.TemporaryDirectory(prefix="ddz-prof-metrics-") as metrics:
        os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", metrics)
        run(args)


def run(args: Namespace) -> None:
    from service.api import create_app
    from service.app import logs
    from service.config import Config

    with scratch_database(args.admin_url) as (_, database_url), flushed(args.redis_url):
        config = Config.from_env(
            {},
            database_url=database_url,
            redis_url=args.redis_url,
            operator_token=secrets.token_urlsafe(24),
            **unlimited(),
        )
        app = create_app(config)
        logs.configure(stream=open(os.devnull, "w"))  # the JSON lines, as deployed
        try:
            http = WsgiHttp(app)
            tokens = [
                http.call("POST", "/v1/players", body={"name": f"prof-{seat}"})["token"]
                for seat in range(4)
            ]
            stats = ClientStats()
            game = Game([http] * 4, tokens, random.Random(7), stats, False)
            game.new_match()
            for _ in range(args.warmup):
                game.step(timed=True)
            stats.latencies.clear()
            reads = READS[args.read](game, http) if args.read else []
            profile = cProfile.Profile(time.process_time)
            cpu0 = time.process_time()
            if not args.no_profile:
                profile.enable()
            if args.read:
                for path, token in itertools.islice(itertools.cycle(reads), args.commands):
                    status, _, elapsed = http.send("GET", path, token)
                    assert status == 200, status
                    stats.latencies.append(elapsed)
            while len(stats.latencies) < args.commands:
                game.step(timed=True)
            profile.disable()
            cpu = time.process_time() - cpu0
            n = len(stats.latencies)
            what = f"{args.read} reads" if args.read else "commands"
            print(
                f"{n} {what}, {stats.hands} hands, rejected {dict(stats.rejected)}: "
                f"{cpu / n * 1e3:.3f} ms CPU per {what[:-1]} (client included"
                f"{'' if args.no_profile else ', profiled'}); "
                f"p50 {percentile(stats.latencies, 0.5) * 1e3:.3f} ms"
            )
            if not args.no_profile:
                if args.dump:
                    profile.dump_stats(args.dump)
                pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)
        finally:
            app.extensions["ddz"].close()


if __name__ == "__main__":
    main()
