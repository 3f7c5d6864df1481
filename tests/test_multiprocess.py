"""The service as several processes on one database: two API processes (gunicorn with the
settings of ``service/gunicorn_conf.py``, one worker each) and two workers (``ddz worker``),
on a database and a Redis DB of this test's own. A hand is played with its commands
alternating between the two APIs; a stream on each API sees every event, the other
API's appends and the worker's settlement included, once and in order; the hand is
settled once. Every process started here is stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from api_support import (
    HttpApi,
    Observer,
    StreamReader,
    new_match,
    new_player,
    open_stream,
    sse_messages,
    take_seat,
    to_act,
)
from processes import WorkerProcess, gunicorn
from servers import OPERATOR_TOKEN, fresh_database, wait_until_ready

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


@pytest.fixture()
def cluster(postgres_admin_url, own_redis_url, tmp_path) -> Iterator[list[str]]:
    """The two APIs' base URLs, once both see a live worker."""
    with ExitStack() as stack:
        database_url = stack.enter_context(fresh_database(postgres_admin_url, "ddz_multi"))
        bases = []
        for name in ("api-a", "api-b"):
            base, proc = stack.enter_context(
                gunicorn(database_url, own_redis_url, tmp_path / f"{name}.log", WEB_CONCURRENCY="1")
            )
            bases.append((base, proc, tmp_path / f"{name}.log"))
        workers = []
        for name in ("worker-a", "worker-b"):
            worker = WorkerProcess(database_url, own_redis_url, tmp_path / f"{name}.log")
            stack.callback(worker.stop)
            workers.append(worker)
        for base, proc, log in bases:
            wait_until_ready(base, proc, log, path="/readyz")
        yield [base for base, _, _ in bases]
        for worker in workers:
            assert worker.alive(), worker.output()
            assert "Traceback" not in worker.full_output(), worker.output()


def act(players: list[Observer], match_id: str) -> dict:
    """The seat to act makes a legal move through the API ``players`` talk to: the first
    bidder takes the hand at 3, no 摊打, no 报到, then the first legal play (a pass only
    when nothing beats the table), so that the hand ends."""
    player, view = to_act(players, match_id)
    kinds = {a["action"] for a in view["actions"]}
    if "bid" in kinds:
        body = {"action": "bid", "value": 3}
    elif "show_hand" in kinds:
        body = {"action": "show_hand", "value": False}
    elif "report" in kinds:
        body = {"action": "report", "value": "decline"}
    else:
        legal = player.get(f"/v1/matches/{match_id}/legal").json
        body = (
            {"action": "play", "cards": legal["plays"][0]["cards"]}
            if legal["plays"]
            else {"action": "pass"}
        )
    reply = player.post(
        f"/v1/matches/{match_id}/commands", {**body, "expected_version": view["version"]}
    )
    assert reply.status == 200, reply.text
    return reply.json


def test_a_hand_played_across_two_apis_and_two_workers(cluster):
    apis = [HttpApi(base) for base in cluster]
    first = [new_player(apis[0], f"multi{seat}") for seat in range(4)]
    # The same players, talking to the other API.
    second = [Observer(apis[1], p.token, p.player_id, p.name) for p in first]
    by_api = [first, second]
    match_id = new_match(first[0])
    for seat in range(4):
        take_seat(by_api[seat % 2][seat], match_id, seat)

    readers = [
        StreamReader(base, match_id, by_api[i][i], until="settled")
        for i, base in enumerate(cluster)
    ]
    for reader in readers:
        reader.start()
    # And one read to its end: the server closes it right after `settled`.
    conn, whole = open_stream(cluster[0], match_id, first[0].token, timeout=30)

    answered_by = [0, 0]
    for step in range(400):
        api = step % 2
        answer = act(by_api[api], match_id)
        answered_by[api] += 1
        if answer["view"]["phase"] == "ended":
            break
    else:
        raise AssertionError("the hand did not end")
    assert min(answered_by) >= 10, answered_by

    for reader in readers:
        reader.finish(timeout=60)
    stored = (
        apis[1]
        .request("GET", f"/v1/matches/{match_id}/events?after=0", OPERATOR_TOKEN)
        .json["events"]
    )
    types = [e["type"] for e in stored]
    assert types[-1] == "settled" and types.count("settled") == 1, types[-3:]
    try:
        to_the_end = [m for m in sse_messages(whole) if m.kind == "message"]
    finally:
        whole.close()
        conn.close()
    ids = [int(m.id) for m in to_the_end]  # the snapshot's, then each event's once
    assert ids == list(range(ids[0], len(stored) + 1))
    assert to_the_end[-1].event == "settled"
    for reader in readers:
        snapshot = reader.messages()[0]
        assert snapshot.event == "snapshot"
        ids = reader.event_ids()
        assert ids == list(range(int(snapshot.id) + 1, len(stored) + 1))
        assert [m.event for m in reader.messages()[1:]] == types[int(snapshot.id) :]
