"""What callers hold open, event streams and long polls: each ends within a second of the
revocation (or removal, or expiry) of the token that opened it, on whichever process holds
it, and sends nothing after that; one caller holds at most its bounds of them (per token,
per player, per address, an IPv6 /64 as one) across processes, and a process's bound
counts long polls too, so that they never take the connections commands need."""

from __future__ import annotations

import dataclasses
import datetime as dt
import select
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import requests
from api_support import (
    SSE,
    ClientApi,
    HttpApi,
    Observer,
    Reply,
    assert_problem,
    new_match,
    new_player,
    open_sse,
    seated_match,
    sse_messages,
    take_seat,
    to_act,
    wait_for,
)
from processes import gunicorn
from servers import serving

from service.api import create_app, open_streams
from service.api.open_streams import Bound, OpenStreams, TooManyOpen
from service.config import Config
from service.store import open_pool
from service.store.operators import Operators

#: Longer than any wait here: a stream that ends did so because its token ended.
KEEPALIVE = "5"


@pytest.fixture(scope="module", params=["threaded", "gunicorn"])
def served(request, config, tmp_path_factory) -> Iterator[str]:
    """The API on another process than the one that revokes (the tests' app, or the
    store as the CLI uses it): threaded, or under gunicorn, where the match's reader
    writes to the streams itself. Keep-alives are rarer than any wait here."""
    if request.param == "threaded":
        app = create_app(
            dataclasses.replace(config, stream_seconds=60.0, keepalive_seconds=float(KEEPALIVE))
        )
        with serving(app) as base:
            yield base
        app.extensions["ddz"].close()
    else:
        log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
        with gunicorn(
            config.database_url, config.redis_url, log, DDZ_KEEPALIVE_SECONDS=KEEPALIVE
        ) as (base, _):
            yield base


@pytest.fixture(scope="module")
def operators(config) -> Iterator[Operators]:
    pool = open_pool(config.database_url, 2, "test-operators")
    yield Operators(pool)
    pool.close()


def rest_of(messages: Iterator[SSE]) -> list[SSE]:
    """The messages a stream sends until it ends (one still open after the connection's
    timeout fails the test)."""
    try:
        return [m for m in messages if m.kind == "message"]
    except TimeoutError:
        raise AssertionError("the stream is still open") from None


def three_seated(api) -> str:
    """A match with three seats taken: the fourth deals the hand."""
    others = [new_player(api, f"seated{i}") for i in range(3)]
    match_id = new_match(others[0])
    for seat, player in enumerate(others):
        take_seat(player, match_id, seat)
    return match_id


def spare_token(player: Observer) -> dict:
    reply = player.post("/v1/me/tokens", {})
    assert reply.status == 201, reply.text
    return reply.json


def first_message(messages: Iterator[SSE]) -> str | None:
    return next(m for m in messages if m.kind == "message").event


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["revoke", "remove"])
def test_an_operators_stream_ends_when_the_operator_is_revoked_or_removed(
    served, client, operators, ending
):
    """It used to go on, and deliver the deal (every hand, and the seed) to an operator no
    longer allowed to see anything."""
    api = ClientApi(client)
    match_id = three_seated(api)
    name = f"auditor-{uuid.uuid4().hex[:8]}"
    operator = operators.add(name, "auditor", "correct horse battery staple")
    assert operator.operator_id is not None
    token = operators.issue(operator.operator_id)
    conn, response = open_sse(served, f"/v1/matches/{match_id}/stream", token, timeout=5)
    try:
        assert response.status == 200
        messages = sse_messages(response)
        assert first_message(messages) == "snapshot"
        getattr(operators, ending)(name)  # as `ddz operator revoke` (or remove) does
        ended_at = time.monotonic()
        take_seat(new_player(api, "fourth"), match_id, 3)  # the deal
        assert rest_of(messages) == []
        assert time.monotonic() - ended_at < 1.0
    finally:
        conn.close()
    conn, response = open_sse(served, f"/v1/matches/{match_id}/stream", token)
    try:
        assert response.status == 401
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("stream", ["match", "me"])
def test_a_revoked_tokens_stream_ends_at_once_and_sends_nothing_after(served, client, stream):
    """The match's stream used to write one more event (the reader wrote it before the
    stream looked at its token). Reopening it is refused."""
    api = ClientApi(client)
    match_id = three_seated(api)
    keeper = new_player(api, "keeper")
    spare = spare_token(keeper)
    path, first = (
        ("/v1/me/stream", "ready")
        if stream == "me"
        else (f"/v1/matches/{match_id}/stream", "snapshot")
    )
    conn, response = open_sse(served, path, spare["token"], timeout=5)
    try:
        messages = sse_messages(response)
        assert first_message(messages) == first
        # Revoked through another process (the tests' app).
        assert keeper.call("DELETE", f"/v1/me/tokens/{spare['token_id']}").status == 204
        revoked_at = time.monotonic()
        take_seat(keeper, match_id, 3)  # the keeper's seat and hand, in both streams
        assert rest_of(messages) == []
        assert time.monotonic() - revoked_at < 1.0
    finally:
        conn.close()
    conn, response = open_sse(served, path, spare["token"])
    try:
        assert response.status == 401
    finally:
        conn.close()


def long_poll(base: str, path: str, token: str) -> tuple[threading.Thread, dict]:
    """A long poll sent from a thread of its own: the thread, and where its reply lands."""
    result: dict = {}

    def send() -> None:
        result["reply"] = HttpApi(base).request("GET", path, token)
        result["at"] = time.time()

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread, result


@pytest.mark.slow
@pytest.mark.parametrize("poll", ["match", "me"])
def test_a_revoked_tokens_long_poll_is_answered_401_not_with_what_came_after(served, client, poll):
    """It used to wait on, and answer the next events (the deal) to the revoked token."""
    api = ClientApi(client)
    match_id = three_seated(api)
    keeper = new_player(api, "poller")
    spare = spare_token(keeper)
    path = "/v1/me/events?wait=20" if poll == "me" else f"/v1/matches/{match_id}/events?wait=20"
    if poll == "match":
        path += f"&after={keeper.get(f'/v1/matches/{match_id}').json['version']}"
    thread, result = long_poll(served, path, spare["token"])
    time.sleep(0.5)  # time to be waiting: the revocation must end a long poll that waits
    assert keeper.call("DELETE", f"/v1/me/tokens/{spare['token_id']}").status == 204
    revoked_at = time.monotonic()
    take_seat(keeper, match_id, 3)
    thread.join(10)
    assert_problem(result["reply"], 401, "invalid_token")
    assert time.monotonic() - revoked_at < 1.0


@pytest.mark.slow
def test_streams_and_long_polls_end_when_their_token_expires(served, client):
    """A stream ended only at its next keep-alive after the expiry, and a long poll waited
    its whole time."""
    api = ClientApi(client)
    match_id = three_seated(api)
    holder = new_player(api, "expiring")
    short = holder.post("/v1/me/tokens", {"expires_in": 2}).json
    conn, response = open_sse(served, f"/v1/matches/{match_id}/stream", short["token"], timeout=8)
    thread, result = long_poll(served, "/v1/me/events?wait=20", short["token"])
    try:
        messages = sse_messages(response)
        assert first_message(messages) == "snapshot"
        assert rest_of(messages) == []
        ended_at = time.time()
        thread.join(10)
        assert_problem(result["reply"], 401, "token_expired")
    finally:
        conn.close()
    expires_at = dt.datetime.fromisoformat(short["expires_at"]).timestamp()
    assert ended_at - expires_at < 1.0 and result["at"] - expires_at < 1.0


# --- the bounds on one caller ----------------------------------------------------------------

BOUNDS = dict(max_streams_per_token=2, max_streams_per_player=3, max_streams_per_address=4)


@pytest.fixture(scope="module")
def two_processes(config):
    """Two apps with low bounds, as two API processes on the same Redis would be."""
    apps = [create_app(dataclasses.replace(config, **BOUNDS)) for _ in range(2)]
    yield [app.test_client() for app in apps]
    for app in apps:
        app.extensions["ddz"].close()


def hold(client, path: str, token: str, address: str):
    """A stream (or long poll) opened from ``address`` and left open: not read, until its
    response is closed."""
    return client.get(
        path,
        headers={"Authorization": f"Bearer {token}"},
        environ_base={"REMOTE_ADDR": address},
        buffered=False,
    )


def assert_bounded(response, per: str) -> None:
    reply = Reply(response.status_code, response.headers, response.get_data())
    problem = assert_problem(reply, 429, "open_stream_limit")
    assert f"this {per} holds" in problem["detail"], problem
    assert int(reply.headers["Retry-After"]) > 0


def test_a_caller_holds_at_most_its_bounds_of_streams_and_long_polls_across_processes(
    two_processes,
):
    a, b = two_processes
    group = uuid.uuid4().int % 0xFFFF
    net, next_net = f"2001:db8:1:{group:x}", f"2001:db8:1:{group + 1:x}"
    api = ClientApi(a)
    player = new_player(api, "holder")
    other_token = spare_token(player)["token"]
    match_id = new_match(player)
    stream = f"/v1/matches/{match_id}/stream"
    held = []
    try:
        held.append(hold(a, stream, player.token, f"{net}::1"))
        held.append(hold(b, "/v1/me/stream", player.token, f"{net}::2"))
        assert [r.status_code for r in held] == [200, 200]
        # The token's third, on either process, stream or long poll, is refused at once.
        assert_bounded(hold(b, stream, player.token, f"{net}::3"), "token")
        assert_bounded(
            hold(a, f"/v1/matches/{match_id}/events?wait=5", player.token, f"{net}::3"), "token"
        )
        # The player's other token: one more, up to the player's bound.
        held.append(hold(a, stream, other_token, f"{net}::4"))
        assert held[-1].status_code == 200
        assert_bounded(hold(b, "/v1/me/events?wait=5", other_token, f"{net}::4"), "player")
        # Another player in the same /64: one more, up to the address's bound.
        neighbour = new_player(api, "neighbour")
        held.append(hold(b, stream, neighbour.token, f"{net}::ff"))
        assert held[-1].status_code == 200
        assert_bounded(hold(a, stream, neighbour.token, f"{net}:1:2:3:4"), "address")
        # From another /64 the neighbour is served.
        held.append(hold(a, stream, neighbour.token, f"{next_net}::1"))
        assert held[-1].status_code == 200
        # A stream that ends gives its places back. (Closed last first: the test client
        # keeps each unread response's request context until it is closed.)
        held.pop().close()
        held.pop().close()
        held.append(hold(a, stream, neighbour.token, f"{net}:1:2:3:4"))
        assert held[-1].status_code == 200
    finally:
        for response in reversed(held):
            response.close()


def watched_table(client) -> str:
    """A public table (its creator seated), to watch."""
    api = ClientApi(client)
    owner = new_player(api, "watched")
    reply = owner.post("/v1/tables", {})
    assert reply.status == 201, reply.text
    return reply.json["table_id"]


def watcher(client, path: str, address: str, token: str | None = None):
    """A watcher's stream or long poll from ``address`` (with a token, or none), left
    open until its response is closed."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return client.get(path, headers=headers, environ_base={"REMOTE_ADDR": address}, buffered=False)


def test_watchers_are_held_to_the_bounds_of_players_streams(two_processes):
    """Seven watcher streams from one address all got 200 with its bound at 4 (one address
    held 36 of a process's 40 places, and players' streams were refused): a watcher now
    takes a place under its address's bound, and its token's and player's when it sends
    one; its long polls too."""
    a, b = two_processes
    table_id = watched_table(a)
    stream, poll = f"/v1/tables/{table_id}/watch/stream", f"/v1/tables/{table_id}/watch?wait=5"
    group = uuid.uuid4().int % 0xFFFF
    net, next_net = f"2001:db8:3:{group:x}", f"2001:db8:3:{group + 1:x}"
    held = []
    try:
        # Anonymous: four from one /64, over both processes; the fifth, stream or long poll,
        # is refused at once.
        held += [watcher((a, b)[n % 2], stream, f"{net}::{n}") for n in range(4)]
        assert [r.status_code for r in held] == [200] * 4
        for client in (a, b):
            assert_bounded(watcher(client, stream, f"{net}::ff"), "address")
            assert_bounded(watcher(client, poll, f"{net}:1::1"), "address")
        # Another /64 is served.
        held.append(watcher(b, stream, f"{next_net}::1"))
        assert held[-1].status_code == 200
        # With a token, its bounds as well: two streams of one token (from anywhere).
        keeper = new_player(ClientApi(a), "keeper")
        elsewhere = [f"2001:db8:4:{group:x}::{n}" for n in range(3)]
        held += [watcher(a, stream, place, keeper.token) for place in elsewhere[:2]]
        assert [r.status_code for r in held[-2:]] == [200, 200]
        assert_bounded(watcher(b, stream, elsewhere[2], keeper.token), "token")
        assert_bounded(watcher(b, poll, elsewhere[2], keeper.token), "token")
    finally:
        for response in reversed(held):
            response.close()


@pytest.mark.slow
def test_watchers_long_polls_take_places_of_the_process_and_of_their_address(config):
    """Forty watch long polls on a process of 40 places left a player's stream served: a
    watcher's long poll holds one of the process's places (a player's stream beyond them
    is 503 ``too_many_streams``) and one of its address's (429 beyond)."""
    app = create_app(dataclasses.replace(config, max_streams=4, max_streams_per_address=3))
    try:
        table_id = watched_table(app.test_client())
        api = ClientApi(app.test_client())
        player = new_player(api, "player")
        # After what the table holds (its two events, which the feed may hold back a
        # moment behind others' transactions), a long poll waits: the table is quiet.
        seen, start = 0, ""
        while seen < 2:
            query = {"wait": 2, **({"after": start} if start else {})}
            page = app.test_client().get(f"/v1/tables/{table_id}/watch", query_string=query)
            seen, start = seen + len(page.json["items"]), page.json["last_id"]
        poll = f"/v1/tables/{table_id}/watch?after={start}&wait=8"
        address = f"192.0.2.{uuid.uuid4().int % 250 + 1}"
        replies: list = []

        def poll_from(where: str) -> None:
            replies.append(watcher(app.test_client(), poll, where).status_code)

        polls = [threading.Thread(target=poll_from, args=(address,)) for _ in range(7)]
        for thread in polls:
            thread.start()
        fanout = app.extensions["ddz"].fanout
        # Three of the address's seven held, four refused at once.
        wait_for(lambda: fanout.open == 3 and len(replies) == 4)
        assert replies == [429] * 4
        # Another address's watcher takes the process's last place: then neither a
        # player's stream nor another watcher has one.
        polls.append(threading.Thread(target=poll_from, args=("192.0.2.254",)))
        polls[-1].start()
        wait_for(lambda: fanout.open == 4)
        mine = watcher(app.test_client(), "/v1/me/stream", "192.0.2.253", player.token)
        assert mine.status_code == 503 and mine.json["code"] == "too_many_streams"
        late = watcher(app.test_client(), poll, "192.0.2.252")
        assert late.status_code == 503 and late.json["code"] == "too_many_streams"
        for thread in polls:
            thread.join(15)
        assert sorted(replies) == [200] * 4 + [429] * 4
    finally:
        app.extensions["ddz"].close()


def test_a_dead_processs_places_lapse_and_a_live_ones_stay(redis_url, monkeypatch):
    """A process that dies leaves its streams' places taken until their leases lapse;
    one that lives renews them."""
    monkeypatch.setattr(open_streams, "LEASE_SECONDS", 1.0)
    monkeypatch.setattr(open_streams, "RENEW_SECONDS", 0.2)
    live, dead, other = (
        OpenStreams(Config(redis_url=redis_url), lambda digests: set()) for _ in range(3)
    )
    kept, lost = (Bound("token", uuid.uuid4().hex, 1) for _ in range(2))
    try:
        live.open(None, None, [kept])
        dead.open(None, None, [lost])
        dead.close()  # gone: its stream never ends, and nothing renews its lease
        for bound in (kept, lost):
            with pytest.raises(TooManyOpen):
                other.open(None, None, [bound])
        time.sleep(1.5)
        other.open(None, None, [lost])
        with pytest.raises(TooManyOpen):
            other.open(None, None, [kept])
    finally:
        live.close()
        other.close()


@pytest.mark.slow
def test_long_polls_count_against_the_process_bound_and_commands_still_answer(config):
    app = create_app(dataclasses.replace(config, max_streams=2))
    fanout = app.extensions["ddz"].fanout
    try:
        with serving(app) as base:
            api = HttpApi(base)
            players, match_id = seated_match(api, "polled")
            player, view = to_act(players, match_id)
            events = f"/v1/matches/{match_id}/events?after={view['version']}&wait=20"
            polls = [long_poll(base, events, players[i].token) for i in range(2)]
            wait_for(lambda: fanout.open == 2)
            refused = api.request("GET", events, players[2].token)
            assert_problem(refused, 503, "too_many_streams")
            assert int(refused.headers["Retry-After"]) > 0
            stream = api.request("GET", f"/v1/matches/{match_id}/stream", players[2].token)
            assert_problem(stream, 503, "too_many_streams")
            # Reads and commands still answer, and the long polls get the command's event.
            read = api.request("GET", events.replace("wait=20", "wait=0"), players[2].token)
            assert read.status == 200
            body = {"action": "bid", "value": 0, "expected_version": view["version"]}
            assert player.post(f"/v1/matches/{match_id}/commands", body).status == 200
            for thread, result in polls:
                thread.join(10)
                assert result["reply"].status == 200 and result["reply"].json["events"]
    finally:
        app.extensions["ddz"].close()


@pytest.mark.slow
def test_long_polls_cannot_take_a_processs_connections_from_commands(
    database_url, redis_url, tmp_path
):
    """One worker, 20 streams and long polls at most, 120 connections: 140 long polls used
    to take every connection, and a command waited for them to end (30 s)."""
    settings = dict(WEB_CONCURRENCY="1", DDZ_MAX_STREAMS="20", DDZ_WORKER_CONNECTIONS="120")
    with gunicorn(database_url, redis_url, tmp_path / "gunicorn.log", **settings) as (base, _):
        api = HttpApi(base)
        players, match_id = seated_match(api, "crowd")
        player, view = to_act(players, match_id)
        parts = urlsplit(base)
        polls = []
        try:
            for i in range(140):
                sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
                sock.sendall(
                    f"GET /v1/matches/{match_id}/events?after={view['version']}&wait=30 "
                    f"HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n"
                    f"Authorization: Bearer {players[i % 4].token}\r\n\r\n".encode()
                )
                polls.append(sock)
            # The polls past the bound are refused at once (some only once the worker has
            # a connection free): wait for all 120 refusals, so that no poll is still to be
            # admitted when the command ends the admitted ones' wait and frees their places.
            answered: set[socket.socket] = set()
            deadline = time.monotonic() + 20
            while len(answered) < 120 and time.monotonic() < deadline:
                waiting = [sock for sock in polls if sock not in answered]
                answered.update(select.select(waiting, [], [], 0.5)[0])
            assert len(answered) == 120
            body = {"action": "bid", "value": 0, "expected_version": view["version"]}
            answer = requests.post(
                f"{base}/v1/matches/{match_id}/commands",
                json=body,
                headers={"Authorization": f"Bearer {player.token}"},
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            statuses = [int(received(sock).split(b" ", 2)[1]) for sock in polls]
            assert statuses.count(200) == 20 and statuses.count(503) == 120, statuses
        finally:
            for sock in polls:
                sock.close()


def received(sock: socket.socket) -> bytes:
    """Everything the server sends before it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data
