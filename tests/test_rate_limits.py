"""Rate limits, on apps with low ones: a flood from one token or one address gets 429
problems with Retry-After while others are still served; streams and long polls, reads,
commands and new players are counted apart; operators and health checks are not limited;
and a Redis that does not answer costs the limits, not the requests."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import time
import uuid
from collections.abc import Iterator

import pytest

from service.api import create_app
from service.api.rate_limits import SYNC_SECONDS

UNKNOWN = f"/v1/matches/{uuid.uuid4()}"
LOW = dict(
    rate_limit_commands="5/minute",
    rate_limit_commands_per_address="1000/minute",
    rate_limit_reads="4/minute",
    rate_limit_reads_per_address="6/minute",
    rate_limit_streams="2/minute",
    rate_limit_streams_per_address="1000/minute",
    rate_limit_signups_per_address="3/minute",
    rate_limit_sign_ins="3/minute",
    rate_limit_hold_seconds=0.0,  # see the test of the hold
)


@pytest.fixture(scope="module")
def limited(config):
    app = create_app(dataclasses.replace(config, **LOW))
    yield app.test_client()
    app.extensions["ddz"].close()


class Address:
    """Requests from one client address of their own (a loopback one, so that no test
    shares its per-address counts)."""

    last = 10

    def __init__(self, client):
        Address.last += 1
        self.client, self.environ = client, {"REMOTE_ADDR": f"127.0.0.{Address.last}"}

    def __call__(self, method: str, path: str, token: str | None = None, **kwargs):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.open(
            path, method=method, headers=headers, environ_base=self.environ, **kwargs
        )

    def player(self) -> str:
        reply = self("POST", "/v1/players", json={"name": "limited"})
        assert reply.status_code == 201, reply.json
        return reply.json["token"]


@contextlib.contextmanager
def processes(config, count: int, **overrides) -> Iterator[list[Address]]:
    """``count`` apps with the low limits (and ``overrides``), as that many API processes
    would be: each counts on its own, all in the tests' Redis. A sender for each, each
    from a client address of its own."""
    apps = [create_app(dataclasses.replace(config, **{**LOW, **overrides})) for _ in range(count)]
    try:
        yield [Address(app.test_client()) for app in apps]
    finally:
        for app in apps:
            app.extensions["ddz"].close()


def assert_limited(reply, what: str) -> int:
    assert reply.status_code == 429, reply.json
    assert reply.content_type == "application/problem+json"
    assert reply.json["code"] == "rate_limited" and what in reply.json["detail"], reply.json
    retry = int(reply.headers["Retry-After"])
    assert 1 <= retry <= 60
    return retry


def test_a_flood_of_commands_from_one_token_gets_429_and_another_token_is_served(limited, client):
    make_players = Address(client)  # players made on the unlimited app
    flooder, other = make_players.player(), make_players.player()
    send = Address(limited)
    statuses = [
        send("POST", f"{UNKNOWN}/commands", flooder, json={"action": "pass"}).status_code
        for _ in range(5)
    ]
    assert statuses == [404] * 5  # within the limit, answered as ever
    for _ in range(20):
        assert_limited(
            send("POST", f"{UNKNOWN}/commands", flooder, json={"action": "pass"}),
            "commands from this token",
        )
    # Commands of every kind share the count; reads are counted apart.
    assert_limited(send("POST", "/v1/matches", flooder, json={}), "commands")
    assert send("GET", "/v1/me/tokens", flooder).status_code == 200

    assert send("POST", "/v1/matches", other, json={}).status_code == 201


def test_a_caller_refused_again_gets_its_429_after_a_hold(config, client):
    app = create_app(dataclasses.replace(config, **{**LOW, "rate_limit_hold_seconds": 0.3}))
    try:
        flooder = Address(client).player()
        send = Address(app.test_client())
        for _ in range(4):
            assert send("GET", "/v1/me/tokens", flooder).status_code == 200
        started = time.monotonic()
        assert_limited(send("GET", "/v1/me/tokens", flooder), "reads from this token")
        first = time.monotonic() - started
        started = time.monotonic()
        assert_limited(send("GET", "/v1/me/tokens", flooder), "reads from this token")
        again = time.monotonic() - started
        # The first refusal is told at once; a caller that comes back before its window
        # ends waits for its answer, so a flood comes one request per connection per hold.
        assert first < 0.3 <= again
    finally:
        app.extensions["ddz"].close()


def test_a_flood_from_one_address_gets_429_and_another_address_is_served(limited, client):
    make_players = Address(client)
    tokens = [make_players.player() for _ in range(8)]
    crowd = Address(limited)
    for token in tokens[:6]:  # one read per token: the address is over, no token is
        assert crowd("GET", "/v1/me/tokens", token).status_code == 200
    assert_limited(crowd("GET", "/v1/me/tokens", tokens[6]), "reads from this address")
    assert Address(limited)("GET", "/v1/me/tokens", tokens[7]).status_code == 200


def test_long_polls_and_streams_are_counted_apart_from_reads(limited, client):
    token = Address(client).player()
    send = Address(limited)
    match = send("POST", "/v1/matches", token, json={}).json["match_id"]
    events = f"/v1/matches/{match}/events"
    assert send("GET", f"{events}?after=0&wait=0.01", token).status_code == 200
    assert send("GET", f"/v1/matches/{match}/stream", token).status_code == 200
    assert_limited(send("GET", f"{events}?after=0&wait=0.01", token), "streams from this token")
    assert_limited(send("GET", f"/v1/matches/{match}/stream", token), "streams")
    assert send("GET", f"{events}?after=0", token).status_code == 200  # a read


def test_new_players_are_limited_per_address(limited):
    signups = Address(limited)
    for _ in range(3):
        signups.player()
    assert_limited(
        signups("POST", "/v1/players", json={"name": "one more"}), "signups from this address"
    )
    Address(limited).player()


def test_console_sign_ins_have_their_own_limit_per_address_and_per_name(limited):
    crowd = Address(limited)
    for _ in range(3):
        crowd.player()
    assert_limited(crowd("POST", "/v1/players", json={"name": "one more"}), "signups")
    # Players' sign-ups spent theirs: an operator behind the same address still signs in,
    # and showing the form is a read, no attempt.
    for _ in range(2):
        assert crowd("GET", "/console/sign-in").status_code == 200
    for n in range(3):
        form = {"name": f"guess {n}", "password": "a guess"}
        assert crowd("POST", "/console/sign-in", data=form).status_code != 429
    form = {"name": "guess 3", "password": "a guess"}
    assert_limited(crowd("POST", "/console/sign-in", data=form), "sign-ins from this address")
    # Guesses at one name from many addresses are counted for the name.
    name = f"target-{uuid.uuid4().hex[:8]}"
    for _ in range(3):
        assert Address(limited)("POST", "/console/sign-in", data={"name": name}).status_code != 429
    assert_limited(
        Address(limited)("POST", "/console/sign-in", data={"name": name}), "sign-ins from this name"
    )
    assert Address(limited)("POST", "/console/sign-in", data={"name": "other"}).status_code != 429


def test_operators_and_health_checks_are_not_limited(limited, live_worker):
    from servers import OPERATOR_TOKEN

    send = Address(limited)
    for _ in range(12):
        assert send("GET", "/v1/matches", OPERATOR_TOKEN).status_code == 200
        assert send("GET", "/healthz").status_code == 200
        assert send("GET", "/readyz").status_code == 200


def test_what_a_process_counted_in_memory_reaches_the_others_after_a_moment(config, client):
    """Far below a limit a process counts in its own memory, and sends the counts to
    Redis with its next request after SYNC_SECONDS: another process then lets the caller
    through only what is left of the limit."""
    token = Address(client).player()
    with processes(config, 2, rate_limit_reads="10/minute") as (first, second):
        for _ in range(3):
            assert first("GET", "/v1/me/tokens", token).status_code == 200
        time.sleep(SYNC_SECONDS * 2)
        assert first("GET", "/v1/me/tokens", token).status_code == 200
        statuses = [second("GET", "/v1/me/tokens", token).status_code for _ in range(7)]
        assert statuses == [200] * 6 + [429]


def test_a_burst_spread_over_two_processes_gets_at_most_a_limit_and_a_half(config, client):
    """Each process lets a caller through up to half a limit on its own counts before it
    asks Redis for the total: a burst alternating between two processes faster than they
    send their counts gets at most a limit and a half, then 429 from both."""
    token = Address(client).player()
    with processes(config, 2) as sends:
        statuses = [sends[i % 2]("GET", "/v1/me/tokens", token).status_code for i in range(10)]
        assert statuses.count(200) <= 4 * 1.5  # reads: 4/minute per token
        assert statuses[-4:] == [429] * 4


def test_with_no_local_share_processes_share_a_limit_exactly(config, client):
    token = Address(client).player()
    with processes(config, 2, rate_limit_local_share=0.0) as sends:
        statuses = [sends[i % 2]("GET", "/v1/me/tokens", token).status_code for i in range(6)]
        assert statuses == [200] * 4 + [429] * 2  # reads: 4/minute per token


def test_new_players_are_counted_in_redis_whatever_the_share(config):
    """Sign-ups keep out floods of new players: every one is counted in Redis before it is
    answered, so two processes together let an address make its limit and no more."""
    with processes(config, 2, rate_limit_signups_per_address="10/minute") as (first, second):
        second.environ = first.environ  # one client address
        made = [first("POST", "/v1/players", json={"name": "n"}).status_code for _ in range(5)]
        made += [second("POST", "/v1/players", json={"name": "n"}).status_code for _ in range(7)]
        assert made == [201] * 10 + [429] * 2


def test_a_local_share_outside_0_to_1_is_refused_at_start(config):
    with pytest.raises(ValueError, match="DDZ_RATE_LIMIT_LOCAL_SHARE must be between 0 and 1"):
        create_app(dataclasses.replace(config, rate_limit_local_share=1.5))


def test_without_redis_requests_are_served_and_one_warning_is_logged(config, client, caplog):
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        dead = f"redis://127.0.0.1:{s.getsockname()[1]}/0"
    app = create_app(dataclasses.replace(config, redis_url=dead, **LOW))
    try:
        token = Address(client).player()
        send = Address(app.test_client())
        with caplog.at_level(logging.WARNING):
            statuses = [send("GET", "/v1/matches", token).status_code for _ in range(4)]
        assert statuses == [200] * 4
        warnings = [
            r
            for r in caplog.records
            if r.levelno >= logging.WARNING and "storage unreachable" in r.getMessage()
        ]
        assert len(warnings) == 1
        # Counted in memory meanwhile: the limits still hold.
        assert_limited(send("GET", "/v1/matches", token), "reads from this token")
    finally:
        app.extensions["ddz"].close()


def test_switched_off_nothing_is_limited(config):
    app = create_app(dataclasses.replace(config, rate_limits=False, **LOW))
    try:
        signups = Address(app.test_client())
        for _ in range(5):
            signups.player()
    finally:
        app.extensions["ddz"].close()


def test_behind_a_trusted_proxy_the_limits_count_the_forwarded_address(config):
    """The proxy's own address is every client's: with DDZ_TRUSTED_PROXIES, the address
    it forwards is counted, and a client cannot pick one past the trusted proxies."""
    app = create_app(dataclasses.replace(config, trusted_proxies=1, **LOW))
    client = app.test_client()
    proxy = {"REMOTE_ADDR": "10.0.0.2"}

    def signup(forwarded: str):
        return client.post(
            "/v1/players",
            json={"name": "proxied"},
            headers={"X-Forwarded-For": forwarded},
            environ_base=proxy,
        )

    try:
        for _ in range(3):
            assert signup("203.0.113.7").status_code == 201
        # A client that adds its own X-Forwarded-For still counts as the address the proxy saw.
        assert_limited(signup("198.51.100.1, 203.0.113.7"), "signups from this address")
        assert signup("203.0.113.8").status_code == 201  # another client behind the proxy
    finally:
        app.extensions["ddz"].close()
