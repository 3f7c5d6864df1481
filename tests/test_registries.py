"""Every registry kept beside the thing it names is complete, and says where to add what is
missing: each refusal of the store has its HTTP status, each of a match's events its
summary (which the console and the workers' log show), each endpoint its rate-limit
category, each event class its place in the streams' registry, and each route that holds
a connection (a stream, a long poll) its admission under the bounds on what is held open.
And what is derived
from a registry holds: the system's players take a decision they have no rule for with
its first candidate, which the decider always accepts."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from api_support import bearer
from event_hands import played_hands
from flask import Flask

import service.store
from service.api import create_app, rate_limits
from service.api.documents import STORE_STATUS, game_error
from service.api.open_streams import Bound
from service.game import can, evolve, initial_state, seat_view
from service.game import events as events_module
from service.game.actions import CANDIDATES
from service.game.bot import BotPolicy
from service.game.commands import SeatCommand
from service.game.events import (
    BOT,
    EVENT_TYPES,
    MATCH_EVENTS,
    PLAYER,
    TABLE_EVENTS,
    Event,
    HandDealt,
    Played,
)
from service.game.explain import PLAY_NAMES
from service.game.policies import RandomPolicy
from service.game.state import PLAYING
from service.store import StoredEvent, StoreError
from service.web import console
from workers.jobs import describe


def subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *subclasses(sub)}
    return found


def test_every_refusal_of_the_store_has_its_http_status():
    for module in pkgutil.walk_packages(service.store.__path__, "service.store."):
        importlib.import_module(module.name)
    missing = sorted(cls.__name__ for cls in subclasses(StoreError) - set(STORE_STATUS))
    assert not missing, (
        f"give {', '.join(missing)} an HTTP status in STORE_STATUS of service/api/documents.py"
    )
    for cls, status in STORE_STATUS.items():
        answer = game_error(cls("refused"))
        assert (answer.status, answer.code) == (status, cls.code)
        assert 400 <= status < 500


def test_every_event_class_is_in_the_streams_registry():
    declared = {
        value
        for value in vars(events_module).values()
        if isinstance(value, type) and issubclass(value, Event) and value is not Event
    }
    unknown = sorted(cls.__name__ for cls in declared - set(EVENT_TYPES.values()))
    assert not unknown, (
        f"add {', '.join(unknown)} to MATCH_EVENTS or TABLE_EVENTS in service/game/events.py"
    )
    assert not set(MATCH_EVENTS) & set(TABLE_EVENTS)


def test_every_event_of_a_match_has_its_own_summary():
    missing = sorted(cls.__name__ for cls in MATCH_EVENTS if "summary" not in vars(cls))
    assert not missing, f"give {', '.join(missing)} a summary() in service/game/events.py"


def stored(events: list[Event]) -> list[StoredEvent]:
    now = datetime.now(UTC)
    return [StoredEvent(n, n, event, now) for n, event in enumerate(events, 1)]


#: A card code (S3, HT, BJ, ...), as a whole word.
CARD_CODE = re.compile(r"\b(?:[SHCD][3-9TJQKA2]|[BR]J)\b")


def test_the_console_and_the_workers_log_say_what_each_event_is():
    """Never the bare event type, and never a card but the marked one (public)."""
    seen = set()
    for events in played_hands():
        steps = console.replay(stored(events))
        # The console shows the hand from its deal on.
        shown = [event for event in events if event.type not in ("match_created", "seat_taken")]
        assert len(steps) == len(shown)
        for step, event in zip(steps, shown, strict=True):
            summary = event.summary()
            assert summary and summary != event.type
            public = {event.marked_card.code} if isinstance(event, HandDealt) else set()
            assert set(CARD_CODE.findall(summary)) <= public, summary
            # The console names a play as the players do, and draws the marked card as a
            # card: neither says a card's code.
            assert not CARD_CODE.findall(step["said"]), step["said"]
            if isinstance(event, Played):
                zh, en = PLAY_NAMES[event.combination]
                assert step["said"].startswith(f"seat {event.seat} played {zh} {en} (")
                assert ("system" in step["said"]) == (event.by == BOT)
            elif isinstance(event, HandDealt):
                assert step["said"].startswith("dealt;")
                assert step["marked"] == event.marked_card.code
            else:
                assert step["said"] == summary
            assert describe(stored([event])) == summary
            seen.add(type(event))
    assert seen | {EVENT_TYPES["match_created"], EVENT_TYPES["seat_taken"]} == set(MATCH_EVENTS)


def test_every_endpoint_has_a_rate_limit_category(app):
    rate_limits.check_categories(app)
    assert set(rate_limits.CATEGORY_OF) <= set(app.view_functions)


def test_an_endpoint_without_a_category_is_refused_with_where_to_add_it():
    other = Flask(__name__)
    other.add_url_rule(f"/v1/{uuid.uuid4().hex}", "invented.route", lambda: "")
    with pytest.raises(RuntimeError, match=r"invented\.route.*CATEGORY_OF of service/api/rate"):
        rate_limits.check_categories(other)


def test_each_decision_s_first_candidate_is_accepted_whenever_it_is_due():
    """What a system player takes for a decision its policy has no rule for."""
    due = set()
    for events in played_hands():
        state = initial_state
        for event in events:
            if state.awaits_decision():
                seat, by = state.turn, BOT if state.is_system(state.turn) else PLAYER
                for cls, (phase, values) in CANDIDATES.items():
                    if phase == state.phase and values is not None:
                        assert can(state, cls(seat, values[0], by)), (cls.name, state)
                        due.add(cls)
            state = evolve(state, event)
    assert due == {cls for cls, (_, values) in CANDIDATES.items() if values is not None}


@dataclass(frozen=True, slots=True)
class Double(SeatCommand):
    """A decision no policy has a rule for (加倍, say)."""

    name = "double"
    value: bool
    by: str = PLAYER


@pytest.mark.parametrize("policy", [RandomPolicy(), BotPolicy()], ids=lambda p: p.name)
def test_a_decision_new_to_a_policy_is_taken_with_its_first_candidate(policy, monkeypatch):
    monkeypatch.setitem(CANDIDATES, Double, ("doubling", (False, True)))
    state = initial_state
    for event in played_hands()[0]:
        state = evolve(state, event)
        if state.phase == PLAYING:
            break
    view = dataclasses.replace(seat_view(state, state.turn), phase="doubling")
    assert policy.act(view) == Double(state.turn, False, PLAYER)


OPENAPI = yaml.safe_load((Path(__file__).resolve().parents[1] / "openapi.yaml").read_text())


def holding_routes() -> list[tuple[str, bool]]:
    """(path template, whether it long-polls) of each operation of the contract that holds
    a connection: a stream (``text/event-stream``) or a long poll (a ``wait`` in its query)."""
    found = []
    for path, operations in OPENAPI["paths"].items():
        get = operations.get("get")
        if get is None:
            continue
        streams = "text/event-stream" in get["responses"].get("200", {}).get("content", {})
        waits = any(p["in"] == "query" and p["name"] == "wait" for p in get.get("parameters", []))
        if streams or waits:
            found.append((path, waits))
    return found


def test_every_route_that_holds_a_connection_is_admitted_under_the_bounds(config):
    """Each stream and long poll of the contract is refused when its caller's address
    holds as many as it may (429 ``open_stream_limit``) and when the process does (503
    ``too_many_streams``), rather than held: so a new one cannot forget its admission, as
    the watchers' did (one address took 36 of a process's 40 places). The ids in the
    paths: a match the player sits at, and a public table the player sits at; a new
    parameter in a path needs its value in ``ids`` here."""
    address = "198.51.100.38"
    app = create_app(dataclasses.replace(config, max_streams=1, max_streams_per_address=1))
    client = app.test_client()
    try:
        made = client.post("/v1/players", json={"name": "holder"}).json
        token, headers = made["token"], bearer(made["token"])
        match_id = client.post("/v1/matches", headers=headers).json["match_id"]
        assert client.post(f"/v1/matches/{match_id}/seats", headers=headers).status_code == 201
        table_id = client.post("/v1/tables", headers=headers).json["table_id"]
        ids = {"match_id": match_id, "table_id": table_id}
        routes = holding_routes()
        assert {path for path, _ in routes} >= {
            "/v1/matches/{match_id}/stream",
            "/v1/matches/{match_id}/events",
            "/v1/me/stream",
            "/v1/me/events",
            "/v1/tables/{table_id}/watch",
            "/v1/tables/{table_id}/watch/stream",
        }

        def held(template: str, waits: bool):
            path = re.sub(r"{(\w+)}", lambda m: ids[m[1]], template)
            return client.get(
                path + ("?wait=1" if waits else ""),
                headers=bearer(token),
                environ_base={"REMOTE_ADDR": address},
                buffered=False,
            )

        services = app.extensions["ddz"]
        # The address's one place taken, then the process's: each route is refused.
        for take, status, code in (
            (
                lambda: services.open_streams.open(None, None, [Bound("address", address, 1)]),
                429,
                "open_stream_limit",
            ),
            (services.fanout.admit, 503, "too_many_streams"),
        ):
            taken = take()
            try:
                for template, waits in routes:
                    with held(template, waits) as r:
                        assert r.status_code == status, f"{template} held without admission"
                        assert r.json["code"] == code, r.json
            finally:
                taken.close()
    finally:
        app.extensions["ddz"].close()
