"""Malformed input: every piece a 4xx problem, never a 500, and nothing changed. Bodies
must be I-JSON (RFC 7493: no name twice in an object, no integer past ±(2**53 - 1), no
NaN, no unpaired surrogate); amounts, numbers of the query and ids in the path are read
as the contract writes them (ASCII digits, nothing after the last one); and a property
test throws generated hostile requests at every operation of openapi.yaml. No query
parameter of a page reaches a header it could break: a CR or LF anywhere is an invalid
value like any other, never a 500."""

from __future__ import annotations

import html
import json
import re
import urllib.parse
import uuid

import psycopg
import pytest
from api_support import PROBLEM_JSON, bearer
from contract import committed_document
from flask import url_for
from handplay import PASSWORDS, add_operator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobs import new_match, new_player, take_seat
from servers import OPERATOR_TOKEN, ROOT, beating_worker, fresh_database

from service.api import create_app
from service.api.encoding import I_JSON_RULES, LARGEST_INTEGER, NotIJson, parse_json
from service.api.rate_limits import UNLIMITED
from service.config import Config

OPENAPI = committed_document()
README = (ROOT / "README.md").read_text(encoding="utf-8")
JSON_HEADERS = {"Content-Type": "application/json"}
METHODS = {"get", "post", "put", "patch", "delete"}
#: Operations of the contract that take a body: (method, path template).
WITH_BODY = [
    (method.upper(), path)
    for path, operations in OPENAPI["paths"].items()
    for method, operation in operations.items()
    if method in METHODS and "requestBody" in operation
]


def post_raw(client, path: str, body: str | bytes, token: str | None = None):
    return client.post(path, data=body, headers={**JSON_HEADERS, **bearer(token)})


def assert_refused(reply, status: int, code: str) -> dict:
    assert reply.status_code == status, reply.get_data(as_text=True)
    assert reply.content_type == PROBLEM_JSON
    assert reply.json["code"] == code, reply.json
    return reply.json


@pytest.fixture()
def seated(client):
    """A player's token, seated at an open match (its id)."""
    _, token = new_player(client, "hostile")
    match_id = new_match(client, token)
    take_seat(client, match_id, token, seat=0)
    return token, match_id


def test_a_huge_integer_is_a_400_on_every_json_route(client, seated):
    """Python refuses to read an integer of more than 4,300 digits (a ValueError, which
    reached the client as a 500 with a traceback in the log)."""
    token, match_id = seated
    for digits in (17, 5000):
        for method, template in WITH_BODY:
            path = template.format(match_id=match_id, table_id=uuid.uuid4())
            reply = client.open(
                path,
                method=method,
                data='{"seat": ' + "9" * digits + "}",
                headers={**JSON_HEADERS, **bearer(token)},
            )
            problem = assert_refused(reply, 400, "invalid_json")
            assert "too large" in problem["detail"] and "9" * 21 not in problem["detail"]


def test_a_name_twice_in_an_object_is_refused_and_changes_nothing(client, seated):
    token, match_id = seated
    path = f"/v1/matches/{match_id}"
    before = client.get(path, headers=bearer(token)).json["version"]
    reply = post_raw(client, f"{path}/seats", '{"bot": false, "bot": true, "seat": 3}', token)
    problem = assert_refused(reply, 400, "invalid_json")
    assert '"bot" appears twice' in problem["detail"]
    assert client.get(path, headers=bearer(token)).json["version"] == before
    # Nested objects too: the last name no longer wins anywhere.
    reply = post_raw(client, "/v1/players", '{"name": "a", "name": "b"}')
    assert_refused(reply, 400, "invalid_json")


@pytest.mark.parametrize(
    "body",
    [
        '{"action": "bid", "value": NaN}',
        '{"action": "bid", "value": Infinity}',
        '{"action": "bid", "value": 1e400}',
        '{"action": "bid", "value": "\\ud800"}',
        '{"action": "play", "cards": ["S3", "\\udc00"]}',
    ],
)
def test_numbers_json_has_not_and_unpaired_surrogates_are_refused(client, seated, body):
    token, match_id = seated
    assert_refused(
        post_raw(client, f"/v1/matches/{match_id}/commands", body, token), 400, "invalid_json"
    )


def test_a_paired_surrogate_escape_is_text_and_accepted(client):
    reply = post_raw(client, "/v1/players", '{"name": "smile \\ud83d\\ude00"}')
    assert reply.status_code == 201 and reply.json["name"] == "smile \N{GRINNING FACE}"


def test_what_i_json_refuses_is_said_where_a_400_is_looked_up(client):
    """The rules that make a body JSON reads a 400 ``invalid_json`` are said in the served
    contract's 400, on the page of problems at ``invalid_json`` and in the README's errors;
    the example each rule gives is refused, and the largest integer it names is taken."""
    said = client.get("/openapi.json").json["components"]["responses"]["BAD_REQUEST"]
    assert I_JSON_RULES in said["description"]
    page = client.get("/docs/problems").get_data(as_text=True)
    entry = re.search(r'<dt id="invalid_json">.*?<dd>(.*?)</dd>', page, re.S)
    assert entry, "no invalid_json on the page of problems"
    assert I_JSON_RULES.replace("`", "") in html.unescape(re.sub(r"<[^>]+>", "", entry[1]))
    assert I_JSON_RULES in " ".join(README.split())
    for body in (
        '{"a": 1, "a": 2}',
        str(LARGEST_INTEGER + 1),
        str(-LARGEST_INTEGER - 1),
        "1e400",
        "NaN",
        "Infinity",
        '"\\ud800"',
    ):
        with pytest.raises(NotIJson):
            parse_json(body.encode())
    assert parse_json(f"[{LARGEST_INTEGER}, {-LARGEST_INTEGER}]".encode()) == [
        LARGEST_INTEGER,
        -LARGEST_INTEGER,
    ]


@pytest.mark.parametrize(
    "field,value",
    [
        ("unit", "\N{ARABIC-INDIC DIGIT THREE}"),
        ("unit", "\N{FULLWIDTH DIGIT ONE}.\N{FULLWIDTH DIGIT ZERO}\N{FULLWIDTH DIGIT ZERO}"),
        ("unit", "1.00\n"),
        ("unit", " 1.00"),
        ("unit", "1.00 "),
        ("cap", "2\N{DEVANAGARI DIGIT ZERO}.00"),
        ("rake", "0.0\N{ARABIC-INDIC DIGIT FIVE}"),
        ("rake", "0.05\n"),
    ],
)
def test_amounts_outside_the_contract_s_pattern_are_refused(client, field, value):
    _, token = new_player(client, "amounts")
    for path in ("/v1/matches", "/v1/tables"):
        reply = client.post(path, json={field: value}, headers=bearer(token))
        problem = assert_refused(reply, 422, "invalid_request")
        assert field in problem["errors"]["json"], problem


def test_numbers_of_the_query_and_ids_of_the_path_are_ascii(client, seated):
    token, match_id = seated
    for query in ("limit=\N{ARABIC-INDIC DIGIT THREE}", "limit=%203", "limit=1_0"):
        assert_refused(
            client.get(f"/v1/me/matches?{query}", headers=bearer(token)), 422, "invalid_request"
        )
    for query in ("after=\N{ARABIC-INDIC DIGIT ONE}", "wait=\N{FULLWIDTH DIGIT ONE}", "wait=%2B1"):
        reply = client.get(f"/v1/matches/{match_id}/events?{query}", headers=bearer(token))
        assert_refused(reply, 422, "invalid_request")
    arabic = match_id.translate({ord(d): chr(0x660 + int(d)) for d in "0123456789"})
    for spelling in (f"{{{match_id}}}", f"urn:uuid:{match_id}", match_id.replace("-", ""), arabic):
        reply = client.get(f"/v1/matches/{urllib.parse.quote(spelling)}", headers=bearer(token))
        assert_refused(reply, 404, "malformed_id")


# --- every operation of the contract, hostile requests -----------------------------------

#: JSON numbers that I-JSON refuses wherever they are, as they are written.
REFUSED_NUMBERS = st.one_of(
    st.integers(min_value=2**53, max_value=10**40).map(str),
    st.integers(min_value=-(10**40), max_value=-(2**53)).map(str),
    st.integers(min_value=4300, max_value=6000).map(lambda n: "9" * n),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1E+999"]),
)
#: Strings that are no Unicode text (an unpaired surrogate), as JSON writes them.
REFUSED_STRINGS = st.sampled_from(['"\\ud800"', '"a\\udfff"', '"\\udbff\\u0041"', '"\\uDC00z"'])
REFUSED_VALUES = st.one_of(REFUSED_NUMBERS, REFUSED_STRINGS)
PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
OTHER_DIGITS = st.characters(categories=["Nd"]).filter(lambda c: not c.isascii())
#: Amounts that break the contract's pattern: a digit of another script, or whitespace.
BAD_AMOUNTS = st.one_of(
    st.tuples(
        st.sampled_from(["1.00", "25", "0.05", "999999999.99"]), OTHER_DIGITS, st.integers(0, 12)
    ).map(lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :]),
    st.tuples(
        st.sampled_from(["1.00", "0.05", "3"]), st.sampled_from(["\n", " ", "\t", "\r\n", "\u3000"])
    ).map(lambda t: t[0] + t[1]),
    st.tuples(st.sampled_from(["1.00", "0.05"]), st.sampled_from([" ", "\n", "+", "\ufeff"])).map(
        lambda t: t[1] + t[0]
    ),
)
AMOUNT_FIELDS = {"unit", "cap", "rake"}
#: Ids that are no UUID as the contract writes one.
BAD_IDS = st.one_of(
    st.uuids().map(lambda u: f"{{{u}}}"),
    st.uuids().map(lambda u: f"urn:uuid:{u}"),
    st.uuids().map(lambda u: u.hex),
    st.uuids().map(lambda u: f"{u}\n"),
    st.tuples(st.uuids(), OTHER_DIGITS).map(
        lambda t: str(t[0]).replace("0", t[1]).replace("1", t[1]) + "0"
    ),
    st.text(min_size=1, max_size=40).filter(lambda s: "/" not in s),
)
#: Numbers of the query string as no client of the contract writes them.
BAD_QUERY = st.one_of(
    OTHER_DIGITS,
    st.sampled_from(
        ["nan", "inf", "-1", "", " 1", "1\n", "1_0", "1e3", "0x10", "9" * 5000, "\x00"]
    ),
)
#: Last-Event-ID values a stream never sends (headers are Latin-1).
BAD_EVENT_IDS = st.sampled_from(["\N{SUPERSCRIPT ONE}", "-1", "1e3", "9" * 40, " 1", "0x1", "1_0"])


def json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False)


@st.composite
def hostile_bodies(draw, names: list[str]) -> str:
    """A JSON text the operation must refuse: a name twice, a number or string I-JSON
    refuses, an amount off the pattern, nesting past any parser, or a refused value alone."""
    names = names or ["x"]
    kinds = ["twice", "value", "deep", "alone"] + (["amount"] if AMOUNT_FIELDS & set(names) else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "deep":
        depth = draw(st.integers(2000, 7000))
        return "[" * depth + "]" * depth
    if kind == "alone":
        return draw(REFUSED_VALUES)
    pairs = {
        json_text(k): json_text(v)
        for k, v in draw(st.dictionaries(st.sampled_from(names), PLAIN, max_size=3)).items()
    }
    items = list(pairs.items())
    if kind == "twice":
        name = json_text(draw(st.sampled_from(names)))
        items += [(name, json_text(draw(PLAIN)))] * (1 if name in pairs else 2)
    elif kind == "value":
        value = draw(REFUSED_VALUES)
        depth = draw(st.integers(0, 2))
        name = json_text(draw(st.sampled_from(names)))
        items = [item for item in items if item[0] != name] + [
            (name, "[" * depth + value + "]" * depth)
        ]
    else:
        name = json_text(draw(st.sampled_from(sorted(AMOUNT_FIELDS & set(names)))))
        items = [item for item in items if item[0] != name] + [(name, json_text(draw(BAD_AMOUNTS)))]
    items = draw(st.permutations(items))
    return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"


def schema_names(operation: dict) -> list[str]:
    """The names of the properties of the operation's JSON body."""
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    if "$ref" in schema:
        schema = OPENAPI["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return sorted(schema.get("properties", {}))


#: Every operation of the contract: (method, path template, operation), its parameters
#: with those of its path.
OPERATIONS = [
    (
        method.upper(),
        path,
        {
            **operation,
            "parameters": operations.get("parameters", []) + operation.get("parameters", []),
        },
    )
    for path, operations in OPENAPI["paths"].items()
    for method, operation in operations.items()
    if method in METHODS
]


@pytest.fixture(scope="module")
def world(postgres_admin_url, redis_url):
    """An app on a database of its own (so that its fingerprint is quick to take), and the
    ids a player can name: its own match (seated), table, lobby ticket, token and id."""
    with fresh_database(postgres_admin_url, "ddz_hostile") as url, beating_worker(redis_url):
        app = create_app(
            Config(
                database_url=url,
                redis_url=redis_url,
                operator_token=OPERATOR_TOKEN,
                rate_limits=False,
            )
        )
        client = app.test_client()
        try:
            player_id, token = new_player(client, "target")
            match_id = new_match(client, token)
            take_seat(client, match_id, token, seat=0)
            _, other = new_player(client, "waiting")
            ticket = client.post("/v1/lobby/tickets", json={}, headers=bearer(other)).json[
                "ticket_id"
            ]
            table = client.post("/v1/tables", json={}, headers=bearer(token)).json["table_id"]
            token_id = client.get("/v1/me/tokens", headers=bearer(token)).json["tokens"][0][
                "token_id"
            ]
            ids = {
                "match_id": match_id,
                "table_id": table,
                "ticket_id": ticket,
                "token_id": token_id,
                "player_id": player_id,
            }
            with psycopg.connect(url, autocommit=True) as conn:
                tables = [
                    row[0]
                    for row in conn.execute(
                        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                        " AND tablename NOT LIKE '\\_yoyo%' AND tablename NOT LIKE 'yoyo%'"
                    )
                ]
                query = "SELECT " + ", ".join(
                    f"(SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM \"{name}\" t)"
                    for name in tables
                )

                def fingerprint() -> tuple:
                    return conn.execute(query).fetchone()

                yield client, token, ids, fingerprint
        finally:
            app.extensions["ddz"].close()


@pytest.mark.parametrize(
    "method,template,operation", OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_requests_get_a_4xx_and_change_nothing(world, method, template, operation, data):
    client, token, ids, fingerprint = world
    path, query, body, headers = template.format(**ids), {}, None, {}
    if "requestBody" in operation:
        body = data.draw(hostile_bodies(schema_names(operation)), "body")
    else:
        body = data.draw(hostile_bodies([]), "body")  # a body where none is read
        names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
        if names:
            query = data.draw(st.fixed_dictionaries({n: BAD_QUERY for n in names}), "query")
        if any(p["name"] == "Last-Event-ID" for p in operation.get("parameters", [])):
            headers["Last-Event-ID"] = data.draw(BAD_EVENT_IDS, "Last-Event-ID")
        if method != "GET":
            # What changes something takes no body here: its id is the hostile part.
            path = template.format(
                **dict.fromkeys(ids, urllib.parse.quote(data.draw(BAD_IDS, "id"), safe=""))
            )
    before = fingerprint()
    reply = client.open(
        path,
        method=method,
        query_string=query,
        data=body.encode("utf-8", "surrogatepass"),
        headers={**JSON_HEADERS, **bearer(token), **headers},
    )
    try:
        assert reply.status_code < 500, reply.get_data(as_text=True)
        if method != "GET":
            assert 400 <= reply.status_code < 500, reply.get_data(as_text=True)
            assert reply.content_type == PROBLEM_JSON
    finally:
        reply.close()  # a stream, refused or not, ends here
    assert fingerprint() == before


# A value of a command body's fields, valid or not.
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**31),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["H3", "D3", "BJ", "x", "", "decline", "pass", "play", "bid"]),
    st.lists(st.sampled_from(["H3", "D3", "S4", "BJ", "x", 3]), max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(
    action=st.sampled_from(["play", "pass", "bid", "show_hand", "report", "resume", "nope", 3]),
    fields=st.dictionaries(
        st.sampled_from(["cards", "value", "expected_version", "extra"]), _VALUES, max_size=3
    ),
)
def test_a_command_body_is_read_as_its_schema_reads_it(action, fields):
    """The compiled loader of a body (the hot path's) reads what marshmallow takes as
    marshmallow reads it, and leaves the rest to marshmallow, whose errors are answered."""
    from marshmallow import ValidationError

    from service.api.routing import compiled
    from service.api.schemas import CommandRequestSchema

    schema = CommandRequestSchema()
    load = compiled(schema)
    assert load is not None
    body = {"action": action, **fields}
    try:
        expected = schema.load(body)
    except ValidationError:
        assert load(body, None) is None
    else:
        assert load(body, None) == expected


#: Values that break a header they reach: a CR and LF (the header after them injected),
#: a lone LF, a lone CR; each after a path a page would otherwise go back to.
HEADER_BREAKERS = (
    "/console/\r\nSet-Cookie: injected=1",
    "/replay/\nSet-Cookie: injected=1",
    "/console/matches\rX-Injected: 1",
)
SERVICE = ROOT / "service"


def query_names() -> set[str]:
    """Every query parameter the pages read: each name a view or a template asks
    ``request.args`` for, and each field of the templates' forms (GET forms are queries)."""
    names: set[str] = set()
    for path in SERVICE.rglob("*"):
        if path.suffix in (".py", ".html"):
            text = path.read_text()
            names |= set(re.findall(r"""request\.args\.get\(\s*["'](\w+)["']""", text))
            names |= set(re.findall(r"""<(?:input|select)[^>]*\bname="(\w+)\"""", text))
    return names - {"csrf_token", "password"}


def page_paths(app) -> list[str]:
    """A path of each page that answers GET (the console's, the replay's, the front
    door's and the docs'; not the API's JSON routes, the health checks or the metrics),
    any id in it a new one."""
    paths = []
    for rule in app.url_map.iter_rules():
        if "GET" not in rule.methods or rule.rule.startswith(("/v1/", "/static/")):
            continue
        if rule.endpoint in UNLIMITED:
            continue
        values = {name: uuid.uuid4() for name in rule.arguments}
        if "code" in rule.arguments:
            values["code"] = "en"  # the language switch
        if "name" in rule.arguments or "filename" in rule.arguments:
            continue  # a file of a page: no query
        with app.test_request_context():
            paths.append(url_for(rule.endpoint, **values))
    return paths


def sign_in(app, query: str = ""):
    """A new browser signing in to the console as ada: itself, and the answer."""
    browser = app.test_client()
    page = browser.get("/console/sign-in").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    answer = browser.post(
        f"/console/sign-in{query}",
        data={"name": "ada", "password": PASSWORDS["ada"], "csrf_token": token},
    )
    return browser, answer


@pytest.fixture(scope="module")
def console(ops):
    """A browser signed in to the console of this module's service, and its app."""
    app, _, _ = ops
    add_operator("ada", "admin")
    browser, answer = sign_in(app)
    assert answer.status_code == 302
    return app, browser


def assert_unbroken(reply, where: str) -> None:
    """Answered (no 500), with no header but those the page sets itself, and a redirect
    only to a page of this site."""
    assert reply.status_code < 500, (where, reply.status_code, reply.get_data(as_text=True))
    assert "injected" not in reply.headers.get("Set-Cookie", "").lower(), where
    assert "X-Injected" not in reply.headers, where
    for value in reply.headers.values():
        assert "\r" not in value and "\n" not in value, (where, value)
    location = reply.headers.get("Location")
    if location is not None:
        parts = urllib.parse.urlsplit(location)
        assert parts.netloc in ("", "localhost") and parts.path.startswith("/"), (where, location)


@pytest.mark.slow
def test_a_cr_or_lf_in_any_query_parameter_of_a_page_is_an_invalid_value(console):
    """``/console/language/en?next=/console/%0d%0aSet-Cookie:%20x=1`` (and the same from a
    replay page) answered 500, a header that cannot hold a newline; now the switch goes to
    the default page, as for any other target that is not the console's or a replay's.
    Every query parameter the pages read, on every page, and the sign-in's ``next``."""
    app, browser = console
    names, paths = query_names(), page_paths(app)
    assert {"next", "page", "since", "until", "player", "days"} <= names, names
    assert "/console/language/en" in paths and "/console/matches" in paths, paths
    for path in paths:
        # Each parameter alone (one that a page refuses first cannot hide another) ...
        for name in sorted(names):
            query = urllib.parse.urlencode({name: HEADER_BREAKERS[0]})
            assert_unbroken(browser.get(f"{path}?{query}"), f"{path}?{query}")
        # ... and every one at once, with each way to break a line.
        for value in HEADER_BREAKERS:
            query = urllib.parse.urlencode(dict.fromkeys(names, value))
            assert_unbroken(browser.get(f"{path}?{query}"), f"{path}?{query}")
    switched = browser.get(
        "/console/language/en?" + urllib.parse.urlencode({"next": HEADER_BREAKERS[0]})
    )
    assert switched.status_code == 302 and switched.headers["Location"].endswith("/console/")
    # Signing in goes to the matches instead.
    for value in HEADER_BREAKERS:
        _, signed = sign_in(app, "?" + urllib.parse.urlencode({"next": value}))
        assert_unbroken(signed, f"sign-in next={value!r}")
        assert signed.status_code == 302 and signed.headers["Location"].endswith("/console/matches")
