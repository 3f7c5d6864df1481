"""Bot developers' kit benchmark: arena hands per second with the example engine, and the
bridge's time from a "your turn" on the player's stream to the command's answer.

    python benchmarks/bridge_bench.py [--deals 100] [--hands 10] [--smoke]

1. The arena (``ddz arena``'s :func:`service.app.arena.run`): ``--deals`` deals in
   duplicate, examples/engine.py against the house bot (normal), next to the house bot
   against itself on the same deals (the same run: the ratio is what the engine protocol
   costs — processes, JSON lines, the API's view built for every decision).
2. The bridge: the service as ``ddz serve`` runs it (gunicorn, one API worker, one
   ``ddz worker``) on a fresh database on --admin-url and a Redis server of its own, over
   loopback; a player seated by the lobby with three system bots; the bridge
   (:class:`service.app.bridge.Bridge`, in this process) plays ``--hands`` hands with the
   example engine. Each turn is timed from the ``your_turn`` item's arrival off the stream
   to the command's answer: reading the view, the engine's decision, the command.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    command_line,
    free_port,
    parse,
    percentile,
    redis_server,
    scratch_database,
    wait_ready,
)
from ddz_client import Client

from service.app.arena import Contestant, run
from service.app.bridge import Bridge
from service.app.engine import Engine
from service.game import MatchSettings
from service.game.bot.levels import policy
from service.game.simulate import duplicate

EXAMPLE = f"{sys.executable} {ROOT / 'examples' / 'engine.py'}"
SEED = "0" * 63 + "1"


def arena(deals: int) -> None:
    table = MatchSettings.build()
    started = time.perf_counter()
    result = run([Contestant(engine=EXAMPLE), Contestant(level="normal")], deals, SEED, table)
    engine_seconds = time.perf_counter() - started
    started = time.perf_counter()
    duplicate(deals, SEED, table, policy("normal"), policy("normal"))
    bot_seconds = time.perf_counter() - started
    hands = result.runs[0].hands
    print(f"arena, {deals} deals ({hands} hands) in duplicate, shanghai-platform:")
    print(
        f"  example engine vs house bot (normal): {hands / engine_seconds:7.1f} hands/s"
        f"  ({engine_seconds:.2f} s)"
    )
    print(
        f"  house bot vs house bot (normal):      {hands / bot_seconds:7.1f} hands/s"
        f"  ({bot_seconds:.2f} s)"
    )


class TimedEngine(Engine):
    """The engine, each decision timed (the engine's share of a turn)."""

    def __init__(self, command: str) -> None:
        super().__init__(command)
        self.seconds: list[float] = []

    def decide(self, message: dict[str, Any], seconds: float) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            return super().decide(message, seconds)
        finally:
            self.seconds.append(time.perf_counter() - started)


def bridge(hands: int, admin_url: str, data: str | None) -> None:
    with (
        scratch_database(admin_url) as (_, url),
        redis_server() as redis_url,
        tempfile.TemporaryDirectory(prefix="ddz-bridge-bench-") as scratch,
    ):
        serve_and_play(hands, url, redis_url, Path(data or scratch))


def serve_and_play(hands: int, url: str, redis_url: str, data: Path) -> None:
    """The service as ``ddz serve`` runs it on that database and Redis server, and the
    bridge playing ``hands`` hands on it."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": redis_url,
        "DDZ_LOBBY_BOTS_AFTER": "0",
        "DDZ_TABLE_NEXT_HAND_SECONDS": "0",
        "DDZ_RATE_LIMITS": "false",
    }
    serve = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "1"]
        + ["--data", str(data)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{base}/readyz", serve)
        with Client.register(base, "bench-bot") as client:
            engine = TimedEngine(EXAMPLE)
            played = Bridge(client, engine, hands=hands)
            started = time.perf_counter()
            played.run()
            seconds = time.perf_counter() - started
        turns = [s * 1000 for s in played.turn_seconds]
        print(f"bridge over loopback, example engine, {hands} hands with 3 system bots:")
        print(
            f"  your_turn on the stream -> command answered: p50 {statistics.median(turns):.1f} ms,"
            f" p99 {percentile(turns, 0.99):.1f} ms, max {max(turns):.1f} ms"
            f"  ({len(turns)} turns; {hands / seconds * 60:.0f} hands/min)"
        )
        thinking = [s * 1000 for s in engine.seconds]
        print(
            f"  of which the engine (a JSON line each way): p50 {statistics.median(thinking):.1f}"
            f" ms, p99 {percentile(thinking, 0.99):.1f} ms"
        )
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(30)


def main() -> None:
    parser = command_line(__doc__, postgres=True)
    parser.add_argument("--deals", type=int, default=100)
    parser.add_argument("--hands", type=int, default=10)
    parser.add_argument(
        "--data", help="ddz serve's data directory (its logs; default: a temporary one)"
    )
    args = parse(parser, deals=2, hands=1)
    arena(args.deals)
    bridge(args.hands, args.admin_url, args.data)


if __name__ == "__main__":
    main()
