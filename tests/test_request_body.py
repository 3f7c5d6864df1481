"""A request's body under gunicorn, as deployed: one that does not arrive in time (a
Content-Length and nothing after it, a chunked body trickled a byte at a time) is answered
408 ``body_timeout`` and its connection closed, rather than held for as long as the client
likes; and a chunked body is counted by the rate limits before it is read."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import redis
from api_support import HttpApi, new_player
from ha import wait_until
from processes import gunicorn

from service.api.rate_limits import COMMANDS as COMMANDS_CATEGORY
from service.api.rate_limits import KEY_PREFIX, hashed

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

BODY_SECONDS = 1.0
#: Commands one address may send a minute here.
COMMANDS = 3


@pytest.fixture(scope="module")
def deployed(database_url, redis_url, tmp_path_factory) -> Iterator[str]:
    with gunicorn(
        database_url,
        redis_url,
        tmp_path_factory.mktemp("gunicorn") / "gunicorn.log",
        DDZ_BODY_SECONDS=str(BODY_SECONDS),
    ) as (base, _):
        yield base


def connect(base: str) -> socket.socket:
    parts = urlsplit(base)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def head(base: str, token: str, framing: str) -> bytes:
    """The start of a POST /v1/matches, up to its body."""
    return (
        f"POST /v1/matches HTTP/1.1\r\nHost: {urlsplit(base).netloc}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


def posted(base: str, framing: str) -> socket.socket:
    """A connection that has sent a new player's POST /v1/matches up to its body."""
    player = new_player(HttpApi(base), "slow")
    sock = connect(base)
    sock.sendall(head(base, player.token, framing))
    return sock


def answer(sock: socket.socket) -> tuple[int, dict, bytes]:
    """The answer, and what follows it before the server closes the connection (a
    connection still open after the socket's timeout fails the test)."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        raise AssertionError(f"the connection is still open; received {data!r}") from None
    except ConnectionResetError:
        pass  # closed with the rest of the body unread: a reset follows the answer
    status_line, _, rest = data.partition(b"\r\n")
    _, _, body = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(body), data


def test_a_body_announced_and_never_sent_is_a_408(deployed):
    sock = posted(deployed, "Content-Length: 100")
    started = time.monotonic()
    try:
        status, problem, _ = answer(sock)
        assert status == 408 and problem["code"] == "body_timeout", problem
        # Timed from the server's reading of the headers, which a loaded machine may
        # start a little before or well after this clock.
        assert BODY_SECONDS - 0.2 <= time.monotonic() - started < BODY_SECONDS + 5
    finally:
        sock.close()


def test_a_trickled_chunked_body_is_a_408(deployed):
    sock = posted(deployed, "Transfer-Encoding: chunked")
    started = time.monotonic()
    try:
        # A byte every 0.2 s: each read gets something long before any socket timeout.
        sock.settimeout(0.2)
        for byte in b"{}" + b" " * 100:
            sock.sendall(b"1\r\n" + bytes([byte]) + b"\r\n")
            try:
                if sock.recv(65536, socket.MSG_PEEK):
                    break  # answered: no more is sent
            except TimeoutError:
                continue
        sock.settimeout(10)
        status, problem, _ = answer(sock)
        assert status == 408 and problem["code"] == "body_timeout", problem
        assert time.monotonic() - started < BODY_SECONDS + 5
    finally:
        sock.close()


def counted_commands(redis_url: str, token: str) -> int:
    """The commands Redis holds against the token (in its minutes: see the test)."""
    pattern = f"{KEY_PREFIX}:{COMMANDS_CATEGORY}:token:{hashed(token)}:*"
    with redis.Redis.from_url(redis_url) as client:
        return sum(int(client.get(key) or 0) for key in client.scan_iter(pattern))


def test_a_chunked_body_is_counted_by_the_rate_limits_before_it_is_read(
    database_url, redis_url, tmp_path
):
    """Chunked bodies were read whole before the limits counted the request: a client
    could hold any number of them open, uncounted."""
    with gunicorn(
        database_url,
        redis_url,
        tmp_path / "gunicorn.log",
        DDZ_RATE_LIMIT_COMMANDS_PER_ADDRESS=f"{COMMANDS}/minute",
        # Far above the test, in minutes: the token's count stays in Redis to be read.
        DDZ_RATE_LIMIT_COMMANDS="1000/minute",
        DDZ_RATE_LIMIT_LOCAL_SHARE="0",  # every request counted in Redis at once
        DDZ_BODY_SECONDS="30",
    ) as (base, _):
        player = new_player(HttpApi(base), "chunky")
        pending = [connect(base) for _ in range(COMMANDS)]
        try:
            for sock in pending:
                sock.sendall(head(base, player.token, "Transfer-Encoding: chunked"))
                sock.sendall(b"1\r\n{\r\n")  # and nothing more yet
            # Counted as they came (the bodies are still on their way). Waited for in Redis:
            # a fixed sleep was too little for a busy machine to take every head in.
            wait_until(
                lambda: counted_commands(redis_url, player.token) >= COMMANDS,
                20,
                f"the {COMMANDS} heads to be counted",
            )
            assert counted_commands(redis_url, player.token) == COMMANDS
            refused = HttpApi(base).request("POST", "/v1/matches", player.token, json_body={})
            assert refused.status == 429 and refused.json["code"] == "rate_limited", refused.text
            for sock in pending:  # the bodies end: each one is served
                sock.sendall(b"1\r\n}\r\n0\r\n\r\n")
                sock.settimeout(10)
                assert sock.recv(65536).startswith(b"HTTP/1.1 201 ")
        finally:
            for sock in pending:
                sock.close()
