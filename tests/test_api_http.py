"""The HTTP edges: a body is read only when it is sent as JSON (415 otherwise, changing
nothing); every error the app answers, routing's included, is a problem document with a
stable code and a detail of ours; every answer carries the security headers; CORS only for
the configured origins."""

from __future__ import annotations

import ast
import re

import pytest
import requests
from api_support import (
    ClientApi,
    Reply,
    assert_problem,
    new_match,
    new_player,
    stream_fingerprint,
)
from servers import ROOT

from service.api import create_app
from service.config import Config

SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}
ORIGIN = "https://play.example"


def raw(client, method: str, path: str, token: str | None = None, **kwargs) -> Reply:
    headers = kwargs.pop("headers", {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = client.open(path, method=method, headers=headers, **kwargs)
    return Reply(response.status_code, response.headers, response.get_data())


def match_ids(api, owner) -> list[str]:
    return [m["match_id"] for m in owner.get("/v1/matches?limit=100").json["matches"]]


# --- bodies are JSON -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "application/x-www-form-urlencoded",
        "text/plain",
        "application/merge-patch+json",
        "application/json; charset=latin-1",
    ],
)
def test_a_body_not_sent_as_json_is_a_415_and_changes_nothing(client, content_type):
    """``curl -d`` sends a form: the stake it names must not be read as no body at all (a
    match at the default stake)."""
    api = ClientApi(client)
    owner = new_player(api, "form")
    before = match_ids(api, owner)
    headers = {} if content_type is None else {"Content-Type": content_type}
    reply = raw(
        client, "POST", "/v1/matches", owner.token, data=b'{"unit": "5.00"}', headers=headers
    )
    problem = assert_problem(reply, 415, "unsupported_media_type")
    assert "sent with Content-Type: application/json" in problem["detail"]
    assert f"(it came as {content_type or 'no type'})" in problem["detail"]
    assert match_ids(api, owner) == before

    match_id = new_match(owner)
    seated = stream_fingerprint(api, match_id)
    reply = raw(
        client,
        "POST",
        f"/v1/matches/{match_id}/seats",
        owner.token,
        data=b'{"seat": 2}',
        headers=headers,
    )
    assert_problem(reply, 415, "unsupported_media_type")
    reply = raw(
        client,
        "POST",
        f"/v1/matches/{match_id}/commands",
        owner.token,
        data=b'{"action": "pass"}',
        headers=headers,
    )
    assert_problem(reply, 415, "unsupported_media_type")
    assert stream_fingerprint(api, match_id) == seated
    assert_problem(raw(client, "POST", "/v1/players", data=b'{"name": "x"}', headers=headers), 415)


def test_every_operation_that_takes_a_body_refuses_one_not_sent_as_json(app, client):
    """Whichever blueprint serves it: a route whose body is read past the JSON check would
    take a form as no body at all."""
    spec = app.extensions["ddz_api"].spec.to_dict()
    owner = new_player(ClientApi(client), "forms")
    checked = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "requestBody" not in operation:
                continue
            concrete = re.sub(r"\{\w+_id\}", "00000000-0000-4000-8000-000000000000", path)
            reply = raw(
                client,
                method.upper(),
                concrete,
                owner.token,
                data=b'{"label": "x"}',
                headers={"Content-Type": "text/plain"},
            )
            assert_problem(reply, 415, "unsupported_media_type")
            checked.append(f"{method} {path}")
    assert "post /v1/me/tokens" in checked and len(checked) >= 5, checked
    assert [t["label"] for t in owner.get("/v1/me/tokens").json["tokens"]] == [None]


def test_json_with_its_charset_is_read(client):
    api = ClientApi(client)
    owner = new_player(api, "charset")
    reply = raw(
        client,
        "POST",
        "/v1/matches",
        owner.token,
        data=b'{"unit": "5.00"}',
        headers={"Content-Type": "application/json; charset=UTF-8"},
    )
    assert reply.status == 201, reply.text
    assert reply.json["options"]["unit"] == "5.00"
    assert reply.json["options"]["bot_level"] == "normal"


def test_no_body_still_takes_the_defaults(client):
    """``curl -X POST`` with no ``-d``: no body, whatever the Content-Type, where the body is optional."""
    api = ClientApi(client)
    owner = new_player(api, "nobody")
    for headers in (
        {},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Length": "0"},
    ):
        reply = raw(client, "POST", "/v1/matches", owner.token, headers=headers)
        assert reply.status == 201, reply.text
        match_id = reply.json["match_id"]
        reply = raw(client, "POST", f"/v1/matches/{match_id}/seats", owner.token, headers=headers)
        assert reply.status == 201, reply.text
    assert raw(client, "POST", "/v1/players").status == 201


@pytest.mark.parametrize(
    "body, where",
    [
        (b'{"name": "x",}', "line 1 column 14 (char 13)"),
        (b'{"name": "x"', "Expecting ',' delimiter: line 1 column 13"),
        (b'{"name": "\xff"}', "Bytes decoding error : invalid start byte"),
        (b"[" * 5000, "nested too deeply"),
    ],
)
def test_a_body_that_is_not_json_is_a_400_saying_where(client, body, where):
    """Not "does not match the schema": the body was never read as JSON."""
    for path in ("/v1/players", "/v1/matches"):
        reply = raw(client, "POST", path, data=body, headers={"Content-Type": "application/json"})
        problem = assert_problem(reply, 400, "invalid_json")
        assert problem["detail"].startswith("the body is not valid JSON: ") or (
            problem["detail"] == "the JSON body is nested too deeply"
        ), problem
        assert where in problem["detail"] and "errors" not in problem, problem


# --- errors are problems -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, detail",
    [
        ("/v1/matches/not-a-uuid", "the match id in the path is not a UUID"),
        ("/v1/players/1234/ledger", "the player id in the path is not a UUID"),
        ("/v1/admin/matches/x/audit", "the match id in the path is not a UUID"),
    ],
)
def test_a_malformed_id_is_a_404_saying_so(client, path, detail):
    api = ClientApi(client)
    player = new_player(api, "malformed")
    problem = assert_problem(raw(client, "GET", path, player.token), 404, "malformed_id")
    assert problem["detail"] == detail


def test_an_unknown_path_is_a_plain_404(client):
    for path in ("/nothing", "/v1/matches/00000000-0000-4000-8000-000000000000/nothing", "/v1/"):
        problem = assert_problem(raw(client, "GET", path), 404, "not_found")
        assert problem["detail"] == "nothing is served at this path"


def test_a_method_not_allowed_is_a_405_naming_the_methods(client):
    reply = raw(client, "DELETE", "/v1/players")
    problem = assert_problem(reply, 405, "method_not_allowed")
    assert "POST" in reply.headers["Allow"]
    assert problem["detail"] == "this path does not take DELETE; it takes OPTIONS, POST"


def test_a_body_over_the_limit_is_a_413_naming_it(client, live_server):
    api = ClientApi(client)
    owner = new_player(api, "large")
    body = b'{"name": "' + b"x" * 17000 + b'"}'
    problem = assert_problem(
        raw(client, "POST", "/v1/players", data=body, headers={"Content-Type": "application/json"}),
        413,
        "body_too_large",
    )
    assert problem["detail"] == "the request body is over 16384 bytes"
    chunked = requests.post(
        f"{live_server}/v1/matches",
        data=iter([body[:9000], body[9000:]]),
        timeout=30,
        headers={"Authorization": f"Bearer {owner.token}", "Content-Type": "application/json"},
    )
    problem = assert_problem(
        Reply(chunked.status_code, chunked.headers, chunked.content), 413, "body_too_large"
    )
    assert problem["detail"] == "the request body is over 16384 bytes"
    for name, value in SECURITY.items():
        assert chunked.headers.get(name) == value, name


# --- the page of problems ------------------------------------------------------------------


def test_a_problem_links_to_its_entry_on_the_service_s_page_of_problems(client, live_server):
    """``type`` is an address on the host the request was sent to, whose page (HTML, out of
    /v1) has an entry for the code at that anchor."""
    owner = new_player(ClientApi(client), "typed")
    base = "http://ddz.test:8123"
    problems = [
        assert_problem(raw(client, "GET", "/nothing", base_url=base), 404, "not_found"),
        assert_problem(raw(client, "GET", "/v1/me", base_url=base), 401, "unauthorized"),
        assert_problem(
            raw(
                client,
                "POST",
                "/v1/matches",
                owner.token,
                data=b"{",
                base_url=base,
                headers={"Content-Type": "application/json"},
            ),
            400,
            "invalid_json",
        ),
    ]
    # The body limit answers before Flask: from the WSGI environ.
    chunked = requests.post(
        f"{live_server}/v1/players",
        data=iter([b"x" * 9000, b"x" * 9000]),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    problems.append(
        assert_problem(Reply(chunked.status_code, chunked.headers, chunked.content), 413)
    )
    assert [p["type"] for p in problems] == [
        f"{base}/docs/problems#not_found",
        f"{base}/docs/problems#unauthorized",
        f"{base}/docs/problems#invalid_json",
        f"{live_server}/docs/problems#body_too_large",
    ]
    page = client.get("/docs/problems")
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    for problem in problems:
        assert f'<dt id="{problem["code"]}">' in text, problem["code"]


#: Codes of base classes that a refusal never keeps: each names its own.
UNSPOKEN = {"rules_error", "game_error", "store_error", "illegal_play"}
CODE = re.compile(r"[a-z]+(_[a-z]+)+")


def answered_codes() -> set[str]:
    """Every code the service's sources give a refusal: the error classes' ``code``, the
    codes written where a refusal is raised or a problem made, gunicorn's own and the
    HTTP statuses'."""
    from service.api.problems import _HTTP_CODES

    raisers = {"GameError", "ApiError", "StoreError", "RulesError", "IllegalPlay", "problem"}
    codes = set(_HTTP_CODES.values())
    root = ROOT / "service"
    sources = [*root.glob("api/*.py"), *root.glob("game/**/*.py"), *root.glob("rules/*.py")]
    sources += [*root.glob("store/*.py"), root / "gunicorn_worker.py"]
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] in (
                ["code"],
                ["problem_code"],
            ):
                values = [node.value]
            elif isinstance(node, ast.Call) and (
                getattr(node.func, "id", None) in raisers
                or getattr(node.func, "attr", None) == "__init__"
            ):
                values = node.args
            elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
                values = node.value.elts[:1]  # gunicorn_worker.problem_of: (code, detail)
            else:
                continue
            codes |= {
                v.value
                for v in values
                if isinstance(v, ast.Constant)
                and isinstance(v.value, str)
                and CODE.fullmatch(v.value)
            }
    return codes - UNSPOKEN


def test_the_page_of_problems_says_what_every_code_the_service_answers_means():
    from service.web.problem_docs import MEANINGS

    listed = [code for codes in MEANINGS.values() for code in codes]
    assert len(listed) == len(set(listed)), "a code listed twice"
    answered = answered_codes()
    assert len(answered) > 60  # the scan still finds them
    assert sorted(answered - set(listed)) == [], (
        "say what these codes mean in service/web/problem_docs.py's MEANINGS"
    )
    assert sorted(set(listed) - answered) == [], "no longer answered: remove them from MEANINGS"


# --- headers on every answer ---------------------------------------------------------------


def test_every_answer_carries_the_security_headers(client, live_server):
    api = ClientApi(client)
    owner = new_player(api, "headers")
    match_id = new_match(owner)
    answers = {
        "view": raw(client, "GET", f"/v1/matches/{match_id}", owner.token),
        "created": raw(client, "POST", "/v1/matches", owner.token),
        "401": raw(client, "GET", "/v1/matches"),
        "404": raw(client, "GET", "/nothing"),
        "405": raw(client, "DELETE", "/v1/players"),
        "415": raw(client, "POST", "/v1/players", data=b"name=x"),
        "health": raw(client, "GET", "/healthz"),
    }
    for what, reply in answers.items():
        for name, value in SECURITY.items():
            assert reply.headers.get(name) == value, (what, name, dict(reply.headers))
        assert reply.headers.get("Cache-Control") == "no-store", (what, dict(reply.headers))
    with requests.get(
        f"{live_server}/v1/matches/{match_id}/stream",
        stream=True,
        timeout=30,
        headers={"Authorization": f"Bearer {owner.token}"},
    ) as stream:
        assert stream.status_code == 200
        assert stream.headers["Cache-Control"] == "no-cache"
        for name, value in SECURITY.items():
            assert stream.headers.get(name) == value, name


# --- CORS ----------------------------------------------------------------------------------


PREFLIGHT = {
    "Origin": ORIGIN,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
}


def test_no_cors_headers_unless_configured(client):
    assert Config.from_env({}).cors_origins == ""
    reply = raw(client, "OPTIONS", "/v1/matches", headers=PREFLIGHT)
    assert "Access-Control-Allow-Origin" not in reply.headers
    reply = raw(client, "GET", "/healthz", headers={"Origin": ORIGIN})
    assert "Access-Control-Allow-Origin" not in reply.headers


@pytest.fixture(scope="module")
def cors_client(app):
    config = Config.from_env(
        {"DDZ_CORS_ORIGINS": f"{ORIGIN}, https://admin.example"}, database_url="unused"
    )
    cors_app = create_app(config, services=app.extensions["ddz"])
    return cors_app.test_client()


def test_configured_origins_may_call_from_a_browser(cors_client):
    reply = raw(
        cors_client,
        "OPTIONS",
        "/v1/matches/00000000-0000-4000-8000-000000000000/commands",
        headers=PREFLIGHT,
    )
    assert reply.status == 200
    assert reply.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert {"GET", "POST"} <= {
        m.strip() for m in reply.headers["Access-Control-Allow-Methods"].split(",")
    }
    allowed = {h.strip().lower() for h in reply.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "idempotency-key"} <= allowed
    assert "Access-Control-Allow-Credentials" not in reply.headers

    reply = raw(
        cors_client,
        "OPTIONS",
        "/v1/matches/00000000-0000-4000-8000-000000000000/stream",
        headers={
            **PREFLIGHT,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization, last-event-id",
        },
    )
    assert reply.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "last-event-id" in reply.headers["Access-Control-Allow-Headers"].lower()

    # A refusal too, so that the page can read its problem.
    reply = raw(cors_client, "GET", "/v1/matches", headers={"Origin": "https://admin.example"})
    assert_problem(reply, 401)
    assert reply.headers["Access-Control-Allow-Origin"] == "https://admin.example"
    assert "WWW-Authenticate" in reply.headers["Access-Control-Expose-Headers"]


def test_other_origins_get_no_cors_headers(cors_client):
    reply = raw(
        cors_client,
        "OPTIONS",
        "/v1/matches",
        headers={**PREFLIGHT, "Origin": "https://evil.example"},
    )
    assert "Access-Control-Allow-Origin" not in reply.headers
