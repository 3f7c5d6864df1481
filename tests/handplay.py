"""A pytest plugin (``pytest_plugins`` in conftest.py): a service of its own for the operations
tests (metrics, logs, operators, the console): a fresh database, a Redis of its own, an app
on both, and hands played to their settlement by one player and three bots, the bots' turns
and the settlement run by a real RQ worker in this process (burst mode)."""

from __future__ import annotations

import io
import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis as redis_lib
from api_support import OP, bearer
from jobs import new_player
from servers import OPERATOR_TOKEN, embedded_redis, fresh_database

import workers.context
from service.api import create_app
from service.app import work
from service.cli import main
from service.config import Config
from workers.worker import JobWorker


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """DATABASE_URL / REDIS_URL for the jobs run in this process (workers.context)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    workers.context.context.cache_clear()
    try:
        yield
    finally:
        try:
            ctx = workers.context.context()
            ctx.pool.close()
            ctx.redis.close()
        finally:
            workers.context.context.cache_clear()
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@pytest.fixture(scope="module")
def ops(postgres_admin_url):
    """(app, Redis connection, database URL) of this module's own service."""
    with (
        fresh_database(postgres_admin_url, "ddz_ops") as database_url,
        embedded_redis() as redis_url,
        environment(DATABASE_URL=database_url, REDIS_URL=redis_url),
    ):
        app = create_app(
            Config(
                database_url=database_url,
                redis_url=redis_url,
                operator_token=OPERATOR_TOKEN,
                rate_limits=False,
                # The app in this process is the only one: it may hold a stream for long.
                stream_seconds=3.0,
            )
        )
        app.config["WTF_CSRF_ENABLED"] = True
        connection = redis_lib.Redis.from_url(redis_url)
        try:
            yield app, connection, database_url
        finally:
            connection.close()
            app.extensions["ddz"].close()


def run_jobs(connection: redis_lib.Redis) -> None:
    JobWorker([work.queue(connection)], connection=connection).work(
        burst=True, logging_level="WARNING"
    )


def seated_hand(client, name: str, leave: bool = False, **options) -> tuple[dict, str]:
    """A new player (``name``) at seat 2 of a new match and three bots: the player's
    headers and the match's path, dealt. With ``leave`` the player leaves once dealt."""
    _, token = new_player(client, name)
    me = bearer(token)
    r = client.post("/v1/matches", json=options, headers=me)
    assert r.status_code == 201, r.json
    path = f"/v1/matches/{r.json['match_id']}"
    assert client.post(f"{path}/seats", json={"seat": 2}, headers=me).status_code == 201
    for seat in (0, 1, 3):
        r = client.post(f"{path}/seats", json={"seat": seat, "bot": True}, headers=me)
        assert r.status_code == 201, r.json
    if leave:
        assert client.post(f"{path}/leave", headers=me).status_code == 200
    return me, path


def next_command(client, connection, me: dict, path: str, rng: random.Random) -> dict | None:
    """Runs the bots' turns, then sends the player's next command, once it is the player's
    turn; its answer (``None`` once the hand has ended)."""
    run_jobs(connection)
    view = client.get(path, headers=me).json
    if view["phase"] == "ended":
        return None
    kinds = {a["action"]: a for a in view["actions"]}
    if "bid" in kinds:
        body = {"action": "bid", "value": rng.choice(kinds["bid"]["choices"])}
    elif "show_hand" in kinds:
        body = {"action": "show_hand", "value": False}
    elif "report" in kinds:
        body = {"action": "report", "value": "decline"}
    else:
        legal = client.get(f"{path}/legal", headers=me).json
        if legal["can_pass"] and (not legal["plays"] or rng.random() < 0.3):
            body = {"action": "pass"}
        else:
            body = {"action": "play", "cards": legal["plays"][0]["cards"]}
    r = client.post(f"{path}/commands", json=body, headers=me)
    assert r.status_code == 200, r.json
    return r.json


def finish_hand(client, connection, me: dict, path: str, rng: random.Random) -> None:
    """Plays the hand to its end, then its settlement."""
    for _ in range(300):
        if next_command(client, connection, me, path, rng) is None:
            break
    else:
        raise AssertionError("the hand did not end")
    run_jobs(connection)
    assert client.get(f"{path}/settlement", headers=OP).status_code == 200


def play_hand(
    client, connection, name: str = "human", seed: int = 11, leave: bool = False, **options
) -> str:
    """A hand of one player (seat 2) and three bots, played to its settlement; its id.
    With ``leave`` the player leaves once dealt, and the system plays the seat."""
    me, path = seated_hand(client, name, leave, **options)
    rng = random.Random(seed)
    if leave:
        run_jobs(connection)
        assert client.get(path, headers=me).json["phase"] == "ended", (
            "the system plays every seat: the worker has run the hand"
        )
    finish_hand(client, connection, me, path, rng)
    return path.rsplit("/", 1)[1]


PASSWORDS = {
    "ada": "ada's long passphrase",
    "otto": "otto audits everything",
    "temp": "a temporary passphrase",
    "kept": "a cookie kept somewhere",
    "busy": "signed in all day long",
    "ok.name-1@team": "an ordinary passphrase",
    "managed": "managed by an admin",
    "traced": "every step of mine is traced",
    "promoted": "an auditor for now, admin soon",
}


def add_operator(name: str, role: str) -> None:
    """``ddz operator add NAME --role ROLE``, the password on stdin."""
    stdin = sys.stdin
    sys.stdin = io.StringIO(PASSWORDS[name] + "\n")
    try:
        assert main(["operator", "add", name, "--role", role, "--password-stdin"]) == 0
    finally:
        sys.stdin = stdin


@pytest.fixture(scope="module")
def service(ops):
    """The ops service with an admin (ada), an auditor (otto), a hand played by a player
    (carol) and a hand its player (dave) left, which the system played."""
    app, connection, _ = ops
    add_operator("ada", "admin")
    add_operator("otto", "auditor")
    client = app.test_client()
    played = play_hand(client, connection, "carol")
    left = play_hand(client, connection, "dave", leave=True)
    return app, played, left
