"""``Idempotency-Key`` on the requests that create: a match, a table, a seat at a table, a
lobby ticket. A retry of the same request by the same player gets the first answer, byte
for byte, and creates nothing; the same key with another body is refused (422); another
player's key is its own; concurrent duplicates create once; a refused request frees its
key."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from api_support import ClientApi, HttpApi, assert_problem, new_player

KEYED = {"Idempotency-Key": "make-it-once"}


def my_tables(me) -> list[str]:
    return [t["table_id"] for t in me.get("/v1/me/tables").json["tables"]]


@pytest.mark.parametrize(
    ("path", "body", "id_field"),
    [
        ("/v1/matches", {"unit": "2.00"}, "match_id"),
        ("/v1/tables", {"unit": "2.00"}, "table_id"),
        ("/v1/lobby/tickets", {"unit": "7.00", "allow_bots": False}, "ticket_id"),
    ],
)
def test_a_retry_gets_the_first_answer_and_creates_nothing(client, path, body, id_field):
    me = new_player(ClientApi(client), f"keyed{id_field}")
    first = me.post(path, body, headers=KEYED)
    assert first.status == 201, first.text
    retry = me.post(path, body, headers=KEYED)
    assert (retry.status, retry.content) == (first.status, first.content)
    assert retry.content_type == first.content_type == "application/json"
    # The same key with another body: refused, and nothing is created.
    other = me.post(path, {**body, "unit": "3.00"}, headers=KEYED)
    assert_problem(other, 422, "idempotency_key_reused")
    # Another key (or none) is another request.
    again = me.post(path, body, headers={"Idempotency-Key": "another"})
    if id_field == "ticket_id":  # one waiting ticket a player
        assert_problem(again, 409, "ticket_waiting")
    elif id_field == "table_id":  # one table a person
        assert_problem(again, 409, "seated_elsewhere")
        assert my_tables(me) == [first.json[id_field]]
    else:
        assert again.status == 201 and again.json[id_field] != first.json[id_field]


def test_another_players_key_is_its_own(client):
    api = ClientApi(client)
    one, two = new_player(api, "key-one"), new_player(api, "key-two")
    mine = one.post("/v1/tables", {}, headers=KEYED)
    theirs = two.post("/v1/tables", {}, headers=KEYED)
    assert mine.status == theirs.status == 201
    assert mine.json["table_id"] != theirs.json["table_id"]


def test_a_seat_taken_with_a_key_is_taken_once(client):
    api = ClientApi(client)
    host, guest = new_player(api, "seat-host"), new_player(api, "seat-guest")
    table_id = host.post("/v1/tables", {}).json["table_id"]
    path = f"/v1/tables/{table_id}/seats"
    first = guest.post(path, {}, headers=KEYED)
    assert first.status == 201, first.text
    retry = guest.post(path, {}, headers=KEYED)
    assert (retry.status, retry.content) == (first.status, first.content)
    seated = [s for s in host.get(f"/v1/tables/{table_id}").json["seats"] if s and s["player"]]
    assert sorted(s["player"] for s in seated) == sorted([host.player_id, guest.player_id])
    # The key is the seat's at this table: at another table it is another request.
    other_table = new_player(api, "seat-other").post("/v1/tables", {}).json["table_id"]
    assert guest.post(f"/v1/tables/{table_id}/leave").status == 200
    assert guest.post(f"/v1/tables/{other_table}/seats", {}, headers=KEYED).status == 201


def test_a_refused_creation_frees_its_key(client):
    me = new_player(ClientApi(client), "key-refused")
    waiting = me.post("/v1/lobby/tickets", {"unit": "8.00", "allow_bots": False})
    assert waiting.status == 201
    body = {"unit": "9.00", "allow_bots": False}
    assert_problem(me.post("/v1/lobby/tickets", body, headers=KEYED), 409, "ticket_waiting")
    assert me.call("DELETE", f"/v1/lobby/tickets/{waiting.json['ticket_id']}").status == 200
    # The refusal created nothing and kept nothing: the same request now creates.
    first = me.post("/v1/lobby/tickets", body, headers=KEYED)
    assert first.status == 201, first.text
    assert me.post("/v1/lobby/tickets", body, headers=KEYED).content == first.content


def test_concurrent_duplicates_create_once(live_server):
    me = new_player(HttpApi(live_server), "key-race")
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda _: me.post("/v1/tables", {}, headers=KEYED), range(8)))
    created = [r for r in replies if r.status == 201]
    assert created and len({r.content for r in created}) == 1
    for reply in replies:
        if reply.status != 201:  # the first one still under way
            assert_problem(reply, 409, "idempotency_key_in_use")
    assert my_tables(me) == [created[0].json["table_id"]]
