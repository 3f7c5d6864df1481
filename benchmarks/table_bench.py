"""Table benchmark: hands per minute that tables of one player and three system bots play
hand after hand, and how soon "your turn" reaches the player on its own stream.

    python benchmarks/table_bench.py [--tables 20] [--seconds 60] [--warmup 20] [--workers 2]
                                     [--smoke]

Uses a fresh database on --admin-url and a Redis server of its own (``redis-server`` on a
free port), both dropped at the end; starts ``--workers`` worker processes (``ddz
worker``) and serves the API in this process (its test client: no HTTP, each client a
thread). Each table is made by its player with ``bots_after`` 0 (bots at once) and
``next_hand_seconds`` 0; the player's thread long-polls ``GET /v1/me/events`` and acts on
each ``your_turn`` at once (the highest bid, no 摊打 or 报到, the first legal play). The
figures, over the ``--seconds`` after a ``--warmup`` (the tables made, their first hands
under way): hands settled per minute, and the delay of each ``your_turn`` from
its event's recording (``at``) to the client reading it (one clock: this machine's).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from common import (
    command_line,
    parse,
    percentile,
    redis_server,
    scratch_database,
    start_workers,
    terminate,
)
from flask import Flask
from flask.testing import FlaskClient

from service.api import create_app
from service.config import Config


def choose(item: dict[str, Any], legal: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The first action a ``your_turn`` offers, at its highest choice; the first legal
    play (``legal``: the match's ``/legal``), or a pass when there is none."""
    action = item["actions"][0]
    if action["action"] == "bid":
        return {"action": "bid", "value": action["choices"][-1]}
    if action["action"] in ("show_hand", "report"):
        return {"action": action["action"], "value": action["choices"][-1]}
    plays = legal()["plays"]
    if plays:
        return {"action": "play", "cards": plays[0]["cards"]}
    return {"action": "pass"}


def legal(client: FlaskClient, match: str, auth: dict[str, str]) -> dict[str, Any]:
    """The match's ``/legal``, read by its player."""
    plays: dict[str, Any] = client.get(f"{match}/legal", headers=auth).get_json()
    return plays


def player(app: Flask, done: threading.Event, delays: list[float], hands: list[int]) -> None:
    client = app.test_client()
    token = client.post("/v1/players", json={"name": "bench"}).get_json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    client.post("/v1/tables", json={"bots_after": 0, "next_hand_seconds": 0}, headers=auth)
    after = None
    while not done.is_set():
        query = {"wait": 5} | ({} if after is None else {"after": after})
        page = client.get("/v1/me/events", query_string=query, headers=auth).get_json()
        read = datetime.now(UTC)
        after = page["last_id"] or after
        turns = [i for i in page["items"] if i["type"] == "your_turn"]
        hands.extend(1 for i in page["items"] if i["type"] == "settled")
        delays.extend((read - datetime.fromisoformat(t["at"])).total_seconds() for t in turns)
        if turns:  # the last is the present (an earlier one of the page was acted on)
            match = f"/v1/matches/{turns[-1]['match_id']}"
            body = choose(turns[-1], partial(legal, client, match, auth))
            body["expected_version"] = turns[-1]["version"]
            client.post(f"{match}/commands", json=body, headers=auth)


def run(tables: int, seconds: float, warmup: float, workers: int, admin_url: str) -> None:
    with scratch_database(admin_url) as (_, url), redis_server() as redis_url:
        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url}
        app = create_app(Config(database_url=url, redis_url=redis_url, rate_limits=False))
        procs = []
        done = threading.Event()
        delays: list[float] = []
        hands: list[int] = []
        try:
            procs = start_workers(workers, env)
            threads = [
                threading.Thread(target=player, args=(app, done, delays, hands), daemon=True)
                for _ in range(tables)
            ]
            for thread in threads:
                thread.start()
            time.sleep(warmup)
            delays.clear()
            before = len(hands)
            time.sleep(seconds)
            settled = len(hands) - before
            done.set()
            for thread in threads:
                thread.join(timeout=10)
            print(
                f"{tables} tables (1 player, 3 bots each), {workers} workers, {seconds:.0f} s"
                f" after {warmup:.0f} s: {settled / seconds * 60:,.0f} hands/min"
            )
            if delays:
                ms = [d * 1000 for d in delays]
                print(
                    f"your_turn on the player's stream, recorded to read: p50"
                    f" {statistics.median(ms):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms"
                    f" ({len(ms)} turns)"
                )
        finally:
            done.set()
            terminate(procs, timeout=15)
            app.extensions["ddz"].close()


def main() -> None:
    parser = command_line(__doc__, postgres=True)
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parse(parser, tables=2, seconds=1, warmup=2, workers=1)
    run(args.tables, args.seconds, args.warmup, args.workers, args.admin_url)


if __name__ == "__main__":
    main()
