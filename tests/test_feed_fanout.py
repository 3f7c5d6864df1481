"""The players' streams in one process share one reader of the feed
(service/app/feed_fanout.py): an event that concerns two players with a stream open here
is read once and handed to both, the same items as their own reads give; a stream resumed
with ``Last-Event-ID`` after the reader stopped (its last stream closed) and a new one
started gets exactly what it missed. Over real HTTP, with real RQ jobs (burst mode)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_support import bearer, open_sse, sse_messages, wait_for
from jobs import choose, feed, join, new_player, new_table, run_burst, worker_app
from prometheus_client import REGISTRY
from servers import serving

# Slow: plays hands through real workers and waits for deadlines (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(worker_database_url, worker_redis_url):
    """An app whose streams stay open longer than the tests take, over HTTP."""
    app = worker_app(worker_database_url, worker_redis_url, rate_limits=False, stream_seconds=60.0)
    with serving(app) as base:
        yield base, app
    app.extensions["ddz"].close()


def items(response) -> Iterator[dict]:
    """The stream's messages (``ready`` included), comments left out."""
    for message in sse_messages(response):
        if message.kind == "message":
            yield {"event": message.event, "id": message.id, **(message.json or {})}


def until(stream: Iterator[dict], kind: str) -> list[dict]:
    """The stream's items up to the first of ``kind``, that one included."""
    got = []
    for item in stream:
        got.append(item)
        if item["event"] == kind:
            return got
    raise AssertionError(f"the stream ended before a {kind}: {got}")


def stripped(found: list[dict]) -> list[dict]:
    """Stream messages as the page gives items (without the SSE fields)."""
    return [{k: v for k, v in m.items() if k != "event"} for m in found]


def catch_ups() -> dict[str, float]:
    """The process's ``ddz_stream_catch_ups_total``, by source."""
    return {
        source: REGISTRY.get_sample_value("ddz_stream_catch_ups_total", {"source": source}) or 0.0
        for source in ("kept", "feed")
    }


def to_first_turn(base: str, rconn, token: str, fanout) -> tuple[str, list[dict], object]:
    """The player's stream from its start (the ``ready`` id) to its first ``your_turn``,
    the bots dealing and playing on, then closed; and the process's reader that served it."""
    conn, response = open_sse(base, "/v1/me/stream", token, timeout=30)
    try:
        reader = items(response)
        start = next(reader)["id"]
        run_burst(rconn)
        return start, until(reader, "your_turn"), fanout.reader
    finally:
        response.close()
        conn.close()


def missed_while_away(api, rconn, token: str, turn: dict) -> list[dict]:
    """The player acts on ``turn`` and the bots play on: what its stream then misses."""
    view = api.get(f"/v1/matches/{turn['match_id']}", headers=bearer(token)).json
    body = {**choose(api, turn["match_id"], token, view), "expected_version": view["version"]}
    reply = api.post(f"/v1/matches/{turn['match_id']}/commands", json=body, headers=bearer(token))
    assert reply.status_code == 200, reply.json
    run_burst(rconn)
    missed = feed(api, token, turn["id"], wait=5)["items"]
    assert missed, "the hand went on"
    return missed


def test_two_players_streams_are_served_by_one_read(served, rconn, jobs_env, monkeypatch):
    base, app = served
    api = app.test_client()
    services = app.extensions["ddz"]
    tokens = [new_player(api, f"share{n}")[1] for n in range(2)]
    table_id = new_table(api, tokens[0], bots_after=0, next_hand_seconds=60, turn_seconds=60)[
        "table_id"
    ]
    assert join(api, table_id, tokens[1]).status_code == 201
    # What is read: each player's own reads, and the shared reader's (events by type).
    own: list[tuple] = []
    shared: list[list[str]] = []
    store_feed = services.feed.feed
    read, read_all = store_feed.read, store_feed.read_all
    monkeypatch.setattr(store_feed, "read", lambda *a: own.append(a) or read(*a))

    def counted(*args):
        answer = read_all(*args)
        shared.append([fe.stored.event.type for fe, _ in answer[0]])
        return answer

    monkeypatch.setattr(store_feed, "read_all", counted)

    streams = [open_sse(base, "/v1/me/stream", token, timeout=30) for token in tokens]
    try:
        readers = [items(response) for _, response in streams]
        starts = [next(reader) for reader in readers]
        assert [s["event"] for s in starts] == ["ready", "ready"]
        wait_for(lambda: services.feed_fanout.reader.subscribers == 2)
        run_burst(rconn)  # the bots take the empty seats, and the hand is dealt
        dealt = [until(reader, "hand_started")[-1] for reader in readers]
    finally:
        for conn, response in streams:
            response.close()
            conn.close()
    # One event, one read, two players: each its own hand, from the same event.
    assert dealt[0]["match_id"] == dealt[1]["match_id"]
    assert dealt[0]["id"].rsplit("-", 1)[0] == dealt[1]["id"].rsplit("-", 1)[0]
    assert dealt[0]["hand"] != dealt[1]["hand"]
    assert sum(types.count("hand_dealt") for types in shared) == 1
    assert own == []  # no stream read the feed itself
    # The same items as each player's own read gives.
    for token, start, hand in zip(tokens, starts, dealt):
        page = feed(api, token, start["id"])["items"]
        assert stripped([hand])[0] in page
    wait_for(lambda: services.feed_fanout.reader is None)  # the last stream gone, so is it


def test_a_stream_resumes_across_a_restart_of_the_shared_reader(served, rconn, jobs_env):
    base, app = served
    api = app.test_client()
    fanout = app.extensions["ddz"].feed_fanout
    _, token = new_player(api, "restart")
    new_table(api, token, bots_after=0, next_hand_seconds=60, turn_seconds=60)
    start, seen, first = to_first_turn(base, rconn, token, fanout)
    wait_for(lambda: fanout.reader is None)  # its only stream closed: the reader stopped
    # Meanwhile the player acts and the bots play on: nobody here reads the feed.
    turn = seen[-1]
    missed = missed_while_away(api, rconn, token, turn)

    conn, response = open_sse(base, "/v1/me/stream", token, turn["id"], timeout=30)
    try:
        reader = items(response)
        # What it missed, read by the stream itself up to where the new reader started ...
        resumed = [next(reader) for _ in missed]
        assert fanout.reader is not None and fanout.reader is not first
        # ... then what the new reader hands it.
        view = api.get(f"/v1/matches/{turn['match_id']}", headers=bearer(token)).json
        if view["phase"] != "ended":
            body = {
                **choose(api, turn["match_id"], token, view),
                "expected_version": view["version"],
            }
            reply = api.post(
                f"/v1/matches/{turn['match_id']}/commands", json=body, headers=bearer(token)
            )
            assert reply.status_code == 200, reply.json
            run_burst(rconn)
            resumed.append(next(reader))
    finally:
        response.close()
        conn.close()
    assert all(m["event"] != "ready" for m in resumed)  # a resumed stream starts after its id
    everything = feed(api, token, start)["items"]
    assert stripped(seen + resumed) == everything[: len(seen) + len(resumed)]


@pytest.mark.parametrize("kept_events", [20_000, 1])
def test_a_resumed_stream_catches_up_from_what_the_reader_keeps(
    served, rconn, jobs_env, monkeypatch, kept_events
):
    """While the reader lives (another player's stream keeps it), a stream resumed from an
    id it still keeps gets what it missed from there, reading nothing itself; from an id
    older than what it keeps, from the feed. The same items either way."""
    import service.app.feed_fanout as feed_fanout

    monkeypatch.setattr(feed_fanout, "KEPT_EVENTS", kept_events)
    base, app = served
    api = app.test_client()
    services = app.extensions["ddz"]
    _, watcher = new_player(api, "keeper")
    _, token = new_player(api, "away")
    new_table(api, token, bots_after=0, next_hand_seconds=60, turn_seconds=60)
    own: list[tuple] = []
    store_feed = services.feed.feed
    read = store_feed.read
    monkeypatch.setattr(store_feed, "read", lambda *a: own.append(a) or read(*a))
    keeper = open_sse(base, "/v1/me/stream", watcher, timeout=30)
    try:
        assert next(items(keeper[1]))["event"] == "ready"
        start, seen, first = to_first_turn(base, rconn, token, services.feed_fanout)
        missed = missed_while_away(api, rconn, token, seen[-1])
        own.clear()
        counted = catch_ups()
        conn, response = open_sse(base, "/v1/me/stream", token, seen[-1]["id"], timeout=30)
        try:
            reader = items(response)
            resumed = [next(reader) for _ in missed]
            caught_up_by = list(own)  # the resumed stream's own reads of the feed
        finally:
            response.close()
            conn.close()
        assert services.feed_fanout.reader is first  # one reader all along
    finally:
        keeper[1].close()
        keeper[0].close()
    assert stripped(resumed) == missed
    assert stripped(seen + resumed) == feed(api, token, start)["items"][: len(seen) + len(resumed)]
    source = "kept" if kept_events > 1 else "feed"
    if source == "kept":
        assert caught_up_by == []  # from the reader's events
    else:
        assert caught_up_by, "an id older than what the reader keeps is read from the feed"
    # Operators see where the resumptions read from (docs/operations.md, "Metrics").
    now = catch_ups()
    assert {k: now[k] - counted[k] for k in now} == {s: float(s == source) for s in now}
