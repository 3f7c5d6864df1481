"""The OpenAPI contract (``openapi.yaml``): a valid OpenAPI 3.1 document, exactly the one
the app generates, covering exactly the routes the app serves, with every error a problem
document and every authenticated operation declaring its security; and the real
responses of a scripted match (players, a match, seats, a whole hand of commands, a
refused one, events, the record, the operator's routes) as the document describes them.

After changing a schema or a decorator, regenerate the contract:

    .venv/bin/python -m service.cli openapi > openapi.yaml
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from contract import Contract, committed_document, play_the_hand, resolve
from openapi_spec_validator import OpenAPIV31SpecValidator, validate
from servers import OPERATOR_TOKEN

from service.api import openapi_document

SPEC_PATH = Path(__file__).resolve().parent.parent / "openapi.yaml"
REGENERATE = "regenerate it: .venv/bin/python -m service.cli openapi > openapi.yaml"
PROBLEM_JSON = "application/problem+json"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@pytest.fixture(scope="module")
def spec() -> dict:
    return committed_document()


def operations(spec: dict):
    """(path, method, operation) of every operation of the document."""
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def refs(node: Any):
    """Every ``$ref`` in ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


# The document itself


def test_the_committed_document_is_valid_openapi_3_1(spec):
    assert spec["openapi"] == "3.1.0"
    validate(spec, cls=OpenAPIV31SpecValidator)


def test_the_committed_document_is_the_generated_one():
    generated = yaml.safe_dump(openapi_document(), sort_keys=False, allow_unicode=True)
    committed = SPEC_PATH.read_text(encoding="utf-8")
    assert committed == generated, f"openapi.yaml is not what the app generates; {REGENERATE}"


def test_every_reference_resolves_and_every_component_is_used(spec):
    used = set(refs({k: v for k, v in spec.items() if k != "components"}))
    # Components referred to by other components count once something reaches them.
    frontier = list(used)
    while frontier:
        target = resolve(spec, {"$ref": frontier.pop()})
        for ref in refs(target):
            if ref not in used:
                used.add(ref)
                frontier.append(ref)
    for ref in used:
        resolve(spec, {"$ref": ref})  # raises KeyError when it points at nothing
    declared = {
        f"#/components/{kind}/{name}"
        for kind, items in spec["components"].items()
        if kind != "securitySchemes"
        for name in items
    }
    assert declared - used == set(), "components that nothing refers to"


#: The blueprints of HTML pages, which are not the JSON API: the console's
#: (docs/operations.md), the page of problem codes, the public replays' page, and the front
#: door's (the API reference, the contract itself, the web table).
PAGES = ("console.", "problem_docs.", "replay_page.", "front.")


def rule_to_path(rule: str) -> str:
    """``/v1/matches/<uuid:match_id>`` → ``/v1/matches/{match_id}``."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def test_the_document_has_exactly_the_routes_the_app_serves(app, spec):
    served = {
        (rule_to_path(rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if not rule.endpoint.startswith(PAGES)
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }
    documented = {(path, method) for path, method, _ in operations(spec)}
    assert served - documented == set(), "routes the document does not describe"
    assert documented - served == set(), "operations the app does not serve"


def test_path_parameters_are_documented_as_their_converters_accept_them(app, spec):
    converters = {"uuid": {"type": "string", "format": "uuid"}}
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith(PAGES):
            continue
        item = spec["paths"][rule_to_path(rule.rule)]
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            parameters = [
                resolve(spec, p)
                for p in item.get("parameters", []) + item[method.lower()].get("parameters", [])
            ]
            in_path = {p["name"]: p for p in parameters if p["in"] == "path"}
            assert set(in_path) == set(rule.arguments), rule.rule
            for converter, name in re.findall(r"<(?:([^:<>]+):)?([^<>]+)>", rule.rule):
                assert in_path[name]["required"] is True
                assert in_path[name]["schema"] == converters[converter], (rule.rule, name)


def test_every_error_response_is_a_problem_and_nothing_hides_behind_default(spec):
    problem = {"$ref": "#/components/schemas/Problem"}
    for path, method, operation in operations(spec):
        responses = operation["responses"]
        assert "default" not in responses, f"{method} {path}: list the statuses it answers instead"
        assert "500" in responses, f"{method} {path}: an unexpected failure answers 500"
        # One success; a 204 (no body) may stand beside it (the stream of a settled match),
        # or alone (a revocation).
        successes = [s for s in responses if s.startswith("2")]
        assert len(successes) == 1 or (len(successes) == 2 and "204" in successes), (
            f"{method} {path}: {successes}"
        )
        assert "content" not in responses.get("204", {}), f"{method} {path}: a 204 has no body"
        for status, response in responses.items():
            response = resolve(spec, response)
            if int(status) >= 400:
                assert response["content"] == {PROBLEM_JSON: {"schema": problem}}, (
                    f"{method} {path} {status}"
                )
            else:
                assert PROBLEM_JSON not in response.get("content", {})
        if "requestBody" in operation:
            for status in ("400", "413", "415", "422"):
                assert status in responses, (
                    f"{method} {path}: a body can be malformed, too large, not JSON or invalid"
                )
        if any(p.get("in") in ("query", "header") for p in operation.get("parameters", [])):
            assert {"400", "422"} & set(responses), (
                f"{method} {path}: its parameters can be invalid"
            )
        if "{" in path:
            assert "404" in responses, (
                f"{method} {path}: what it names may not exist (or not be a UUID)"
            )
        if operation.get("security"):
            assert "401" in responses, f"{method} {path}"
            assert "WWW-Authenticate" in resolve(spec, responses["401"])["headers"]


def test_request_bodies_and_response_objects_refuse_unknown_members(spec):
    """The request schemas refuse unknown fields (422), and the responses are dumped through
    their schemas: neither has members the document does not name."""

    def closed(schema, where):
        schema = resolve(spec, schema)
        for branch in (*schema.get("anyOf", []), *schema.get("oneOf", [])):
            closed(branch, where)
        if (
            "object"
            in (
                schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
            )
            and "properties" in schema
        ):
            assert schema.get("additionalProperties") is False, where
            for name, sub in schema["properties"].items():
                closed(sub, f"{where}.{name}")
        if isinstance(schema.get("items"), dict):
            closed(schema["items"], f"{where}[]")

    for path, method, operation in operations(spec):
        if "requestBody" in operation:
            closed(
                operation["requestBody"]["content"]["application/json"]["schema"],
                f"{method} {path} body",
            )
        for status, response in operation["responses"].items():
            for media, content in resolve(spec, response).get("content", {}).items():
                if media.endswith("json"):
                    closed(content["schema"], f"{method} {path} {status}")


def minimal(spec: dict, schema: dict) -> Any:
    """The smallest instance of ``schema`` (required members only, first enum values)."""
    schema = resolve(spec, schema)
    if "oneOf" in schema:
        return minimal(spec, schema["oneOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {
            name: minimal(spec, schema["properties"][name]) for name in schema.get("required", [])
        }
    return {
        "string": "x",
        "integer": schema.get("minimum", 0),
        "number": 0,
        "boolean": False,
        "array": [],
    }[kind]


def test_operations_that_need_a_token_declare_it(app, spec):
    """Each operation called without a token, or with one that is not, with a valid
    request otherwise: those that answer 401 (with the challenge) are exactly those that
    declare the bearer security requirement."""
    assert spec["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    client = app.test_client()
    for path, method, operation in operations(spec):
        url = re.sub(r"{[^}]+}", str(uuid.uuid4()), path)
        kwargs = {}
        if "requestBody" in operation:
            kwargs["json"] = minimal(
                spec, operation["requestBody"]["content"]["application/json"]["schema"]
            )
        for headers in (
            {},
            {"Authorization": "Bearer not-a-token"},
            {"Authorization": "Basic eDp5"},
        ):
            response = client.open(url, method=method.upper(), headers=headers, **kwargs)
            if operation.get("security") == [{}, {"bearer": []}]:
                # A token that only some requests need (a bot account's owner's): not this one.
                assert response.status_code != 401, (method, path, headers)
            elif operation.get("security"):
                assert operation["security"] == [{"bearer": []}]
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["WWW-Authenticate"] == 'Bearer realm="ddz"'
            else:
                assert response.status_code != 401, (method, path, headers)


# Real responses against the document


def tables_lobby_and_me(contract: Contract, tokens: list[str]) -> None:
    """Tables, the lobby and the caller's own pages and stream, as the document says."""
    call = contract.call
    table = call("POST", "/v1/tables", token=tokens[0], json={"private": True}, expect=201).json()
    at = {"table_id": table["table_id"]}
    # Without its code a private table is none (404), seen or joined.
    call("POST", "/v1/tables/{table_id}/seats", token=tokens[1], path_params=at, expect=404)
    call("GET", "/v1/tables/{table_id}", token=tokens[2], path_params=at, expect=404)
    call(
        "POST",
        "/v1/tables/{table_id}/seats",
        token=tokens[1],
        path_params=at,
        json={"invite": table["invite"]},
        expect=201,
    )
    call("GET", "/v1/tables/{table_id}", token=tokens[1], path_params=at, expect=200)
    call("POST", "/v1/tables/{table_id}/leave", token=tokens[1], path_params=at, expect=200)
    call("POST", "/v1/tables/{table_id}/leave", token=tokens[1], path_params=at, expect=403)
    ticket = call(
        "POST", "/v1/lobby/tickets", token=tokens[2], json={"allow_bots": False}, expect=201
    ).json()
    mine = {"ticket_id": ticket["ticket_id"]}
    call("POST", "/v1/lobby/tickets", token=tokens[2], json={}, expect=409)
    call("GET", "/v1/lobby/tickets/{ticket_id}", token=tokens[2], path_params=mine, expect=200)
    call("GET", "/v1/lobby/tickets/{ticket_id}", token=tokens[3], path_params=mine, expect=404)
    call("DELETE", "/v1/lobby/tickets/{ticket_id}", token=tokens[2], path_params=mine, expect=200)
    call("GET", "/v1/me", token=tokens[0], expect=200)
    page = call("GET", "/v1/me/matches", token=tokens[0], params={"limit": 1}, expect=200).json()
    assert len(page["matches"]) == 1
    call("GET", "/v1/me/matches", token=tokens[0], params={"cursor": "bm90LWl0"}, expect=422)
    call("GET", "/v1/me/tables", token=tokens[0], expect=200)
    items = call("GET", "/v1/me/events", token=tokens[0], expect=200).json()["items"]
    # The match above, from its first item: a match of no table, so no table nor hand number.
    assert items[0]["type"] == "hand_started"
    assert (items[0]["table_id"], items[0]["hand_number"]) == (None, None)
    call("GET", "/v1/me/events", token=tokens[0], params={"after": "x"}, expect=422)
    call("GET", "/v1/me/stream", token=tokens[0], headers={"Last-Event-ID": "x"}, expect=400)
    with contract.http.get(
        contract.base_url + "/v1/me/stream",
        headers={"Authorization": f"Bearer {tokens[0]}", "Last-Event-ID": items[0]["id"]},
        stream=True,
        timeout=30,
    ) as response:
        contract.check(response, "/v1/me/stream", "GET")
        assert response.status_code == 200
        for line in response.iter_lines(decode_unicode=True):
            if line.startswith("data:"):
                break


def ratings_and_watching(contract: Contract, tokens: list[str], ended: dict[str, str]) -> None:
    """The leaderboards, profiles and the caller's ratings; a public table watched; a
    finished hand's replay: as the document says, the public ones without a token."""
    call = contract.call
    call("GET", "/v1/leaderboards", params={"kind": "bots", "limit": 5}, expect=200)
    call("GET", "/v1/leaderboards", params={"cursor": "bm90LWl0"}, expect=422)
    watched = new_player(contract, "watched")
    who = {"player_id": watched["player_id"]}
    assert (
        call("GET", "/v1/players/{player_id}", path_params=who, expect=200).json()["ratings"] == []
    )
    call("GET", "/v1/players/{player_id}", path_params={"player_id": str(uuid.uuid4())}, expect=404)
    call("GET", "/v1/me/ratings", token=tokens[0], params={"limit": 1}, expect=200)
    call("GET", "/v1/me/ratings", expect=401)
    replay = call("GET", "/v1/matches/{match_id}/replay", path_params=ended, expect=200).json()
    assert replay["seed"] and replay["deal"]
    missing = {"match_id": str(uuid.uuid4())}
    call("GET", "/v1/matches/{match_id}/replay", path_params=missing, expect=404)
    table = call("POST", "/v1/tables", token=watched["token"], json={}, expect=201).json()
    at = {"table_id": table["table_id"]}
    # A long poll: the item may follow the table's creation by a moment (the page serves
    # only what no running transaction can come before).
    page = call(
        "GET", "/v1/tables/{table_id}/watch", path_params=at, params={"wait": 5}, expect=200
    ).json()
    assert page["items"][0]["type"] == "table_created"
    call("GET", "/v1/tables/{table_id}/watch", path_params=at, params={"after": "x"}, expect=422)
    call(
        "GET",
        "/v1/tables/{table_id}/watch",
        path_params={"table_id": str(uuid.uuid4())},
        expect=404,
    )
    with contract.http.get(
        contract.base_url + f"/v1/tables/{table['table_id']}/watch/stream", stream=True, timeout=30
    ) as response:
        contract.check(response, "/v1/tables/{table_id}/watch/stream", "GET")
        assert response.status_code == 200
        for line in response.iter_lines(decode_unicode=True):
            if line.startswith("data:"):
                break


@pytest.fixture(scope="module")
def contract(spec, live_server):
    return Contract(spec, live_server)


def new_player(contract: Contract, name: str) -> dict:
    return contract.call("POST", "/v1/players", json={"name": name}, expect=201).json()


@pytest.mark.slow  # plays a whole match, each answer checked against the document
def test_a_scripted_match_answers_as_the_document_says(contract, spec, live_worker):
    call = contract.call
    # Health: ready while a worker lives; without one, a problem that says so
    call("GET", "/healthz", expect=200)
    call("GET", "/readyz", expect=200)
    live_worker.stop()
    assert call("GET", "/readyz", expect=503).json()["checks"]["worker"] != "ok"
    live_worker.start()
    assert "ddz_http_request_duration_seconds" in call("GET", "/metrics", expect=200).text

    # Players
    players = [new_player(contract, f"player {i}") for i in range(5)]
    tokens = [p["token"] for p in players]
    call("POST", "/v1/players", json={}, expect=201)
    call("POST", "/v1/players", json={"name": ""}, expect=422)
    call("POST", "/v1/players", json={"name": "x", "extra": 1}, expect=422)
    call("POST", "/v1/players", json={"name": "nul\x00"}, expect=422)
    call(
        "POST",
        "/v1/players",
        data="{not json",
        headers={"Content-Type": "application/json"},
        expect=400,
    )
    call(
        "POST",
        "/v1/players",
        data='{"name": "' + "x" * 20000 + '"}',
        headers={"Content-Type": "application/json"},
        expect=413,
    )

    # Tokens: another one, listed, revoked
    spare = call(
        "POST",
        "/v1/me/tokens",
        token=tokens[4],
        json={"label": "phone", "expires_in": 3600},
        expect=201,
    ).json()
    call("POST", "/v1/me/tokens", token=tokens[4], json={"expires_in": 0}, expect=422)
    call("POST", "/v1/me/tokens", token=OPERATOR_TOKEN, json={}, expect=403)
    call("POST", "/v1/me/tokens", json={}, expect=401)
    listed = call("GET", "/v1/me/tokens", token=spare["token"], expect=200).json()
    assert [t["current"] for t in listed["tokens"]] == [False, True]
    call(
        "DELETE",
        "/v1/me/tokens/{token_id}",
        token=tokens[0],
        path_params={"token_id": spare["token_id"]},
        expect=404,
    )
    call(
        "DELETE",
        "/v1/me/tokens/{token_id}",
        token=tokens[4],
        path_params={"token_id": spare["token_id"]},
        expect=204,
    )
    call("GET", "/v1/me/tokens", token=spare["token"], expect=401)

    # A match, listed
    match = call(
        "POST",
        "/v1/matches",
        token=tokens[0],
        json={"ruleset": "shanghai-local", "cap": "50"},
        expect=201,
    ).json()
    assert match["status"] == "open" and match["seats"] == [None] * 4
    at = {"match_id": match["match_id"]}
    call("POST", "/v1/matches", json={}, expect=401)
    # An operator makes matches (of system bots); an Idempotency-Key is a player's.
    call("POST", "/v1/matches", token=OPERATOR_TOKEN, json={}, expect=201)
    call(
        "POST",
        "/v1/matches",
        token=OPERATOR_TOKEN,
        json={},
        headers={"Idempotency-Key": "operator"},
        expect=403,
    )
    call("POST", "/v1/matches", token=tokens[0], json={"unit": "1.234"}, expect=422)
    listed = call(
        "GET", "/v1/matches", token=tokens[1], params={"status": "open", "limit": 5}, expect=200
    ).json()
    assert match["match_id"] in [m["match_id"] for m in listed["matches"]]
    call("GET", "/v1/matches", token=OPERATOR_TOKEN, expect=200)
    call("GET", "/v1/matches", token=tokens[1], params={"limit": 0}, expect=422)
    call("GET", "/v1/matches", expect=401)

    # Seats: four players, then one too many
    missing = {"match_id": str(uuid.uuid4())}
    call(
        "POST",
        "/v1/matches/{match_id}/seats",
        token=tokens[0],
        path_params=missing,
        json={},
        expect=404,
    )
    call(
        "POST",
        "/v1/matches/{match_id}/seats",
        token=tokens[0],
        path_params=at,
        json={"seat": 4},
        expect=422,
    )
    call(
        "POST",
        "/v1/matches/{match_id}/seats",
        token=OPERATOR_TOKEN,
        path_params=at,
        json={},
        expect=403,
    )
    for seat in range(4):
        view = call(
            "POST",
            "/v1/matches/{match_id}/seats",
            token=tokens[seat],
            path_params=at,
            json={"seat": seat},
            expect=201,
        ).json()
        assert view["seat"] == seat
    assert view["phase"] != "seating" and view["commitment"]
    call(
        "POST", "/v1/matches/{match_id}/seats", token=tokens[4], path_params=at, json={}, expect=422
    )

    # Views, legal plays, events
    call("GET", "/v1/matches/{match_id}", token=tokens[4], path_params=at, expect=200)
    call("GET", "/v1/matches/{match_id}", token=OPERATOR_TOKEN, path_params=at, expect=200)
    call("GET", "/v1/matches/{match_id}", token=tokens[0], path_params=missing, expect=404)
    call("GET", "/v1/matches/{match_id}/legal", token=tokens[0], path_params=at, expect=200)
    call("GET", "/v1/matches/{match_id}/legal", token=tokens[4], path_params=at, expect=403)
    call("GET", "/v1/matches/{match_id}/legal", token=tokens[0], path_params=missing, expect=404)
    call("GET", "/v1/matches/{match_id}/events", token=tokens[0], path_params=at, expect=200)
    call(
        "GET",
        "/v1/matches/{match_id}/events",
        token=tokens[4],
        path_params=at,
        params={"after": 2},
        expect=200,
    )
    call(
        "GET",
        "/v1/matches/{match_id}/events",
        token=OPERATOR_TOKEN,
        path_params=at,
        params={"wait": 0.1},
        expect=200,
    )
    call(
        "GET",
        "/v1/matches/{match_id}/events",
        token=tokens[0],
        path_params=at,
        params={"wait": 31},
        expect=422,
    )
    call("GET", "/v1/matches/{match_id}/events", token=tokens[0], path_params=missing, expect=404)

    # Commands that fail: not the caller's turn, a stale version, no seat, no such match,
    # not a command; then an idempotent one, retried
    view = call("GET", "/v1/matches/{match_id}", token=tokens[0], path_params=at, expect=200).json()
    assert view["phase"] == "bidding", view
    turn = view["turn"]
    other = tokens[(turn + 1) % 4]
    commands = "/v1/matches/{match_id}/commands"
    refused = call(
        "POST",
        commands,
        token=other,
        path_params=at,
        json={"action": "bid", "value": 1},
        expect=422,
    ).json()
    assert refused["code"] and refused["status"] == 422
    call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        json={"action": "bid", "value": 1, "expected_version": 1},
        expect=409,
    )
    call(
        "POST",
        commands,
        token=tokens[4],
        path_params=at,
        json={"action": "bid", "value": 1},
        expect=403,
    )
    call(
        "POST",
        commands,
        token=OPERATOR_TOKEN,
        path_params=at,
        json={"action": "bid", "value": 1},
        expect=403,
    )
    call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=missing,
        json={"action": "bid", "value": 1},
        expect=404,
    )
    call("POST", commands, token=tokens[turn], path_params=at, json={"action": "shout"}, expect=422)
    call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        json={"action": "bid", "value": 1},
        headers={"Idempotency-Key": ""},
        expect=422,
    )
    call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        json={"action": "bid", "value": 1},
        headers={"Idempotency-Key": "a\x00b"},
        expect=422,
    )
    call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        json={"action": "bid", "value": True},
        expect=422,
    )
    call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        json={"action": "bid", "value": 1, "expected_version": "2"},
        expect=422,
    )
    call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        data="[",
        headers={"Content-Type": "application/json"},
        expect=400,
    )
    call("POST", commands, path_params=at, json={"action": "pass"}, expect=401)
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        json={"action": "bid", "value": 3},
        headers=key,
        expect=200,
    ).json()
    again = call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        json={"action": "bid", "value": 3},
        headers=key,
        expect=200,
    ).json()
    assert again == first and first["events"]
    call(
        "POST",
        commands,
        token=tokens[turn],
        path_params=at,
        json={"action": "bid", "value": 2},
        headers=key,
        expect=422,
    )

    # A player leaves (the system would play the seat; here the player comes back)
    leave = "/v1/matches/{match_id}/leave"
    left = call("POST", leave, token=tokens[3], path_params=at, expect=200).json()
    assert left["view"]["seats"][3]["disconnected"] is True
    call("POST", leave, token=tokens[4], path_params=at, expect=403)
    call("POST", leave, token=tokens[3], path_params=missing, expect=404)
    call("POST", leave, path_params=at, expect=401)

    # The record: the operator's at any time, the players' once the hand has ended
    call("GET", "/v1/matches/{match_id}/record", token=tokens[0], path_params=at, expect=403)
    during = call(
        "GET", "/v1/matches/{match_id}/record", token=OPERATOR_TOKEN, path_params=at, expect=200
    ).json()
    assert during["result"] is None

    last = play_the_hand(contract, match["match_id"], tokens[:4])
    assert last["result"] is not None and last["seed"]
    record = call(
        "GET", "/v1/matches/{match_id}/record", token=tokens[2], path_params=at, expect=200
    ).json()
    assert record["result"] == last["result"]
    call("GET", "/v1/matches/{match_id}/record", token=tokens[4], path_params=at, expect=403)
    call("GET", "/v1/matches/{match_id}/record", token=tokens[0], path_params=missing, expect=404)
    events = call(
        "GET", "/v1/matches/{match_id}/events", token=tokens[1], path_params=at, expect=200
    ).json()
    assert events["events"][-1]["version"] == events["version"]
    listed = call(
        "GET", "/v1/matches", token=tokens[1], params={"status": "ended"}, expect=200
    ).json()
    assert match["match_id"] in [m["match_id"] for m in listed["matches"]]
    call("POST", commands, token=tokens[0], path_params=at, json={"action": "pass"}, expect=422)
    call("POST", leave, token=tokens[0], path_params=at, expect=422)

    # Settlements and the ledger. The worker (not run here) settles an ended hand; until
    # then its settlement is 404.
    settlement = "/v1/matches/{match_id}/settlement"
    assert call("GET", settlement, token=tokens[0], path_params=at).status_code in (200, 404)
    call("GET", settlement, token=tokens[4], path_params=at, expect=403)
    call("GET", settlement, token=tokens[0], path_params=missing, expect=404)
    ledger = "/v1/players/{player_id}/ledger"
    own = {"player_id": players[0]["player_id"]}
    call("GET", ledger, token=tokens[0], path_params=own, expect=200)
    call("GET", ledger, token=OPERATOR_TOKEN, path_params=own, expect=200)
    call("GET", ledger, token=tokens[1], path_params=own, expect=403)
    call("GET", ledger, path_params=own, expect=401)
    call("GET", "/v1/admin/ledger/check", token=OPERATOR_TOKEN, expect=200)
    call("GET", "/v1/admin/ledger/check", token=tokens[0], expect=403)
    # The full check in the background: started once (no worker runs it here), then refused.
    call("POST", "/v1/admin/ledger/check", token=tokens[0], expect=403)
    call("POST", "/v1/admin/ledger/check", expect=401)
    started = call("POST", "/v1/admin/ledger/check", token=OPERATOR_TOKEN, expect=202).json()
    call("POST", "/v1/admin/ledger/check", token=OPERATOR_TOKEN, expect=409)
    check = call("GET", "/v1/admin/ledger/check", token=OPERATOR_TOKEN, expect=200).json()
    assert check["full_check"] == started

    # The operator's routes
    for route in ("/v1/admin/matches/{match_id}/events", "/v1/admin/matches/{match_id}/audit"):
        call("GET", route, token=OPERATOR_TOKEN, path_params=at, expect=200)
        call("GET", route, token=tokens[0], path_params=at, expect=403)
        call("GET", route, token=OPERATOR_TOKEN, path_params=missing, expect=404)
        call("GET", route, path_params=at, expect=401)
    audit = call(
        "GET",
        "/v1/admin/matches/{match_id}/audit",
        token=OPERATOR_TOKEN,
        path_params=at,
        expect=200,
    ).json()
    assert audit["ok"] is True, audit

    # The players, bot accounts among them (an author's program, marked on its seats),
    # each registered with its owner's token, a person's.
    bot = {"name": "engine", "bot_account": True}
    call("POST", "/v1/players", json=bot, expect=401)
    author = call("POST", "/v1/players", token=tokens[0], json=bot, expect=201).json()
    assert author["bot_account"] is True and author["owner_id"] is not None
    call("POST", "/v1/players", token=author["token"], json=bot, expect=403)
    call("POST", "/v1/players", json={"bot_account": "yes"}, expect=422)
    accounts = call(
        "GET", "/v1/admin/players", token=OPERATOR_TOKEN, params={"bot_account": "true"}, expect=200
    ).json()["players"]
    assert author["player_id"] in [p["player_id"] for p in accounts]
    assert all(p["bot_account"] for p in accounts)
    call("GET", "/v1/admin/players", token=OPERATOR_TOKEN, params={"limit": 0}, expect=422)
    call("GET", "/v1/admin/players", token=tokens[0], expect=403)
    call("GET", "/v1/admin/players", expect=401)

    # A match with a bot seat
    other_match = call("POST", "/v1/matches", token=tokens[4], json={}, expect=201).json()
    # Seating a bot takes a seat at the match (or an operator's token).
    call(
        "POST",
        "/v1/matches/{match_id}/seats",
        token=tokens[3],
        path_params={"match_id": other_match["match_id"]},
        json={"seat": 2, "bot": True},
        expect=403,
    )
    call(
        "POST",
        "/v1/matches/{match_id}/seats",
        token=tokens[4],
        path_params={"match_id": other_match["match_id"]},
        json={"seat": 0},
        expect=201,
    )
    bot = call(
        "POST",
        "/v1/matches/{match_id}/seats",
        token=tokens[4],
        path_params={"match_id": other_match["match_id"]},
        json={"seat": 2, "bot": True},
        expect=201,
    ).json()
    assert bot["seats"][2]["bot"] is True
    call(
        "POST",
        "/v1/matches/{match_id}/seats",
        token=tokens[4],
        path_params={"match_id": other_match["match_id"]},
        json={"seat": 2},
        expect=422,
    )

    # The stream: refused before it starts, or a snapshot first
    stream = "/v1/matches/{match_id}/stream"
    call("GET", stream, path_params=at, expect=401)
    call("GET", stream, token=tokens[0], path_params=missing, expect=404)
    call(
        "GET",
        stream,
        token=tokens[0],
        path_params=at,
        headers={"Last-Event-ID": "soon"},
        expect=400,
    )
    with contract.http.get(
        contract.base_url + stream.format(**at),
        headers={"Authorization": f"Bearer {tokens[0]}"},
        stream=True,
        timeout=30,
    ) as response:
        contract.check(response, stream, "GET")
        assert response.status_code == 200
        lines = []
        for line in response.iter_lines(decode_unicode=True):
            lines.append(line)
            if line.startswith("data:"):
                break
        assert "event: snapshot" in lines, lines

    # Methods the document does not list: 405 with the ones it does
    for path, method in (("/v1/players", "PUT"), ("/v1/matches/{match_id}", "DELETE")):
        response = contract.http.request(method, contract.base_url + path.format(**at), timeout=30)
        assert response.status_code == 405
        assert response.headers["Content-Type"] == PROBLEM_JSON
        allowed = {m.strip().lower() for m in response.headers["Allow"].split(",")}
        assert allowed - {"head", "options"} == set(spec["paths"][path]) & set(METHODS)

    # A path parameter that its converter refuses: no route, 404
    call(
        "GET",
        "/v1/matches/{match_id}",
        token=tokens[0],
        path_params={"match_id": "not-a-uuid"},
        expect=404,
    )

    tables_lobby_and_me(contract, tokens)
    ratings_and_watching(contract, tokens, at)

    # Every operation's success was seen and checked (but a settlement's, which needs the
    # worker)
    succeeded = {(path, method) for path, method, status in contract.seen if status < 300}
    unreachable = {("/v1/matches/{match_id}/settlement", "get")}
    assert succeeded | unreachable == {(path, method) for path, method, _ in operations(spec)}
