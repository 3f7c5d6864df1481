"""The event stream (Server-Sent Events) and the long-poll, over real HTTP.

A fresh connection gets ``retry``, then ``event: snapshot`` whose ``id`` is the version of
the view it carries, then every event the caller may see with ``id:`` = its version. A
client that drops and reconnects with ``Last-Event-ID`` misses nothing and gets nothing
twice. A quiet stream carries keep-alive comments; the test config closes streams after
3 s."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from api_support import (
    HttpApi,
    Knowledge,
    Reply,
    act_once,
    advance_to_playing,
    assert_problem,
    leaks,
    new_player,
    open_stream,
    operator_events,
    read_messages,
    seated_match,
    sse_messages,
    stream_fingerprint,
    view_of,
    without_deadline,
)

from service.api.streaming import lifetime
from service.store.events import NOTIFY_CHANNEL


@pytest.fixture()
def playing(live_server):
    api = HttpApi(live_server)
    players, match_id = seated_match(api, "stream")
    return api, players, match_id


def test_snapshot_comes_first_with_the_version_as_id(live_server, playing):
    api, players, match_id = playing
    me = players[1]
    conn, response = open_stream(live_server, match_id, me.token)
    try:
        assert response.status == 200
        assert response.getheader("Content-Type").startswith("text/event-stream")
        assert "no-cache" in response.getheader("Cache-Control", "")
        messages = sse_messages(response)
        retry = next(messages)
        assert retry.kind == "retry" and int(retry.data) > 0
        snapshot = next(m for m in messages if m.kind == "message")
        assert snapshot.event == "snapshot"
        view = snapshot.json
        assert int(snapshot.id) == view["version"] == view_of(me, match_id)["version"]
        assert view["seat"] == 1 and sorted(view["hand"]) == sorted(view_of(me, match_id)["hand"])
        me.record("sse snapshot", int(snapshot.id), view)
        # Then the next event, with its version as id and its type as event name.
        result = act_once(players, match_id)
        event = read_messages(response, 1, me)[0]
        assert int(event.id) == view["version"] + 1 == result["events"][0]["version"]
        assert event.event == result["events"][0]["type"] == event.json["type"]
    finally:
        conn.close()


def test_reconnecting_with_last_event_id_loses_and_repeats_nothing(live_server, playing):
    api, players, match_id = playing
    advance_to_playing(players, match_id)
    me = players[2]
    conn, response = open_stream(live_server, match_id, me.token)
    seen = []
    try:
        snapshot = read_messages(response, 1, me)[0]
        assert snapshot.event == "snapshot"
        start = int(snapshot.id)
        act_once(players, match_id)
        act_once(players, match_id)
        seen += read_messages(response, 2, me)
    finally:
        conn.close()  # the client drops mid-hand
    missed = [act_once(players, match_id) for _ in range(3)]
    current = missed[-1]["version"]
    conn, response = open_stream(live_server, match_id, me.token, last_event_id=seen[-1].id)
    try:
        assert response.status == 200
        resumed = read_messages(response, current - int(seen[-1].id), me)
    finally:
        conn.close()
    assert all(m.event != "snapshot" for m in resumed), "a resumed stream starts with no snapshot"
    ids = [int(m.id) for m in seen + resumed]
    assert ids == list(range(start + 1, current + 1)), ids
    # The same events, as this seat sees them, as the long-poll gives them.
    page = me.get(f"/v1/matches/{match_id}/events?after={start}").json
    # The same events as the page; only the deadline differs, carried by whichever event
    # was the match's latest when it was read.
    assert [without_deadline(m.json) for m in seen + resumed] == [
        without_deadline(e) for e in page["events"]
    ]
    found = leaks(me, Knowledge(operator_events(api, match_id)["events"]))
    assert not found, "\n".join(found)


def test_resuming_at_the_current_version_waits_for_the_next_event(live_server, playing):
    api, players, match_id = playing
    me = players[0]
    current = view_of(me, match_id)["version"]
    conn, response = open_stream(live_server, match_id, me.token, last_event_id=str(current))
    try:
        timer = threading.Timer(0.3, act_once, (players, match_id))
        timer.start()
        message = read_messages(response, 1, me)[0]
        timer.join()
        assert message.event != "snapshot" and int(message.id) == current + 1
    finally:
        conn.close()


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "0x10", "12345678901234567890", "7 8"])
def test_malformed_last_event_id_is_a_400_problem(live_server, playing, value):
    api, players, match_id = playing
    before = stream_fingerprint(api, match_id)
    conn, response = open_stream(live_server, match_id, players[0].token, last_event_id=value)
    try:
        reply = Reply(
            response.status,
            {"Content-Type": response.getheader("Content-Type", "")},
            response.read(),
        )
    finally:
        conn.close()
    assert_problem(reply, 400, "invalid_last_event_id")
    assert stream_fingerprint(api, match_id) == before


def test_quiet_stream_sends_keep_alive_comments_and_closes(live_server, playing):
    api, players, match_id = playing
    started = time.monotonic()
    conn, response = open_stream(live_server, match_id, players[3].token)
    try:
        messages = list(sse_messages(response))  # until the server closes the stream
    finally:
        conn.close()
    elapsed = time.monotonic() - started
    comments = [m for m in messages if m.kind == "comment"]
    events = [m for m in messages if m.kind == "message"]
    assert [m.event for m in events] == ["snapshot"]
    assert len(comments) >= 2, messages
    assert 2.0 <= elapsed <= 8.0, elapsed


def test_streams_opened_together_end_apart(config):
    """A stream lives up to a fifth less than ``stream_seconds``, drawn for each: the
    streams that reconnect together after an API process's restart do not all end, and
    reconnect, together again (docs/scaling.md, "Streams that ended together")."""
    lives = [lifetime(config) for _ in range(50)]
    assert all(0.8 * config.stream_seconds <= life <= config.stream_seconds for life in lives)
    assert max(lives) - min(lives) > 0.1 * config.stream_seconds


def test_stream_errors_are_problems(live_server, playing):
    api, players, match_id = playing
    cases = [
        (None, match_id, 401, "unauthorized"),
        ("forged-token", match_id, 401, "invalid_token"),
        (players[0].token, "00000000-0000-4000-8000-000000000000", 404, "match_not_found"),
        (players[0].token, "not-a-match", 404, None),
    ]
    for token, target, status, code in cases:
        conn, response = open_stream(live_server, target, token)
        try:
            headers = {"Content-Type": response.getheader("Content-Type", "")}
            reply = Reply(response.status, headers, response.read())
            if status == 401:
                assert response.getheader("WWW-Authenticate", "").startswith("Bearer")
        finally:
            conn.close()
        assert_problem(reply, status, code)


def test_long_poll_returns_as_soon_as_an_event_arrives(live_server, playing):
    api, players, match_id = playing
    me = players[1]
    current = view_of(me, match_id)["version"]
    started = time.monotonic()
    reply = me.get(f"/v1/matches/{match_id}/events?after={current}&wait=1")
    assert reply.status == 200 and reply.json["events"] == [] and reply.json["version"] == current
    assert time.monotonic() - started >= 0.8
    timer = threading.Timer(0.5, act_once, (players, match_id))
    timer.start()
    started = time.monotonic()
    reply = me.get(f"/v1/matches/{match_id}/events?after={current}&wait=10")
    elapsed = time.monotonic() - started
    timer.join()
    assert reply.status == 200
    assert [e["version"] for e in reply.json["events"]] == [current + 1]
    assert elapsed < 5, elapsed


def test_a_wake_that_brings_nothing_does_not_end_a_long_poll(live_server, playing, database_url):
    """The listener wakes a match's waiters when it cannot rule out news (its periodic
    check, a reconnection); such a wake alone must not answer the poll with no events."""
    api, players, match_id = playing
    me = players[1]
    current = view_of(me, match_id)["version"]
    polled = {}
    poller = threading.Thread(
        target=lambda: polled.update(
            reply=me.get(f"/v1/matches/{match_id}/events?after={current}&wait=10")
        )
    )
    poller.start()
    time.sleep(0.3)  # the poll is waiting
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"{match_id}:{current}"))
    time.sleep(0.3)
    act_once(players, match_id)
    poller.join(timeout=15)
    reply = polled["reply"]
    assert reply.status == 200
    assert [e["version"] for e in reply.json["events"]] == [current + 1]


def test_onlooker_stream_shows_no_hand(live_server, playing):
    """A player with no seat may follow the match, but sees no cards in the deal."""
    api, players, match_id = playing
    onlooker = new_player(api, "stream-onlooker")
    conn, response = open_stream(live_server, match_id, onlooker.token, last_event_id="0")
    try:
        messages = read_messages(response, view_of(onlooker, match_id)["version"], onlooker)
    finally:
        conn.close()
    dealt = next(m.json for m in messages if m.event == "hand_dealt")
    assert dealt["payload"].get("hand") in (None, [])
    assert "seed" not in dealt["payload"] and "hands" not in dealt["payload"]
    found = leaks(onlooker, Knowledge(operator_events(api, match_id)["events"]))
    assert not found, "\n".join(found)


def test_the_latest_event_carries_the_deadline_of_the_seat_to_act(live_server, playing):
    api, players, match_id = playing
    me = players[1]
    page = me.get(f"/v1/matches/{match_id}/events?after=0").json
    view = view_of(me, match_id)
    assert page["version"] == view["version"]
    assert page["events"][-1]["deadline"] == view["deadline"] is not None
    assert all(e["deadline"] is None for e in page["events"][:-1])


@pytest.fixture()
def settle(monkeypatch, database_url, redis_url):
    """Runs the settlement job (which appends ``settled``) for a match, in this process."""
    import workers.context
    import workers.jobs

    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("REDIS_URL", redis_url)
    workers.context.context.cache_clear()
    yield workers.jobs.settle_match
    workers.context.context().pool.close()
    workers.context.context.cache_clear()


@pytest.mark.slow
def test_the_stream_of_a_settled_match_closes_after_its_last_event(live_server, playing, settle):
    api, players, match_id = playing
    advance_to_playing(players, match_id)
    while view_of(players[0], match_id)["phase"] != "ended":
        act_once(players, match_id)
    me = players[0]
    # Ended but not settled yet: the stream waits for `settled`, then closes at once
    # (the test config would close an idle stream after 3 s).
    conn, response = open_stream(live_server, match_id, me.token)
    try:
        assert read_messages(response, 1, me)[0].event == "snapshot"
        timer = threading.Timer(0.3, settle, (match_id,))
        started = time.monotonic()
        timer.start()
        rest = [m for m in sse_messages(response) if m.kind == "message"]
        elapsed = time.monotonic() - started
        timer.join()
    finally:
        conn.close()
    assert [m.event for m in rest] == ["settled"]
    assert elapsed < 2.0, elapsed
    last = rest[0].id
    # A settled match: the snapshot, then the end; the last event's id gets 204 (an
    # EventSource stops reconnecting); an earlier id gets the events after it, then the end.
    for last_event_id, expected in ((None, ["snapshot"]), (str(int(last) - 1), ["settled"])):
        started = time.monotonic()
        conn, response = open_stream(live_server, match_id, me.token, last_event_id=last_event_id)
        try:
            assert response.status == 200
            assert [m.event for m in sse_messages(response) if m.kind == "message"] == expected
        finally:
            conn.close()
        assert time.monotonic() - started < 2.0
    conn, response = open_stream(live_server, match_id, me.token, last_event_id=last)
    try:
        assert response.status == 204 and response.read() == b""
    finally:
        conn.close()
