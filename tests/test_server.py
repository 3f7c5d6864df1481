"""The API as it is deployed: gunicorn with the settings of ``service/gunicorn_conf.py``
(gevent workers) in a process of its own, on the tests' PostgreSQL and Redis.

Clients that watch a match (event streams, long polls) wait on greenlets: with more
streams open than the old thread-per-request server had threads, commands are still
answered, and every stream and long poll still receives the new events. Every wait is
bounded; the server is stopped at the end."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from api_support import HttpApi, act_once, open_stream, read_messages, seated_match
from processes import gunicorn

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: More than 3 workers x 32 threads, what gthread served before.
STREAMS = 150


@pytest.fixture(scope="module")
def deployed(database_url, redis_url, tmp_path_factory):
    """The base URL of the API as deployed."""
    with gunicorn(
        database_url, redis_url, tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    ) as (base, _):
        yield base


def test_open_streams_do_not_hold_back_commands(deployed):
    api = HttpApi(deployed)
    players, match_id = seated_match(api, "streams")
    streams = []
    try:
        for i in range(STREAMS):
            conn, response = open_stream(deployed, match_id, players[i % 4].token, timeout=30)
            assert response.status == 200, f"stream {i}: {response.status}"
            streams.append((conn, response))
        # Every stream is being served: each has sent its snapshot.
        snapshots = [read_messages(response, 1)[0] for _, response in streams]
        version = int(snapshots[0].id)
        assert all(int(s.id) == version and s.event == "snapshot" for s in snapshots)

        answer = act_once(players, match_id)  # HttpApi gives up after 30 s
        assert answer["version"] > version

        # ... and every stream gets the new events, in order, right after its snapshot.
        for _, response in streams:
            received = read_messages(response, answer["version"] - version)
            assert [int(m.id) for m in received] == list(range(version + 1, answer["version"] + 1))
    finally:
        for conn, _ in streams:
            conn.close()


def test_streams_beyond_the_bound_are_refused_and_commands_still_answer(
    database_url, redis_url, tmp_path
):
    """One worker, 20 streams at most, 120 connections: the 21st stream on is refused
    with a problem, and a command answers while the bound is reached."""
    settings = dict(WEB_CONCURRENCY="1", DDZ_MAX_STREAMS="20", DDZ_WORKER_CONNECTIONS="120")
    with gunicorn(database_url, redis_url, tmp_path / "gunicorn.log", **settings) as (base, _):
        api = HttpApi(base)
        players, match_id = seated_match(api, "bounded")
        streams = [open_stream(base, match_id, players[i % 4].token, timeout=30) for i in range(25)]
        try:
            statuses = [response.status for _, response in streams]
            assert statuses == [200] * 20 + [503] * 5
            refused = streams[-1][1]
            assert refused.getheader("Retry-After") and b"too_many_streams" in refused.read()
            version = int(read_messages(streams[0][1], 1)[0].id)
            answer = act_once(players, match_id)
            assert answer["version"] > version
            received = read_messages(streams[19][1], answer["version"] - version + 1)
            assert int(received[-1].id) == answer["version"]
        finally:
            for conn, response in streams:
                response.close()
                conn.close()


def sign_up(conn: http.client.HTTPConnection, name: str) -> http.client.HTTPResponse:
    """A POST (which a client may not resend) on the connection: its answer."""
    conn.request(
        "POST",
        "/v1/players",
        body=json.dumps({"name": name}),
        headers={"Content-Type": "application/json"},
    )
    return conn.getresponse()


def test_a_command_after_a_players_pause_goes_on_the_same_connection(deployed):
    """A person thinks a few seconds between plays. The connection their last command
    came on is still open for the next one, a POST that a client may not resend: with
    gunicorn's default (2 s idle) the server closed it, sometimes just as the command
    was sent, and the command got no answer."""
    conn = http.client.HTTPConnection(urlparse(deployed).netloc, timeout=30)
    try:
        conn.request("GET", "/healthz")
        first = conn.getresponse()
        first.read()
        assert first.status == 200 and first.getheader("Connection") != "close"
        sock = conn.sock
        time.sleep(3.5)  # past the old 2 s, inside the slowest human think time of 8 s
        second = sign_up(conn, "pauses")
        assert second.status == 201, second.read()
        assert conn.sock is sock  # http.client would have opened a new one, or failed
    finally:
        conn.close()


def test_a_stopping_api_closes_its_idle_connections_at_once(database_url, redis_url, tmp_path):
    """Idle connections are kept 75 s, but a stopping API (a deploy, a scale-down) does
    not wait for them: gunicorn waits for every open connection up to its graceful
    timeout (30 s), and every stop took that long."""
    with gunicorn(database_url, redis_url, tmp_path / "gunicorn.log", WEB_CONCURRENCY="1") as (
        base,
        proc,
    ):
        conn = http.client.HTTPConnection(urlparse(base).netloc, timeout=30)
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        stopping = time.monotonic()
        proc.terminate()
        proc.wait(timeout=25)
        assert time.monotonic() - stopping < 10
        conn.close()


def test_a_connection_opened_as_the_api_stops_gets_its_request_answered(
    database_url, redis_url, tmp_path
):
    """A client that has just connected is about to send its request: a stopping API
    answers it (and closes the connection), where it closed such connections at once as
    idle, and their requests (the soak's commands at its API restart) got no answer."""
    with gunicorn(database_url, redis_url, tmp_path / "gunicorn.log", WEB_CONCURRENCY="1") as (
        base,
        proc,
    ):
        conn = http.client.HTTPConnection(urlparse(base).netloc, timeout=30)
        try:
            conn.connect()
            proc.terminate()
            time.sleep(1.5)  # the worker has closed its listener and its idle connections
            answer = sign_up(conn, "just-connected")
            assert answer.status == 201, answer.read()
            assert answer.getheader("Connection") == "close"
        finally:
            conn.close()
        proc.wait(timeout=25)


def test_gunicorn_refuses_too_few_connections_for_commands_next_to_the_streams(tmp_path):
    env = dict(
        os.environ,
        DDZ_MAX_STREAMS="1000",
        DDZ_WORKER_CONNECTIONS="1050",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path),  # else the settings make a directory of their own
    )
    loaded = subprocess.run(
        [sys.executable, "-c", "import service.gunicorn_conf"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.returncode != 0
    assert "DDZ_WORKER_CONNECTIONS (1050) must exceed DDZ_MAX_STREAMS (1000)" in loaded.stderr


def test_a_long_poll_wakes_on_the_next_command(deployed):
    api = HttpApi(deployed)
    players, match_id = seated_match(api, "poll")
    version = api.request("GET", f"/v1/matches/{match_id}", players[0].token).json["version"]
    polled = {}

    def poll():
        polled["reply"] = api.request(
            "GET", f"/v1/matches/{match_id}/events?after={version}&wait=25", players[0].token
        )

    waiter = threading.Thread(target=poll)
    waiter.start()
    time.sleep(0.5)  # the poll is waiting (an earlier answer would hold no events)
    answer = act_once(players, match_id)
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    reply = polled["reply"]
    assert reply.status == 200, reply.text
    assert [e["version"] for e in reply.json["events"]][0] == version + 1
    assert reply.json["events"][-1]["version"] <= answer["version"]


def test_a_connection_is_closed_after_its_last_keep_alive_request(deployed):
    """So that a client's connection can move to the other worker (here after 3)."""
    url = urlparse(deployed)
    request = f"GET /healthz HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode()
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(request * 4)
        received = b""
        while chunk := sock.recv(65536):  # the server closes: no timeout
            received += chunk
    answers = received.split(b"HTTP/1.1 ")[1:]
    assert len(answers) == 3
    assert [a.split(b"\r\n")[0] for a in answers] == [b"200 OK"] * 3
    assert [b"Connection: keep-alive" in a for a in answers] == [True, True, False]
    assert b"Connection: close" in answers[2]


@pytest.mark.parametrize(
    "request_head, status, code, limit",
    [
        (
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"x" * 9000 + b"\r\n\r\n",
            431,
            "headers_too_large",
            "8190 bytes",
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-%d: 1\r\n" % i for i in range(120))
            + b"\r\n",
            431,
            "headers_too_large",
            "100 header fields",
        ),
        (
            b"GET /healthz?" + b"q" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            414,
            "request_line_too_long",
            "4094 bytes",
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n",
            400,
            "bad_request",
            "not valid HTTP",
        ),
    ],
)
def test_requests_gunicorn_refuses_get_problem_documents(
    deployed, request_head, status, code, limit
):
    """Requests refused before the app sees them (too long a request line, too many or too
    large header fields, malformed HTTP) are answered as the app answers: a problem
    document with the security headers, not gunicorn's HTML page."""
    url = urlparse(deployed)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(request_head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].split(" ", 2)[1] == str(status), answer[:500]
    headers = {
        name.lower(): value for name, _, value in (line.partition(": ") for line in lines[1:])
    }
    assert headers["content-type"] == "application/problem+json"
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert headers["cache-control"] == "no-store"
    problem = json.loads(body)
    assert int(headers["content-length"]) == len(body)
    assert (problem["status"], problem["code"]) == (status, code), problem
    assert limit in problem["detail"], problem


def test_stopping_ends_open_streams_and_long_polls_instead_of_cutting_them_off(
    database_url, redis_url, tmp_path
):
    log_path = tmp_path / "gunicorn.log"
    with gunicorn(database_url, redis_url, log_path) as (base, proc):
        api = HttpApi(base)
        players, match_id = seated_match(api, "drain")
        version = api.request("GET", f"/v1/matches/{match_id}", players[0].token).json["version"]
        conn, response = open_stream(base, match_id, players[0].token, timeout=30)
        polled = {}

        def poll():
            polled["reply"] = api.request(
                "GET", f"/v1/matches/{match_id}/events?after={version}&wait=30", players[1].token
            )

        try:
            assert read_messages(response, 1)[0].event == "snapshot"
            waiter = threading.Thread(target=poll)
            waiter.start()
            time.sleep(0.5)  # the poll is waiting
            proc.terminate()
            # The stream ends as a complete answer (a cut-off one raises IncompleteRead) ...
            assert b"event:" not in response.read()
            # ... and the long poll answers: nothing new, ask again.
            waiter.join(timeout=30)
            assert polled["reply"].status == 200 and polled["reply"].json["events"] == []
            assert proc.wait(timeout=30) == 0
        finally:
            conn.close()
    assert "graceful timeout" not in log_path.read_text(errors="replace")


#: Run in a process of its own: importing the settings sets environment variables (the
#: metrics directory, the console's key) and gunicorn's logger configures logging, which
#: in the suite's own process emptied the /metrics of the observability tests that ran
#: after it.
ACCESS_LOG_CHECK = """
import json, logging, sys
from datetime import timedelta
from types import SimpleNamespace

from gunicorn.config import Config

from service import gunicorn_conf
from service.gunicorn_worker import QuietAccessLogger


class Counted(QuietAccessLogger):
    built = 0

    def atoms(self, *args):
        type(self).built += 1
        return super().atoms(*args)


cfg = Config()
cfg.set("logconfig_dict", gunicorn_conf.logconfig_dict)
response = SimpleNamespace(status="200 OK", sent=2, headers=[])
request = SimpleNamespace(
    headers=[], method="GET", path="/healthz", query="", uri="/healthz", version=(1, 1)
)
environ = {
    "REMOTE_ADDR": "127.0.0.1",
    "REQUEST_METHOD": "GET",
    "RAW_URI": "/healthz",
    "SERVER_PROTOCOL": "HTTP/1.1",
}
Counted(cfg).access(response, request, environ, timedelta(0))
without_handler = Counted.built
logger = Counted(cfg)
logger.access_log.addHandler(logging.FileHandler(sys.argv[1]))
logger.access(response, request, environ, timedelta(0))
print(json.dumps([without_handler, Counted.built - without_handler]))
"""


def test_the_access_log_is_built_only_for_a_handler_that_writes_it(tmp_path):
    """gunicorn's access log is off as deployed (the app logs each request itself), so no
    access line is built; given a handler (``--access-logfile``) it writes one per request."""
    path = tmp_path / "access.log"
    checked = subprocess.run(
        [sys.executable, "-c", ACCESS_LOG_CHECK, str(path)],
        cwd=ROOT,
        env=dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout.splitlines()[-1]) == [0, 1]
    assert "GET /healthz" in path.read_text()


#: A worker's end as gunicorn's arbiter runs it in the worker's process: the exit under
#: way (the status argv[1]), then ``worker_exit`` in a ``finally``.
WORKER_EXIT_CHECK = """
import atexit, logging, sys
from service import gunicorn_conf

atexit.register(lambda: print("the interpreter's teardown", file=sys.stderr, flush=True))
logging.getLogger("gunicorn.error").warning("the worker's last words")
try:
    sys.exit(int(sys.argv[1]))
finally:
    gunicorn_conf.worker_exit(None, None)
"""


@pytest.mark.parametrize("status", [0, 3, 255])
def test_a_worker_ends_at_its_exit_hook_with_gunicorns_status(
    database_url, redis_url, tmp_path, status
):
    """The exit hook ends the process itself, skipping the interpreter's teardown (the
    replacement waits for the process to be gone), with the status gunicorn was exiting
    with: 3 is a worker that failed to boot, on which gunicorn stops rather than start it
    again and again. What it logged is written first."""
    ended = subprocess.run(
        [sys.executable, "-c", WORKER_EXIT_CHECK, str(status)],
        cwd=ROOT,
        env=dict(
            os.environ,
            DATABASE_URL=database_url,
            REDIS_URL=redis_url,
            PROMETHEUS_MULTIPROC_DIR=str(tmp_path),
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ended.returncode == status, ended.stderr
    assert "the worker's last words" in ended.stderr
    assert "the interpreter's teardown" not in ended.stderr
