"""Bot accounts: a player registered as an author's program (``bot_account``), not a system
bot. It says so in ``/v1/me``; every other player sees its seats marked, at a table, at a
match, in the lists of matches and in the hand record; operators list the bot accounts.
It sits at tables and matches as a person does."""

from __future__ import annotations

import pytest
from api_support import ClientApi, assert_problem
from servers import OPERATOR_TOKEN


@pytest.fixture()
def api(client):
    return ClientApi(client)


def register(api, name: str, **body) -> dict:
    reply = api.request("POST", "/v1/players", json_body={"name": name, **body})
    assert reply.status == 201, reply.text
    return reply.json


def marks(seats: list) -> list:
    """Each seat as (player, system bot, bot account); None for an empty seat."""
    return [None if s is None else (s["player"], s["bot"], s["bot_account"]) for s in seats]


def test_a_bot_account_is_registered_as_such_and_says_so(api):
    author = register(api, "engine", bot_account=True)
    person = register(api, "person")
    assert (author["bot_account"], person["bot_account"]) == (True, False)
    me = api.request("GET", "/v1/me", author["token"]).json
    assert (me["name"], me["bot_account"]) == ("engine", True)
    assert api.request("GET", "/v1/me", person["token"]).json["bot_account"] is False
    # A JSON boolean only; nothing is made of a refused request.
    for value in ("true", 1, None):
        reply = api.request("POST", "/v1/players", json_body={"name": "x", "bot_account": value})
        assert_problem(reply, 422)


def test_other_players_see_a_bot_accounts_seats_marked(api):
    author = register(api, "engine", bot_account=True)
    people = [register(api, f"person{n}") for n in range(3)]
    onlooker = register(api, "onlooker")

    # A table: the author joins as a person would; anyone looking sees the mark.
    reply = api.request("POST", "/v1/tables", people[0]["token"], json_body={})
    table_id = reply.json["table_id"]
    reply = api.request("POST", f"/v1/tables/{table_id}/seats", author["token"], json_body={})
    assert reply.status == 201, reply.text
    table = api.request("GET", f"/v1/tables/{table_id}", onlooker["token"]).json
    assert marks(table["seats"]) == [
        (people[0]["player_id"], False, False),
        (author["player_id"], False, True),
        None,
        None,
    ]
    assert table["seats"][1]["name"] == "engine"

    # A match: the author in seat 1, a system bot in seat 3.
    reply = api.request("POST", "/v1/matches", people[0]["token"], json_body={})
    match_id = reply.json["match_id"]
    seated = [(people[0], 0), (author, 1), (people[1], 2)]
    for who, seat in seated:
        reply = api.request(
            "POST", f"/v1/matches/{match_id}/seats", who["token"], json_body={"seat": seat}
        )
        assert reply.status == 201, reply.text
    reply = api.request(
        "POST",
        f"/v1/matches/{match_id}/seats",
        people[1]["token"],
        json_body={"seat": 3, "bot": True},
    )
    assert reply.status == 201, reply.text
    expected = [
        (people[0]["player_id"], False, False),
        (author["player_id"], False, True),
        (people[1]["player_id"], False, False),
        (None, True, False),
    ]
    view = api.request("GET", f"/v1/matches/{match_id}", people[0]["token"]).json
    assert marks(view["seats"]) == expected
    listed = api.request("GET", "/v1/matches?limit=100", onlooker["token"]).json["matches"]
    (summary,) = [m for m in listed if m["match_id"] == match_id]
    assert marks(summary["seats"]) == expected
    mine = api.request("GET", "/v1/me/matches", people[1]["token"]).json["matches"]
    assert marks(mine[0]["seats"]) == expected and mine[0]["match_id"] == match_id
    assert mine[0]["seats"][1]["name"] == "engine"
    record = api.request("GET", f"/v1/matches/{match_id}/record", OPERATOR_TOKEN).json
    assert marks(record["seats"]) == expected

    # The author plays as a person: its own view is a seat's, with its hand.
    own = api.request("GET", f"/v1/matches/{match_id}", author["token"]).json
    assert own["seat"] == 1 and len(own["hand"]) == 25


def test_operators_list_the_bot_accounts(api):
    authors = [register(api, f"engine{n}", bot_account=True) for n in range(3)]
    person = register(api, "person")

    def listed(query: str) -> list[dict]:
        reply = api.request("GET", f"/v1/admin/players?{query}", OPERATOR_TOKEN)
        assert reply.status == 200, reply.text
        return reply.json["players"]

    accounts = listed("bot_account=true&limit=100")
    ids = [p["player_id"] for p in accounts]
    # Newest first.
    assert ids[:3] == [a["player_id"] for a in reversed(authors)]
    assert person["player_id"] not in ids and all(p["bot_account"] for p in accounts)
    people = [p["player_id"] for p in listed("bot_account=false&limit=100")]
    assert person["player_id"] in people and authors[0]["player_id"] not in people

    # Page by page, with the cursor, the same list.
    paged, cursor = [], None
    while len(paged) < 3:
        reply = api.request(
            "GET",
            "/v1/admin/players?bot_account=true&limit=1" + (f"&cursor={cursor}" if cursor else ""),
            OPERATOR_TOKEN,
        )
        paged += [p["player_id"] for p in reply.json["players"]]
        cursor = reply.json["next_cursor"]
    assert paged == ids[:3]

    # Operators only.
    assert_problem(api.request("GET", "/v1/admin/players", person["token"]), 403)
    assert_problem(api.request("GET", "/v1/admin/players?cursor=bm90LWl0", OPERATOR_TOKEN), 422)
