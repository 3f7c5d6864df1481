"""Worker benchmark: bot-turn latency (from the append that hands a bot its turn to the
bot's own append), one worker's throughput (bot turns and settlements per CPU-second of
the worker process), all-bot hands completed per minute with many concurrent matches and
two worker processes, and the settlement job's time.

    python benchmarks/worker_bench.py [--matches 100] [--workers 2] [--bot-level normal]
                                      [--smoke]

Uses a fresh database on --admin-url and the Redis database --redis-url (flushed). The
workers run the interpreter and PYTHONPATH of this script: ``PYTHONPATH=$(bin/compiled)``
measures them with the compiled modules, as deployed.

One worker's throughput: ``--matches`` all-bot matches at once on one worker, its CPU
time (user and system) over the whole run: bot turns per CPU-second counts everything the
worker did meanwhile, the hands' settlements too; then as many hands played by players
(their commands decided in this process), so that the worker has only their settlements
to do (with the rating and the table's record each settlement calls for): settlements per
CPU-second. Bot turns per CPU-second net of settling are the first CPU time less the
second's share per settlement.

Targets: bot-turn p50 <= 50 ms with one worker; at ``--bot-level hard`` (a 50 ms search),
<= 100 ms.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

import psutil
import psycopg
from common import (
    command_line,
    flushed,
    parse,
    percentile,
    scratch_database,
    start_workers,
    terminate,
)
from flask import Flask
from flask.testing import FlaskClient

from service.api import create_app
from service.app.commands import CommandRequest
from service.config import Config
from service.game import seat_view
from service.game.bot.levels import policy
from service.game.state import ENDED


def create_bot_matches(client: FlaskClient, token: str, count: int, level: str) -> list[str]:
    auth = {"Authorization": f"Bearer {token}"}
    ids = []
    for _ in range(count):
        answer = client.post("/v1/matches", json={"bot_level": level}, headers=auth).json
        assert answer is not None
        match: str = answer["match_id"]
        for seat in range(4):
            client.post(
                f"/v1/matches/{match}/seats", json={"seat": seat, "bot": True}, headers=auth
            )
        ids.append(match)
    return ids


def play_player_matches(app: Flask, client: FlaskClient, count: int) -> list[str]:
    """``count`` matches of four players, each played to its end by ``normal`` deciding
    every seat's command in this process: the worker's only work is their settlements."""
    tokens = []
    for seat in range(4):
        answer = client.post("/v1/players", json={"name": f"worker-bench-{seat}"}).json
        assert answer is not None
        tokens.append(answer["token"])
    commands = app.extensions["ddz"].commands
    bot = policy("normal")
    ids = []
    for _ in range(count):
        auth = {"Authorization": f"Bearer {tokens[0]}"}
        answer = client.post("/v1/matches", json={"turn_seconds": 3600}, headers=auth).json
        assert answer is not None
        match: str = answer["match_id"]
        for seat, token in enumerate(tokens):
            client.post(
                f"/v1/matches/{match}/seats",
                json={"seat": seat},
                headers={"Authorization": f"Bearer {token}"},
            )
        while True:
            outcome = commands.execute(
                CommandRequest(
                    uuid.UUID(match),
                    lambda state: bot.act(seat_view(state, state.turn)),
                )
            )
            if outcome.state.phase == ENDED:
                break
        ids.append(match)
    return ids


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def wait_settled(url: str, ids: list[str], timeout: float) -> float:
    start = time.perf_counter()
    done = 0
    with psycopg.connect(url) as conn:
        while time.perf_counter() - start < timeout:
            row = conn.execute(
                "SELECT count(*) FROM matches WHERE settled AND match_id = ANY(%s)",
                ([uuid.UUID(i) for i in ids],),
            ).fetchone()
            done = row[0] if row else 0
            if done == len(ids):
                return time.perf_counter() - start
            time.sleep(0.05)
    raise TimeoutError(f"only {done} of {len(ids)} hands settled in {timeout} s")


def latencies(url: str, ids: list[str]) -> tuple[list[float], list[float]]:
    """Bot turns: each bot decision's time after the event before it. Settlement: the
    time from hand_ended to settled."""
    bot: list[float] = []
    settle: list[float] = []
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT stream_id, type, payload->>'by', recorded_at,"
            " lag(recorded_at) OVER (PARTITION BY stream_id ORDER BY version) FROM events"
            " WHERE stream_id = ANY(%s) ORDER BY stream_id, version",
            ([uuid.UUID(i) for i in ids],),
        ).fetchall()
    for _, kind, by, at, before in rows:
        if before is None:
            continue
        if by == "bot":
            bot.append((at - before).total_seconds())
        elif kind == "settled":
            settle.append((at - before).total_seconds())
    return bot, settle


def run(
    matches: int,
    alone: int,
    workers: int,
    admin_url: str,
    redis_url: str,
    timeout: float,
    level: str,
) -> None:
    with scratch_database(admin_url) as (_, url), flushed(redis_url):
        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url}
        # The bench creates its matches faster than a person may: no rate limits. Matches
        # of bots alone are an operator's.
        token = "worker-bench-operator"
        app = create_app(
            Config(database_url=url, redis_url=redis_url, rate_limits=False, operator_token=token)
        )
        procs = []
        try:
            client = app.test_client()

            procs = start_workers(1, env)
            time.sleep(1.5)
            one: list[str] = []
            for _ in range(alone):  # one match at a time: the latency of a turn, not of a queue
                one += create_bot_matches(client, token, 1, level)
                wait_settled(url, one[-1:], timeout)
            bot_one, settle_one = latencies(url, one)
            print(
                f"{'bot turn, 1 worker, 1 match at a time':<44} p50 {statistics.median(bot_one) * 1e3:7.1f} ms   p99 {percentile(bot_one, 0.99) * 1e3:7.1f} ms   ({len(bot_one)} turns)"
            )
            print(
                f"{'settlement, 1 worker (hand_ended to settled)':<44} p50 {statistics.median(settle_one) * 1e3:7.1f} ms   max {max(settle_one) * 1e3:7.1f} ms   ({len(settle_one)} hands)"
            )

            # One worker's throughput, in its own CPU time.
            worker = psutil.Process(procs[0].pid)
            cpu = cpu_seconds(worker)
            started = time.perf_counter()
            busy = create_bot_matches(client, token, matches, level)
            wait_settled(url, busy, timeout)
            total = time.perf_counter() - started
            cpu = cpu_seconds(worker) - cpu
            turns = len(latencies(url, busy)[0])
            cpu_settle = cpu_seconds(worker)
            played = play_player_matches(app, client, matches)
            wait_settled(url, played, timeout)
            cpu_settle = cpu_seconds(worker) - cpu_settle
            per_settlement = cpu_settle / len(played)
            print(
                f"{f'1 worker, {matches} all-bot matches at once':<44} {turns / total:9,.1f} bot turns/s"
                f"   {turns / cpu:9,.1f} per CPU-second ({turns} turns, {cpu:.1f} CPU-s)"
            )
            print(
                f"{'1 worker, settlements alone':<44} {len(played) / cpu_settle:9,.1f} per CPU-second"
                f"   ({per_settlement * 1e3:.1f} ms each, {len(played)} hands)"
            )
            print(
                f"{'1 worker, bot turns net of settling':<44} {turns / (cpu - per_settlement * len(busy)):9,.1f} per CPU-second"
            )

            procs += start_workers(workers - 1, env)
            time.sleep(1.5)
            started = time.perf_counter()
            many = create_bot_matches(client, token, matches, level)
            wait_settled(url, many, timeout)
            total = time.perf_counter() - started
            bot_many, settle = latencies(url, many)
            print(
                f"{f'all-bot hands, {matches} concurrent, {workers} workers':<44} {matches / total * 60:9,.0f} hands/min   ({total:.1f} s for {matches} hands)"
            )
            print(
                f"{'bot turn under that load':<44} p50 {statistics.median(bot_many) * 1e3:7.1f} ms   p99 {percentile(bot_many, 0.99) * 1e3:7.1f} ms"
            )
            print(
                f"{'settlement (hand_ended to settled)':<44} p50 {statistics.median(settle) * 1e3:7.1f} ms   p99 {percentile(settle, 0.99) * 1e3:7.1f} ms"
            )
        finally:
            terminate(procs, timeout=15)
            app.extensions["ddz"].close()


def main() -> None:
    parser = command_line(__doc__, postgres=True, redis_database=True)
    parser.add_argument("--matches", type=int, default=100)
    parser.add_argument(
        "--alone", type=int, default=5, help="matches played one at a time first (default 5)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--bot-level", default="normal", choices=("easy", "normal", "hard"))
    args = parse(parser, matches=2, alone=1, timeout=60)
    run(
        args.matches,
        args.alone,
        args.workers,
        args.admin_url,
        args.redis_url,
        args.timeout,
        args.bot_level,
    )


if __name__ == "__main__":
    main()
