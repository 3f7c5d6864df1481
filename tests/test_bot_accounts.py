"""Bot accounts: a player registered as an author's program (``bot_account``), not a system
bot, by the person whose token registers it (its owner, shown on its profile and to
operators). It says so in ``/v1/me``; every other player sees its seats marked, at a
table, at a match, in the lists of matches and in the hand record; operators list the bot
accounts. It sits at tables and matches as a person does, and is suspended, banned and
reinstated with its owner."""

from __future__ import annotations

import uuid

import pytest
from api_support import ClientApi, assert_problem
from servers import OPERATOR_TOKEN

from service.app import standing


@pytest.fixture()
def api(client):
    return ClientApi(client)


def register(api, name: str, owner: str | None = None, **body) -> dict:
    """A new player; a bot account registered with ``owner``'s token (a new person's when
    none is given)."""
    if body.get("bot_account") and owner is None:
        owner = register(api, f"{name}-owner")["token"]
    reply = api.request("POST", "/v1/players", owner, json_body={"name": name, **body})
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


def test_a_bot_account_belongs_to_the_person_whose_token_registers_it(api):
    """Anyone could declare a bot account with a sign-up, tied to nobody: now a bot
    account needs its owner's token, a person's, and shows whose it is."""
    person = register(api, "author")
    bot = register(api, "engine", owner=person["token"], bot_account=True)
    assert bot["owner_id"] == person["player_id"] and person["owner_id"] is None
    body = {"name": "stray", "bot_account": True}
    assert_problem(api.request("POST", "/v1/players", json_body=body), 401, "unauthorized")
    for token in (bot["token"], OPERATOR_TOKEN):
        reply = api.request("POST", "/v1/players", token, json_body=body)
        assert_problem(reply, 403, "person_required")
    # Whose it is: on its public profile, and to operators.
    profile = api.request("GET", f"/v1/players/{bot['player_id']}").json
    assert profile["owner"] == {"player_id": person["player_id"], "name": "author"}
    assert api.request("GET", f"/v1/players/{person['player_id']}").json["owner"] is None
    listed = api.request("GET", "/v1/admin/players?bot_account=true", OPERATOR_TOKEN).json
    (shown,) = [p for p in listed["players"] if p["player_id"] == bot["player_id"]]
    assert shown["owner_id"] == person["player_id"]


def test_a_bot_account_is_suspended_banned_and_reinstated_with_its_owner(api, app):
    """A banned person came back with a new sign-up and kept their bots: now what an
    operator does to a person it does to their bot accounts, whose seats the system takes
    over and whose waiting tickets are cancelled, and whose tokens work again only when
    the person is reinstated."""
    ctx = app.extensions["ddz"]
    person = register(api, "cheat")
    bots = [
        register(api, f"cheat-bot{n}", owner=person["token"], bot_account=True) for n in range(2)
    ]
    other = register(api, "neighbour-bot", bot_account=True)
    # One bot seated in a hand under way (with system bots), the other waiting in the lobby.
    match_id = api.request("POST", "/v1/matches", bots[0]["token"], json_body={}).json["match_id"]
    assert api.request("POST", f"/v1/matches/{match_id}/seats", bots[0]["token"]).status == 201
    for seat in (1, 2, 3):
        seated = api.request(
            "POST",
            f"/v1/matches/{match_id}/seats",
            bots[0]["token"],
            json_body={"seat": seat, "bot": True},
        )
        assert seated.status == 201, seated.text
    ticket = api.request("POST", "/v1/lobby/tickets", bots[1]["token"], json_body={}).json
    for ban in ("suspended", "banned"):
        taken = standing.set_standing(
            ctx.pool, ctx.players, ctx.commands, uuid.UUID(person["player_id"]), ban
        )
        assert taken is not None
        for player in (person, *bots):
            reply = api.request("GET", "/v1/me", player["token"])
            assert_problem(reply, 403, f"player_{ban}")
        assert api.request("GET", "/v1/me", other["token"]).status == 200
    view = api.request("GET", f"/v1/matches/{match_id}", OPERATOR_TOKEN).json
    assert view["seats"][0]["disconnected"] is True  # the system plays the bot account's seat
    waited = ctx.tables.table_store.ticket(uuid.UUID(ticket["ticket_id"]))
    assert waited.status == "cancelled"
    # A bot reinstated alone stays refused while its owner is banned.
    standing.set_standing(
        ctx.pool, ctx.players, ctx.commands, uuid.UUID(bots[0]["player_id"]), "active"
    )
    assert_problem(api.request("GET", "/v1/me", bots[0]["token"]), 403, "player_banned")
    standing.set_standing(
        ctx.pool, ctx.players, ctx.commands, uuid.UUID(person["player_id"]), "active"
    )
    for player in (person, *bots):
        assert api.request("GET", "/v1/me", player["token"]).status == 200
