"""Bot developers' kit benchmark: arena hands per second with the example engine, and the
bridge's time from a "your turn" on the player's stream to the command's answer.

    python benchmarks/bridge_bench.py [--deals 100] [--hands 10]

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

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ddz_client import Client  # noqa: E402

from benchmarks.table_bench import free_port, redis_server  # noqa: E402
from benchmarks.worker_bench import fresh_database, percentile  # noqa: E402
from service.app.arena import run  # noqa: E402
from service.app.bridge import Bridge  # noqa: E402
from service.app.engine import Engine  # noqa: E402
from service.game import Table  # noqa: E402
from service.game.bot.levels import policy  # noqa: E402
from service.game.simulate import duplicate  # noqa: E402

EXAMPLE = f"{sys.executable} {ROOT / 'examples' / 'engine.py'}"
SEED = "0" * 63 + "1"


def arena(deals: int) -> None:
    table = Table.build()
    started = time.perf_counter()
    result = run([EXAMPLE], deals, SEED, table)
    engine_seconds = time.perf_counter() - started
    started = time.perf_counter()
    duplicate(deals, SEED, table, policy("normal"), policy("normal"))
    bot_seconds = time.perf_counter() - started
    hands = result.result.hands
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


def wait_ready(base: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("the service did not get ready")


def bridge(hands: int, admin_url: str, data: Path) -> None:
    name, url = fresh_database(admin_url)
    redis, redis_url = redis_server()
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
        wait_ready(base)
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
        os.killpg(serve.pid, 15)
        serve.wait(30)
        redis.terminate()
        redis.wait()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deals", type=int, default=100)
    parser.add_argument("--hands", type=int, default=10)
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--data", default="/tmp/ddz-bridge-bench")
    args = parser.parse_args()
    arena(args.deals)
    bridge(args.hands, args.admin_url, Path(args.data))


if __name__ == "__main__":
    main()
