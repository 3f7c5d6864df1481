"""Worker benchmark: bot-turn latency (from the append that hands a bot its turn to the
bot's own append), all-bot hands completed per minute with many concurrent matches and
two worker processes, and the settlement job's time.

    python benchmarks/worker_bench.py [--matches 100] [--workers 2] [--bot-level normal]
                                      [--smoke]

Uses a fresh database on --admin-url and the Redis database --redis-url (flushed).
Targets: bot-turn p50 <= 50 ms with one worker; at ``--bot-level hard`` (a 50 ms search),
<= 100 ms.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

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
from flask.testing import FlaskClient

from service.api import create_app
from service.config import Config


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
