"""A player's tokens: another one (optionally expiring), the list, revocation, which every
API process honours within a second, and no reach into another player's tokens."""

from __future__ import annotations

import time

import pytest

from service.api import create_app


def new_token(client, name: str = "tokens") -> tuple[str, str]:
    reply = client.post("/v1/players", json={"name": name})
    assert reply.status_code == 201
    return reply.json["token"], reply.json["player_id"]


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def tokens_of(client, token: str) -> list[dict]:
    reply = client.get("/v1/me/tokens", headers=auth(token))
    assert reply.status_code == 200, reply.json
    return reply.json["tokens"]


def test_a_player_makes_another_token_sees_both_and_revokes_them(client):
    first, player_id = new_token(client)
    reply = client.post(
        "/v1/me/tokens", headers=auth(first), json={"label": "phone", "expires_in": 3600}
    )
    assert reply.status_code == 201
    second = reply.json
    assert (
        second["token"] != first
        and second["last4"] == second["token"][-4:]
        and second["label"] == "phone"
    )
    assert second["expires_at"] is not None and second["current"] is False

    listed = tokens_of(client, second["token"])
    assert [t["token_id"] for t in listed][1] == second["token_id"]
    assert [t["current"] for t in listed] == [False, True]
    assert all("token" not in t for t in listed)
    ledger = client.get(f"/v1/players/{player_id}/ledger", headers=auth(second["token"]))
    assert ledger.status_code == 200  # the new token is the same player's

    first_id = listed[0]["token_id"]
    assert (
        client.delete(f"/v1/me/tokens/{first_id}", headers=auth(second["token"])).status_code == 204
    )
    refused = client.get("/v1/me/tokens", headers=auth(first))
    assert refused.status_code == 401 and refused.json["code"] == "invalid_token"
    # The token in use may revoke itself.
    assert (
        client.delete(
            f"/v1/me/tokens/{second['token_id']}", headers=auth(second["token"])
        ).status_code
        == 204
    )
    assert client.get("/v1/me/tokens", headers=auth(second["token"])).status_code == 401


@pytest.mark.slow
def test_a_revoked_token_is_refused_by_another_api_process_within_a_second(client, config):
    other = create_app(config)  # a second process's app: its own token cache and listener
    try:
        elsewhere = other.test_client()
        keeper, _ = new_token(client, "keeper")
        spare = client.post("/v1/me/tokens", headers=auth(keeper), json={}).json
        assert (
            elsewhere.get("/v1/me/tokens", headers=auth(spare["token"])).status_code == 200
        )  # now cached there

        assert (
            client.delete(f"/v1/me/tokens/{spare['token_id']}", headers=auth(keeper)).status_code
            == 204
        )
        revoked_at = time.monotonic()
        while elsewhere.get("/v1/me/tokens", headers=auth(spare["token"])).status_code != 401:
            assert time.monotonic() - revoked_at < 1.0, (
                "the other process still takes the revoked token"
            )
            time.sleep(0.02)
        assert elsewhere.get("/v1/me/tokens", headers=auth(keeper)).status_code == 200
    finally:
        other.extensions["ddz"].close()


def test_an_expired_token_gets_401(client):
    token, _ = new_token(client)
    short = client.post("/v1/me/tokens", headers=auth(token), json={"expires_in": 1}).json
    assert client.get("/v1/me/tokens", headers=auth(short["token"])).status_code == 200
    time.sleep(1.2)
    reply = client.get("/v1/me/tokens", headers=auth(short["token"]))
    assert reply.status_code == 401 and reply.json["code"] == "token_expired"
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/v1/me/tokens", headers=auth(token)).status_code == 200


def test_a_player_cannot_see_or_revoke_another_players_tokens(client):
    alice, _ = new_token(client, "alice")
    bob, _ = new_token(client, "bob")
    alices = tokens_of(client, alice)
    assert {t["token_id"] for t in alices}.isdisjoint(t["token_id"] for t in tokens_of(client, bob))

    reply = client.delete(f"/v1/me/tokens/{alices[0]['token_id']}", headers=auth(bob))
    assert reply.status_code == 404 and reply.json["code"] == "token_not_found"
    assert client.get("/v1/me/tokens", headers=auth(alice)).status_code == 200


@pytest.mark.parametrize(
    "body", [{"expires_in": 0}, {"expires_in": "60"}, {"label": ""}, {"token": "mine"}]
)
def test_a_bad_token_request_is_refused_and_makes_no_token(client, body):
    token, _ = new_token(client)
    reply = client.post("/v1/me/tokens", headers=auth(token), json=body)
    assert reply.status_code == 422 and reply.content_type == "application/problem+json"
    assert len(tokens_of(client, token)) == 1
