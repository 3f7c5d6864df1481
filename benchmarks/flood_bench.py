"""Flood benchmark: what a flood from one token does to another player's commands.

    .venv/bin/python benchmarks/flood_bench.py [--seconds S] [--flooders N] [--limits on|off]
                                                [--smoke]

It starts the API under gunicorn as benchmarks/api_bench.py does (a scratch database, a
Redis DB of its own, ``service/gunicorn_conf.py``), with the default rate limits (or none,
``--limits off``, to see what the limits buy). One client plays a match at a steady pace
(a command every ``--interval`` seconds, each seat with its own token), from 127.0.0.3;
its command round trips are timed for S seconds alone, then for S seconds while N threads
send commands as fast as they can, all with one token, from 127.0.0.2 (so that the
per-address limits keep the two apart as they would two machines). Loopback only; every
loop is bounded by time and the flood also by ``--max-flood`` requests. Prints the
player's p50 and p99 in both phases and what the flood's requests were answered.

Target: with the flood, the player's p50 within 3x and a few ms of its p50 alone.
"""

from __future__ import annotations

import random
import socket
import sys
import threading
import time
from collections import Counter

from api_bench import ClientStats, Environment, Game, Http, serve
from common import command_line, ms, parse, percentile

FLOODER_ADDRESS, PLAYER_ADDRESS = "127.0.0.2", "127.0.0.3"


class HttpFrom(Http):
    """A connection from a given loopback address."""

    def __init__(self, port: int, source: str):
        super().__init__(port)
        self.source = source

    def open(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(
                ("127.0.0.1", self.port), timeout=60, source_address=(self.source, 0)
            )
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock


def play(game: Game, seconds: float, interval: float, stop: threading.Event) -> list[float]:
    """The player's command round trips over ``seconds``, one command per ``interval``."""
    game.stats.latencies.clear()
    deadline = time.perf_counter() + seconds
    while not stop.is_set() and time.perf_counter() < deadline:
        started = time.perf_counter()
        game.step(timed=True)
        time.sleep(max(0.0, interval - (time.perf_counter() - started)))
    return list(game.stats.latencies)


def flood(
    port: int, token: str, path: str, threads: int, seconds: float, most: int, stop: threading.Event
) -> Counter[int | str]:
    """Commands from one token, as fast as ``threads`` connections send them; the count of
    each status answered."""
    answered: Counter[int | str] = Counter()
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def sender() -> None:
        http = HttpFrom(port, FLOODER_ADDRESS)
        try:
            while not stop.is_set() and time.perf_counter() < deadline:
                with lock:
                    if sum(answered.values()) >= most:
                        return
                status: int | str
                try:
                    status, _, _ = http.send("POST", path, token, {"action": "pass"})
                except OSError:
                    status = "dropped"
                with lock:
                    answered[status] += 1
        finally:
            http.close()

    workers = [threading.Thread(target=sender, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answered


def main() -> int:
    parser = command_line(__doc__, postgres=True, redis_database=True)
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="length of each phase (default 5)"
    )
    parser.add_argument(
        "--flooders", type=int, default=8, help="connections of the flood (default 8)"
    )
    parser.add_argument(
        "--max-flood", type=int, default=50_000, help="at most this many flood requests"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=0.1,
        help="the player's pace: seconds per command (default 0.1)",
    )
    parser.add_argument(
        "--limits",
        choices=("on", "off"),
        default="on",
        help="the server's rate limits (default on, as configured)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="gunicorn workers (default as ddz serve: one per core)",
    )
    parser.add_argument("--keep-log", action="store_true", help="keep gunicorn's log file")
    args = parse(parser, seconds=0.5, flooders=2, max_flood=500, interval=0.05)
    args.worker_class, args.threads, args.access_log, args.app, args.compiled = (
        "gevent",
        0,
        False,
        "service.api.wsgi:app",
        False,
    )

    def measure(env: Environment, stop: threading.Event) -> int:
        http = HttpFrom(env.port, PLAYER_ADDRESS)
        tokens = [
            http.call("POST", "/v1/players", body={"name": f"player{seat}"})["token"]
            for seat in range(4)
        ]
        game = Game([http] * 4, tokens, random.Random(7), ClientStats(), idempotency=False)
        game.new_match()
        flooder = HttpFrom(env.port, FLOODER_ADDRESS)
        flooder_token = flooder.call("POST", "/v1/players", body={"name": "flooder"})["token"]
        flooder.close()

        print(
            f"the player alone: {args.seconds:g} s, a command every {args.interval:g} s", flush=True
        )
        alone = play(game, args.seconds, args.interval, stop)
        print(
            f"the player with a flood from one token on {args.flooders} connections (limits {args.limits})",
            flush=True,
        )
        answered: Counter[int | str] = Counter()
        flooding = threading.Thread(
            target=lambda: answered.update(
                flood(
                    env.port,
                    flooder_token,
                    f"{game.path}/commands",
                    args.flooders,
                    args.seconds,
                    args.max_flood,
                    stop,
                )
            ),
            daemon=True,
        )
        flooding.start()
        during = play(game, args.seconds, args.interval, stop)
        flooding.join()
        http.close()

        print()
        print(f"{'the player':<28}{'commands':>10}{'p50':>12}{'p99':>12}")
        for name, latencies in (("alone", alone), ("during the flood", during)):
            print(
                f"  {name:<26}{len(latencies):>10}{ms(percentile(latencies, 0.5)):>12}{ms(percentile(latencies, 0.99)):>12}"
            )
        total = sum(answered.values())
        print(
            f"the flood: {total} requests in {args.seconds:g} s, answered "
            + ", ".join(f"{k}: {v}" for k, v in sorted(answered.items(), key=str))
        )
        print(f"  429 (rate_limited): {answered.get(429, 0)}")
        if game.stats.rejected:
            print(f"the player's refused commands: {dict(game.stats.rejected)}")
        p50_alone, p50_during = percentile(alone, 0.5), percentile(during, 0.5)
        ok = p50_during <= 3 * p50_alone + 0.003
        print(f"target: p50 during <= 3x alone + 3 ms: {'ok' if ok else 'MISSED'}")
        return 0

    return serve(args, {"DDZ_RATE_LIMITS": args.limits}, measure)


if __name__ == "__main__":
    sys.exit(main())
