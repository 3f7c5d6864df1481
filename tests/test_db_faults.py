"""PostgreSQL connections that break under the service (a backend terminated, the server
away): reads and the token lookup retry on a fresh connection, a command whose commit is
uncertain answers what really happened, and a database that stays away gets a 503
problem, never a 500. Each test runs an app of its own on a database of its own, whose
backends it terminates."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace

import psycopg
import pytest
from api_support import ClientApi, assert_problem, operator_events, seated_match, to_act
from servers import fresh_database
from store_support import execute

from service.api import create_app
from service.game import BOT, Bid, CreateMatch, MatchSettings, TakeSeat
from service.store import EventStore, open_pool

# Slow: kills database backends and waits for the pool to recover (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

#: Every backend of the current database but the caller's.
TERMINATE = (
    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


#: Seconds between two rounds of terminations.
PAUSE = 0.2


@contextmanager
def app_on_own_database(postgres_admin_url, config, **overrides):
    with fresh_database(postgres_admin_url, "ddz_faults") as url:
        app = create_app(replace(config, database_url=url, **overrides))
        try:
            yield app, url
        finally:
            app.extensions["ddz"].close()


@pytest.fixture()
def faulty(postgres_admin_url, config):
    with app_on_own_database(postgres_admin_url, config) as (app, url):
        yield app, url


def terminate_all(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(TERMINATE).fetchone()[0]


class Recorder:
    """The app's test client (one per thread) keeping the status of every answer."""

    def __init__(self, app):
        self.app = app
        self.local = threading.local()
        self.statuses: list[tuple[str, str, int, str]] = []
        self.lock = threading.Lock()

    def request(self, method, path, token=None, **kwargs):
        if not hasattr(self.local, "api"):
            self.local.api = ClientApi(self.app.test_client())
        reply = self.local.api.request(method, path, token, **kwargs)
        with self.lock:
            self.statuses.append(
                (method, path, reply.status, reply.text[:300] if reply.status >= 400 else "")
            )
        return reply


def next_command(player, match_id: str, view: dict) -> dict:
    """A legal command for the seat to act."""
    kinds = {a["action"]: a for a in view["actions"]}
    if "bid" in kinds:
        return {"action": "bid", "value": max(kinds["bid"]["choices"])}
    if "show_hand" in kinds:
        return {"action": "show_hand", "value": False}
    if "report" in kinds:
        return {"action": "report", "value": "decline"}
    legal = player.get(f"/v1/matches/{match_id}/legal")
    assert legal.status == 200, legal.text
    plays = legal.json["plays"]
    if legal.json["can_pass"] and (not plays or len(plays) > 3):
        return {"action": "pass"}
    return {"action": "play", "cards": plays[-1]["cards"]}


def play_match(
    players, match_id: str, deadline: float, acknowledged: list, lock: threading.Lock
) -> None:
    """Plays the match to its end (or the deadline), one command at a time, in three ways in
    turn: at an expected version with an Idempotency-Key, at an expected version, and bare."""
    for step in range(10_000):
        if time.monotonic() > deadline:
            return
        if players[0].get(f"/v1/matches/{match_id}").json["phase"] == "ended":
            return
        player, view = to_act(players, match_id)
        body = next_command(player, match_id, view)
        headers = {}
        if step % 3 < 2:
            body["expected_version"] = view["version"]
        if step % 3 == 0:
            headers["Idempotency-Key"] = f"fault-{step}"
        reply = player.post(f"/v1/matches/{match_id}/commands", body, headers=headers)
        # Nobody else acts on this match: a conflict or a refusal would be untrue.
        assert reply.status == 200, (body, reply.status, reply.text)
        with lock:
            acknowledged.append((match_id, view["version"], reply.json))


def test_commands_and_reads_while_backends_are_terminated_get_no_5xx_and_true_answers(faulty):
    app, url = faulty
    api = Recorder(app)
    matches = [seated_match(api, f"fault{i}-") for i in range(4)]
    acknowledged: list = []
    lock = threading.Lock()
    stop = threading.Event()
    terminations = []

    def terminator():
        while not stop.is_set():
            terminations.append(terminate_all(url))
            time.sleep(PAUSE)

    killer = threading.Thread(target=terminator, daemon=True)
    killer.start()
    deadline = time.monotonic() + 25
    try:
        with ThreadPoolExecutor(len(matches)) as threads:
            for done in [
                threads.submit(play_match, p, m, deadline, acknowledged, lock) for p, m in matches
            ]:
                done.result()
    finally:
        stop.set()
        killer.join()

    failed = [s for s in api.statuses if s[2] >= 500]
    assert failed == [], failed[:5]
    killed = sum(terminations)
    print(
        f"\n{len(acknowledged)} commands, {len(api.statuses)} requests, {killed} backends terminated in {len(terminations)} rounds, 5xx: {len(failed)}"
    )
    assert len(acknowledged) >= 100 and killed >= 50, (len(acknowledged), killed)
    for _players, match_id in matches:
        log = operator_events(ClientApi(app.test_client()), match_id)["events"]
        answers = [a for m, _, a in acknowledged if m == match_id]
        start = answers[0]["events"][0]["version"] - 1
        answered = [(e["version"], e["type"]) for a in answers for e in a["events"]]
        # Every event after the first command was appended by exactly one acknowledged
        # command, and each answer names the events the log holds.
        assert answered == [(e["version"], e["type"]) for e in log if e["version"] > start]
        for version, answer in [(v, a) for m, v, a in acknowledged if m == match_id]:
            assert answer["events"][0]["version"] == version + 1


@contextmanager
def connection_lost_after_append(store: EventStore, url: str, before: bool = False):
    """The store's next append's connection dies: right after the append statement
    committed and before its answer is read (as when the backend is terminated between
    the two), or, with ``before``, right before the statement is sent. One time only."""
    original = store.append
    calls = []

    def append(conn, *args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            return original(conn, *args, **kwargs)
        pid = conn.info.backend_pid
        if not before:
            original(conn, *args, **kwargs)
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # The next thing read from this connection is the end of it: a real OperationalError.
        return original(conn, *args, **kwargs) if before else conn.execute("SELECT 1")

    store.append = append
    try:
        yield calls
    finally:
        del store.append


@pytest.mark.parametrize("key", [None, "lost-answer"])
def test_a_command_whose_answer_was_lost_after_commit_gets_its_success_answer(faulty, key):
    app, url = faulty
    api = ClientApi(app.test_client())
    players, match_id = seated_match(api, "lost")
    player, view = to_act(players, match_id)
    body = {"action": "bid", "value": 1, "expected_version": view["version"]}
    headers = {} if key is None else {"Idempotency-Key": key}
    with connection_lost_after_append(app.extensions["ddz"].store, url) as calls:
        reply = player.post(f"/v1/matches/{match_id}/commands", body, headers=headers)
    assert len(calls) == 1  # the append was not sent again
    assert reply.status == 200, reply.text
    assert [e["version"] for e in reply.json["events"]] == [view["version"] + 1]
    log = operator_events(api, match_id)["events"]
    assert [e["type"] for e in log if e["version"] > view["version"]] == ["bid"]
    if key is not None:
        retry = player.post(f"/v1/matches/{match_id}/commands", body, headers=headers)
        assert retry.status == 200 and retry.content == reply.content


def test_a_command_whose_connection_died_before_the_append_is_applied_once(faulty):
    app, url = faulty
    api = ClientApi(app.test_client())
    players, match_id = seated_match(api, "before")
    player, view = to_act(players, match_id)
    with connection_lost_after_append(app.extensions["ddz"].store, url, before=True) as calls:
        reply = player.post(f"/v1/matches/{match_id}/commands", {"action": "bid", "value": 2})
    assert len(calls) == 2  # decided again on a fresh connection
    assert reply.status == 200, reply.text
    log = operator_events(api, match_id)["events"]
    assert [e["type"] for e in log if e["version"] > view["version"]] == ["bid"]


def test_a_bots_command_through_the_store_survives_a_lost_answer(faulty):
    """Workers act through the same command path: a bot's bid at an expected version whose
    answer was lost is its success, not a conflict with itself."""
    app, url = faulty
    pool = open_pool(url, 2, "ddz-test-faults")
    try:
        store = EventStore(pool)
        match_id = uuid.uuid4()
        execute(
            store,
            match_id,
            lambda _: CreateMatch(str(match_id), MatchSettings.build()),
            new_match=True,
        )
        for seat in range(4):
            outcome = execute(
                store,
                match_id,
                lambda _, s=seat: TakeSeat(s, None, bot=True),
            )
        state = outcome.state
        with connection_lost_after_append(store, url) as calls:
            bid = execute(
                store, match_id, lambda s: Bid(s.turn, 1, BOT), expected_version=state.version
            )
        assert len(calls) == 1
        assert [e.version for e in bid.events] == [state.version + 1] and not bid.replayed
        assert [e.version for e in store.read(match_id)][-1] == state.version + 1
    finally:
        pool.close()


def test_reads_and_the_token_lookup_retry_on_a_fresh_connection(faulty, live_worker):
    app, url = faulty
    api = Recorder(app)
    players, match_id = seated_match(api, "reads")
    paths = [
        f"/v1/matches/{match_id}",
        f"/v1/matches/{match_id}/legal",
        f"/v1/matches/{match_id}/events?after=0",
        "/v1/matches",
        "/readyz",
    ]
    for _ in range(3):
        # Every pooled connection dies; the cached tokens are forgotten so that each
        # request looks its token up too.
        assert terminate_all(url) >= 1
        app.extensions["ddz"].players._known.clear()
        for path in paths:
            reply = players[0].get(path)
            assert reply.status == 200, (path, reply.text)


def test_a_database_that_stays_away_gets_503_problems(postgres_admin_url, config):
    with app_on_own_database(postgres_admin_url, config, db_timeout=1.0) as (app, url):
        api = ClientApi(app.test_client())
        players, match_id = seated_match(api, "away")
        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        with psycopg.connect(postgres_admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
            )
            app.extensions["ddz"].players._known.clear()
            try:
                view = players[0].get(f"/v1/matches/{match_id}")
                assert_problem(view, 503, "database_unavailable")
                assert view.headers["Retry-After"] == "1"
                command = players[1].post(
                    f"/v1/matches/{match_id}/commands", {"action": "bid", "value": 1}
                )
                assert_problem(command, 503, "database_unavailable")
                assert_problem(api.request("GET", "/readyz"), 503, "not_ready")
            finally:
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        # Back: the same requests succeed.
        deadline = time.monotonic() + 10
        while players[0].get(f"/v1/matches/{match_id}").status != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
