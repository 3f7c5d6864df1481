"""What metrics and structured logs cost each request and each command, in CPU time, on
one process, apart from the database and the machine's other load:

    .venv/bin/python benchmarks/observe_bench.py [--requests N] [--per-command-ms 2.0] [--smoke]

It serves ``GET /healthz`` (no database) N times through the app's WSGI stack, once
without and once with the request hooks of ``service/api/observe.py`` (the request id, the
latency histogram, one JSON access line written to a file), with prometheus_client in
multiprocess mode as under gunicorn; and it times what the command path adds to a command
(the command counter, the append histogram). The sum, over the CPU a command takes in
gunicorn (``benchmarks/api_bench.py`` prints it as "CPU per command: gunicorn"; give it
with ``--per-command-ms``), is the share of commands/s that metrics and logs cost on a
machine whose CPU is the limit. Each variant runs in a fresh process, alternately, and
the best of ``--rounds`` is kept, so that other load on the machine counts least.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time

from common import command_line, parse


def measure(variant: str, requests: int) -> float:
    """CPU microseconds per unit of work of one variant, in this process."""
    from service.api import create_app, observe
    from service.app import logs
    from service.app.metrics import APPEND_SECONDS, COMMANDS
    from service.config import Config

    if variant == "command":
        start = time.process_time()
        for _ in range(requests):
            with APPEND_SECONDS.time():
                pass
            COMMANDS.labels("play", "ok").inc()
        return (time.process_time() - start) / requests * 1e6
    app = create_app(Config(), connect=False)
    if variant == "observed":
        observe.install(app)
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as out:
            logs.configure(stream=open(out.name, "w"))  # noqa: SIM115 (kept for the run)
    else:
        logging.getLogger("ddz").setLevel(logging.WARNING)
    client = app.test_client()
    for _ in range(200):  # warm-up
        client.get("/healthz")
    start = time.process_time()
    for _ in range(requests):
        client.get("/healthz")
    return (time.process_time() - start) / requests * 1e6


def main() -> int:
    parser = command_line(__doc__)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--per-command-ms",
        type=float,
        default=None,
        help="gunicorn CPU per command measured by api_bench.py, to express the cost as a share",
    )
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parse(parser, requests=200, rounds=1, per_command_ms=2.0)
    if args.variant:
        print(json.dumps(measure(args.variant, args.requests)))
        return 0
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ddz-observe-bench-") as metrics_dir:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
        for _ in range(args.rounds):
            for variant in ("bare", "observed", "command"):
                out = subprocess.run(
                    [sys.executable, __file__, "--variant", variant]
                    + ["--requests", str(args.requests)],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                value = json.loads(out.strip().splitlines()[-1])
                best[variant] = min(best.get(variant, value), value)
    per_request = best["observed"] - best["bare"]
    per_command = per_request + best["command"]
    print(f"GET /healthz without metrics and logs: {best['bare']:.1f} us CPU per request")
    print(f"GET /healthz with them:                {best['observed']:.1f} us CPU per request")
    print(f"  cost per request (hooks, histogram, JSON line): {per_request:.1f} us")
    print(f"  cost the command path adds (counter, append histogram): {best['command']:.1f} us")
    print(f"  cost per command: {per_command:.1f} us")
    if args.per_command_ms:
        share = per_command / (args.per_command_ms * 1000) * 100
        print(
            f"  = {share:.1f} % of {args.per_command_ms} ms gunicorn CPU per command"
            " (target <= 5 %)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
