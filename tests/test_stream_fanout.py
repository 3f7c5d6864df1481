"""Many streams on one match in one process: one reader per match fans each event out to
every stream (each gets every event it may see, once, in order), and a process holds a
bounded number of streams: one more is refused with a 503 problem and Retry-After, while
commands are still answered. Over real HTTP, on an app of its own with a low bound."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator

import pytest
from api_support import (
    HttpApi,
    Reply,
    act_once,
    advance_to_playing,
    assert_problem,
    new_player,
    open_stream,
    read_messages,
    seated_match,
    wait_for,
    without_deadline,
)
from servers import serving

from service.api import create_app

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

BOUND = 12


@pytest.fixture(scope="module")
def bounded(config) -> Iterator[tuple[str, object]]:
    """An app holding at most BOUND streams, served over HTTP: its base URL and its fan-out."""
    app = create_app(dataclasses.replace(config, max_streams=BOUND, stream_seconds=30.0))
    with serving(app) as base:
        yield base, app.extensions["ddz"].fanout
    app.extensions["ddz"].close()


def test_every_stream_gets_every_event_once_in_order_from_one_reader(bounded):
    base, fanout = bounded
    api = HttpApi(base)
    players, match_id = seated_match(api, "fanout")
    advance_to_playing(players, match_id)
    onlooker = new_player(api, "fanout-onlooker")
    watchers = [players[i % 4] for i in range(BOUND - 1)] + [onlooker]
    streams = [open_stream(base, match_id, w.token, timeout=30) for w in watchers]
    try:
        snapshots = [read_messages(response, 1)[0] for _, response in streams]
        start = int(snapshots[0].id)
        assert all(int(s.id) == start for s in snapshots)
        assert fanout.watched() == 1 and fanout.open == BOUND  # one reader for the match

        answers = [act_once(players, match_id) for _ in range(6)]
        last = answers[-1]["version"]
        for watcher, (_, response) in zip(watchers, streams):
            received = read_messages(response, last - start)
            assert [int(m.id) for m in received] == list(range(start + 1, last + 1))
            # Each as its viewer sees them (one rendering per viewer, none shown another).
            polled = api.request(
                "GET", f"/v1/matches/{match_id}/events?after={start}", watcher.token
            ).json["events"]
            assert [without_deadline(m.json) for m in received] == [
                without_deadline(e) for e in polled
            ]
    finally:
        for conn, response in streams:
            response.close()
            conn.close()
    wait_for(lambda: fanout.open == 0)  # closed streams leave (noticed at the next keep-alive)
    assert fanout.watched() == 0


def test_a_stream_beyond_the_bound_is_refused_and_commands_still_answer(bounded):
    base, fanout = bounded
    api = HttpApi(base)
    players, match_id = seated_match(api, "bound")
    streams = [open_stream(base, match_id, players[i % 4].token, timeout=30) for i in range(BOUND)]
    try:
        assert all(response.status == 200 for _, response in streams)
        start = int(read_messages(streams[0][1], 1)[0].id)

        conn, refused = open_stream(base, match_id, players[0].token)
        reply = Reply(refused.status, refused.headers, refused.read())
        conn.close()
        assert_problem(reply, 503, "too_many_streams")
        assert int(reply.headers["Retry-After"]) > 0
        # The player's own stream counts against the same bound.
        mine = api.request("GET", "/v1/me/stream", players[1].token)
        assert_problem(mine, 503, "too_many_streams")

        answer = act_once(players, match_id)  # the bound is reached: commands still answer
        received = read_messages(streams[-1][1], answer["version"] - start + 1)
        assert int(received[-1].id) == answer["version"]

        conn, response = streams.pop()  # one stream leaves: another may open
        response.close()
        conn.close()
        wait_for(lambda: fanout.open < BOUND)
        conn, response = open_stream(base, match_id, players[0].token)
        streams.append((conn, response))
        assert response.status == 200
    finally:
        for conn, response in streams:
            response.close()
            conn.close()


def test_a_direct_stream_keeps_what_a_slow_client_cannot_take_yet_in_order():
    """Under gunicorn the feed's reader writes to the client's socket without waiting:
    what the socket does not take waits, in order, for the stream's own greenlet, and
    what the reader sends meanwhile queues behind it."""
    import gevent
    import gevent.socket

    from service.api.matches import DirectStream

    writer, reader = gevent.socket.socketpair()
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    direct = DirectStream(writer, chunked=True, seat=None, after=0)
    early = [b"%06d" % i * 100 for i in range(300)]  # 600 bytes each
    late = [b"late %d" % i for i in range(50)]
    for chunk in early:
        direct.send(chunk)
    assert direct.pending  # the client has not read: the socket took only part
    received = bytearray()
    expected = b"".join(b"%X\r\n%s\r\n" % (len(c), c) for c in early + late)

    def slow_client():
        while len(received) < len(expected):
            received.extend(reader.recv(4096))
            if len(received) > 20_000 and late:
                direct.send(late.pop(0))  # the reader goes on sending meanwhile

    client = gevent.spawn(slow_client)
    while direct.pending or late:
        direct._flush()
        gevent.sleep(0)
    client.join(timeout=10)
    assert bytes(received) == expected
    writer.close()
    reader.close()
