"""In-process profile of the command path: the WSGI app called directly (no sockets, no
gunicorn; each request an environ as gunicorn builds one), driven by api_bench's player
logic, under cProfile.

    .venv/bin/python benchmarks/api_profile.py [--commands N] [--sort tottime] [--top 40]

As the tests do (tests/servers.py): a fresh migrated database on ``--admin-url`` and a
claimed Redis database, dropped and flushed at the end. Prints the CPU per command (all
requests of the run, the untimed setup ones included, over the timed commands, as the
bench counts) and the profile's top entries; the access log goes to a null stream
(formatted and written all the same), metrics to a scratch multiprocess directory.
Flask's test client would build each request with Werkzeug's EnvironBuilder, which cost
the run more CPU than the app's own routing and hooks.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests", ROOT / "benchmarks"):
    sys.path.insert(0, str(extra))

os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="ddz-prof-metrics-"))

import api_bench  # noqa: E402
from servers import OPERATOR_TOKEN, UNLIMITED_RATES, claimed_redis_db, fresh_database  # noqa: E402

from service.api import create_app  # noqa: E402
from service.app import logs  # noqa: E402
from service.config import Config  # noqa: E402


class WsgiHttp:
    """api_bench.Http's two calls, as WSGI calls of the app."""

    def __init__(self, app):
        self.app = app

    def send(self, method, path, token=None, body=None, extra=None):
        raw = b"" if body is None else json.dumps(body).encode()
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
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
        statuses = []
        start = time.perf_counter()
        answer = b"".join(
            self.app(environ, lambda status, headers, exc_info=None: statuses.append(status))
        )
        return int(statuses[0].split()[0]), answer, time.perf_counter() - start

    def call(self, method, path, token=None, body=None, expect=(200, 201)):
        status, raw, _ = self.send(method, path, token, body)
        if status not in expect:
            raise RuntimeError(f"{method} {path} -> {status}: {raw[:300]!r}")
        return json.loads(raw)

    def close(self):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--commands", type=int, default=2000)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--dump", help="write the raw profile here")
    args = parser.parse_args()
    with (
        fresh_database(args.admin_url, "ddz_prof") as database_url,
        claimed_redis_db(args.redis_url) as redis_url,
    ):
        config = Config(
            database_url=database_url,
            redis_url=redis_url,
            operator_token=OPERATOR_TOKEN,
            **{f"rate_limit_{name}": "100000/second" for name in UNLIMITED_RATES},
        )
        app = create_app(config)
        logs.configure(stream=open(os.devnull, "w"))  # the JSON lines, as deployed
        try:
            http = WsgiHttp(app)
            connections = [http] * 4
            tokens = [
                http.call("POST", "/v1/players", body={"name": f"prof-{seat}"})["token"]
                for seat in range(4)
            ]
            stats = api_bench.ClientStats()
            game = api_bench.Game(connections, tokens, random.Random(7), stats, False)
            game.new_match()
            for _ in range(200):  # warm up
                game.step(timed=True)
            stats.latencies.clear()
            profile = cProfile.Profile(time.process_time)
            cpu0 = time.process_time()
            if not args.no_profile:
                profile.enable()
            while len(stats.latencies) < args.commands:
                game.step(timed=True)
            profile.disable()
            cpu = time.process_time() - cpu0
            n = len(stats.latencies)
            print(
                f"{n} commands, {stats.hands} hands, rejected {dict(stats.rejected)}: "
                f"{cpu / n * 1e3:.3f} ms CPU per command (client included"
                f"{'' if args.no_profile else ', profiled'}); "
                f"p50 {api_bench.percentile(stats.latencies, 0.5) * 1e3:.3f} ms"
            )
            if not args.no_profile:
                if args.dump:
                    profile.dump_stats(args.dump)
                pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)
        finally:
            app.extensions["ddz"].close()


if __name__ == "__main__":
    main()
