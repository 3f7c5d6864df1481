"""Schemathesis against the app over real HTTP (``live_server``), from the committed
``openapi.yaml``: generated requests, valid and invalid, for every operation; no 5xx, and
every answer as the document says (documented status, media type, headers, body schema),
together with schemathesis' other checks (invalid data refused, authentication enforced,
405 with ``Allow`` for undocumented methods, ...). Valid data may be refused by the rules
of the game (422 with the rule's code), never by request validation: see
``valid_requests_pass_validation``.

The requests carry a real player's token (one seated at the matches below), or the
operator token on the operator's routes; path parameters name real matches (open, under
way, ended) or the caller's own player id often enough that the success paths are
exercised, and random ones otherwise.

The Server-Sent Events route is not fuzzed: a 200 is a stream that stays open for
``stream_seconds`` (3 s in the tests), so each example would cost seconds. Its answers are
checked against the document separately, by the last test.
"""

from __future__ import annotations

import uuid
import zlib
from pathlib import Path

import pytest
import requests
import schemathesis
from contract import Contract, committed_document, play_the_hand
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance
from servers import OPERATOR_TOKEN, beating_worker

# Slow: generates requests to every operation (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

SPEC_PATH = Path(__file__).resolve().parent.parent / "openapi.yaml"
STREAM = "/v1/matches/{match_id}/stream"
#: Long-polls are cut to this many seconds (the document allows 30).
MAX_WAIT = 0.2

#: Stands for the player's token, which exists only once the server does (some cases are
#: generated when the tests are collected); ``_aim`` puts the real one in its place.
PLAYER_TOKEN = "<player-token>"

schema = schemathesis.openapi.from_path(SPEC_PATH)


class World:
    """What the generated requests can point at: filled once by the ``world`` fixture."""

    base_url: str
    player_id: str
    token: str
    matches: list[str]


WORLD = World()


def _post(
    base_url: str, path: str, body: dict, token: str | None = None, status: int = 201
) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = requests.post(base_url + path, json=body, headers=headers, timeout=30)
    assert response.status_code == status, response.text
    return response.json()


@pytest.fixture(scope="module", autouse=True)
def live_worker_for_the_module(redis_url):
    """/readyz answers 200 only while a worker lives."""
    with beating_worker(redis_url):
        yield


@pytest.fixture(scope="module")
def world(live_server) -> World:
    """A player (whose token the generated requests carry) seated at four matches: one
    open, one with a bot seat, one dealt and under way, and one played to its end."""
    player = _post(live_server, "/v1/players", {"name": "schemathesis"})
    token = player["token"]
    others = [_post(live_server, "/v1/players", {"name": f"other {i}"})["token"] for i in range(3)]
    open_match = _post(live_server, "/v1/matches", {}, token)["match_id"]
    _post(live_server, f"/v1/matches/{open_match}/seats", {"seat": 0}, token)
    with_bot = _post(live_server, "/v1/matches", {"cap": "20.00"}, token)["match_id"]
    _post(live_server, f"/v1/matches/{with_bot}/seats", {}, token)
    _post(live_server, f"/v1/matches/{with_bot}/seats", {"seat": 1, "bot": True}, token)
    dealt, ended = (
        _post(live_server, "/v1/matches", {"ruleset": ruleset}, token)["match_id"]
        for ruleset in ("shanghai-local", "shanghai-platform")
    )
    for match_id in (dealt, ended):
        for seat, who in enumerate([token, *others]):
            _post(live_server, f"/v1/matches/{match_id}/seats", {"seat": seat}, who)
    # Unchecked: the answers are for schemathesis to judge (and test_openapi's).
    play_the_hand(
        Contract(committed_document(), live_server, checking=False), ended, [token, *others]
    )
    WORLD.base_url, WORLD.player_id, WORLD.token = live_server, player["player_id"], token
    WORLD.matches = [open_match, with_bot, dealt, ended]
    return WORLD


def _is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def _pick(case, choices: list[str]) -> str | None:
    """One of ``choices`` or ``None`` (keep the generated value), stably for the case."""
    seed = zlib.crc32(
        repr(
            (case.method, case.path, case.path_parameters, case.query, case.body, case.headers)
        ).encode()
    )
    return ([*choices, None])[seed % (len(choices) + 1)]


def _aim(case) -> None:
    """Points a generated request at real resources (only where the generated value was a
    valid one anyway, so that invalid requests stay invalid), gives it the player's real
    token, and cuts long-polls short."""
    parameters = case.path_parameters or {}
    if _is_uuid(parameters.get("match_id")):
        chosen = _pick(case, WORLD.matches)
        if chosen:
            parameters["match_id"] = chosen
    if _is_uuid(parameters.get("player_id")):
        chosen = _pick(case, [WORLD.player_id])
        if chosen:
            parameters["player_id"] = chosen
    authorization = (case.headers or {}).get("Authorization")
    if isinstance(authorization, str) and PLAYER_TOKEN in authorization:
        case.headers["Authorization"] = authorization.replace(PLAYER_TOKEN, WORLD.token)
    wait = (case.query or {}).get("wait")
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and 0 <= wait <= 30:
        case.query["wait"] = min(wait, MAX_WAIT)


@schema.auth(refresh_interval=None)
class BearerToken:
    """A real token for each generated request that is to carry one: the operator's on the
    operator's routes, the player's elsewhere (schemathesis leaves it out where it tests a
    missing one, and checks that the API refuses requests without it or with a wrong
    one)."""

    def get(self, case, ctx):
        return OPERATOR_TOKEN if case.path.startswith("/v1/admin/") else PLAYER_TOKEN

    def set(self, case, data, ctx):
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"


def valid_requests_pass_validation(ctx, response, case):
    """schemathesis' ``positive_data_acceptance``, as this API has it: a request that the
    document says is valid may still be refused by the rules of the game (422 with the
    rule's code: ``wrong_phase``, ``seat_taken``, ...), but never by the request's own
    validation (400, or 422 ``invalid_request``)."""
    meta = case.meta
    if (
        meta is None
        or not meta.generation.mode.is_positive
        or response.status_code not in (400, 422)
    ):
        return None
    if not _matches_the_document(case):
        return None
    problem = response.json()
    assert response.status_code == 422 and problem.get("code") != "invalid_request", (
        f"a request valid by the document was refused: {response.status_code} {problem}"
    )
    return None


DOCUMENT = committed_document()
CHECKER = Contract(DOCUMENT, "", checking=False)


def _matches_the_document(case) -> bool:
    """Whether the request really is valid by the document. The generator's label is not
    always right: its coverage phase can put a NUL into a string whose pattern forbids it,
    and the server is right to refuse that."""
    operation = DOCUMENT["paths"][case.path][case.method.lower()]
    checks = []
    body_schema = (
        operation.get("requestBody", {})
        .get("content", {})
        .get("application/json", {})
        .get("schema")
    )
    if body_schema is not None and isinstance(case.body, (dict, list, str, int, float, bool)):
        checks.append((case.body, body_schema))
    for parameter in operation.get("parameters", []):
        if parameter.get("in") == "header" and case.headers and parameter["name"] in case.headers:
            checks.append((case.headers[parameter["name"]], parameter["schema"]))
    try:
        for instance, schema_ in checks:
            CHECKER.validate(instance, schema_, "request")
    except AssertionError:
        return False
    return True


@schema.exclude(path=STREAM).parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_as_its_document_says(case, world):
    _aim(case)
    case.call_and_validate(
        base_url=world.base_url,
        excluded_checks=[positive_data_acceptance],
        additional_checks=[valid_requests_pass_validation],
        timeout=30,
    )


def test_the_event_stream_answers_as_its_document_says(world):
    """The stream route, by hand: a refused request (no token, no such match, a bad
    Last-Event-ID) and a whole stream (the server ends it after ``stream_seconds``)."""
    operation = schema[STREAM]["GET"]
    match_id = world.matches[2]
    player = {"Authorization": f"Bearer {world.token}"}
    cases = [
        ({"match_id": match_id}, {}, 401),
        ({"match_id": str(uuid.uuid4())}, player, 404),
        ({"match_id": match_id}, {**player, "Last-Event-ID": "x"}, 400),
        ({"match_id": match_id}, player, 200),
        (
            {"match_id": match_id},
            {"Authorization": f"Bearer {OPERATOR_TOKEN}", "Last-Event-ID": "1"},
            200,
        ),
    ]
    streams = []
    for path_parameters, headers, status in cases:
        case = operation.Case(path_parameters=path_parameters, headers=headers)
        response = case.call(base_url=world.base_url, timeout=30)
        assert response.status_code == status, response.text
        case.validate_response(response)
        if status == 200:
            streams.append(response.text)
    fresh, resumed = streams
    assert fresh.startswith("retry: ") and "event: snapshot" in fresh
    assert "event: snapshot" not in resumed and "id: 2\nevent: seat_taken" in resumed
