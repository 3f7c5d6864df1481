"""``Idempotency-Key`` on commands: a retry of the same request gets the first response,
byte for byte, and changes nothing; the same key with another request is refused (422);
concurrent duplicates apply once."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

from api_support import (
    ClientApi,
    HttpApi,
    assert_problem,
    operator_events,
    seated_match,
    stream_fingerprint,
    to_act,
)


def send(player, match_id: str, body: dict, key: str | None, at: int | None = None):
    headers = {} if key is None else {"Idempotency-Key": key}
    return player.post(f"/v1/matches/{match_id}/commands", body, headers=headers, at=at)


def first_bid(api, prefix: str):
    players, match_id = seated_match(api, prefix)
    player, view = to_act(players, match_id)
    return players, match_id, player, view


def test_retry_replays_the_first_response_byte_for_byte(client):
    api = ClientApi(client)
    players, match_id, player, view = first_bid(api, "idem-bytes")
    body = {"action": "bid", "value": 1, "expected_version": view["version"]}
    first = send(player, match_id, body, "retry-1")
    assert first.status == 200, first.text
    retry = send(player, match_id, body, "retry-1")
    assert retry.status == first.status
    assert retry.content_type == first.content_type
    assert retry.content == first.content, (
        "the replayed body differs from the first response:\n"
        f"first: {first.content[:160]!r}\nretry: {retry.content[:160]!r}"
    )


def test_retry_changes_nothing_and_answers_the_first_document(client):
    api = ClientApi(client)
    players, match_id, player, view = first_bid(api, "idem-same")
    body = {"action": "bid", "value": 1, "expected_version": view["version"]}
    first = send(player, match_id, body, "retry-2")
    assert first.status == 200, first.text
    after_first = stream_fingerprint(api, match_id)
    # The match moves on (the next seat acts); the retry is still the first answer, not a 409.
    nxt, nxt_view = to_act(players, match_id)
    assert (
        send(
            nxt,
            match_id,
            {"action": "bid", "value": 0, "expected_version": nxt_view["version"]},
            None,
        ).status
        == 200
    )
    moved = stream_fingerprint(api, match_id)
    assert moved != after_first
    for _ in range(2):
        retry = send(player, match_id, body, "retry-2")
        assert retry.status == 200, retry.text
        assert retry.json == first.json
        assert stream_fingerprint(api, match_id) == moved


def test_same_key_with_another_body_is_refused(client):
    api = ClientApi(client)
    players, match_id, player, view = first_bid(api, "idem-other")
    body = {"action": "bid", "value": 1, "expected_version": view["version"]}
    assert send(player, match_id, body, "reused").status == 200
    before = stream_fingerprint(api, match_id)
    for other in (
        {"action": "bid", "value": 2, "expected_version": view["version"]},
        {"action": "bid", "value": 1},
        {"action": "pass"},
    ):
        reply = send(player, match_id, other, "reused", at=before[0])
        problem = assert_problem(reply, 422, "idempotency_key_reused")
        assert "Idempotency-Key" in problem["detail"] or "key" in problem["detail"].lower()
        assert stream_fingerprint(api, match_id) == before


def test_keys_belong_to_one_player_and_one_match(client):
    """The same key string from another player, or at another match, is another request."""
    api = ClientApi(client)
    players, match_id, player, view = first_bid(api, "idem-scope")
    assert (
        send(
            player,
            match_id,
            {"action": "bid", "value": 1, "expected_version": view["version"]},
            "shared",
        ).status
        == 200
    )
    nxt, nxt_view = to_act(players, match_id)
    reply = send(
        nxt,
        match_id,
        {"action": "bid", "value": 2, "expected_version": nxt_view["version"]},
        "shared",
    )
    assert reply.status == 200, reply.text
    assert reply.json["events"][0]["payload"] == {"seat": nxt.seat, "value": 2, "by": "player"}

    # The same player at a second match, with the same key and another body: not a reuse.
    from api_support import new_match, new_player, take_seat

    second = new_match(player)
    take_seat(player, second, 0)
    for seat in (1, 2, 3):
        take_seat(new_player(api, f"idem-scope-b{seat}"), second, seat)
    reply = send(player, second, {"action": "bid", "value": 3}, "shared")
    if reply.status != 200:
        assert_problem(reply, 422, "not_your_turn")


def test_a_refused_command_is_not_remembered(client):
    """A key whose request was refused by the rules is refused again the same way, and
    still changes nothing."""
    api = ClientApi(client)
    players, match_id, player, view = first_bid(api, "idem-refused")
    idle = players[(player.seat + 1) % 4]
    before = stream_fingerprint(api, match_id)
    for _ in range(2):
        reply = send(idle, match_id, {"action": "bid", "value": 1}, "refused", at=before[0])
        assert_problem(reply, 422, "not_your_turn")
        assert stream_fingerprint(api, match_id) == before


def test_concurrent_duplicates_with_one_key_apply_once(live_server):
    api = HttpApi(live_server)
    players, match_id, player, view = first_bid(api, "idem-race")
    body = {
        "action": "bid",
        "value": 2,
    }  # no expected_version: only the key prevents a double apply
    barrier = threading.Barrier(8)

    def go(_):
        barrier.wait()
        return send(player, match_id, body, "same-key")

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(go, range(8)))
    assert all(r.status == 200 for r in replies), [(r.status, r.text) for r in replies]
    documents = [json.loads(r.content) for r in replies]
    assert all(d == documents[0] for d in documents)
    after = operator_events(api, match_id)
    assert after["version"] == view["version"] + 1
    assert [e["type"] for e in after["events"] if e["version"] > view["version"]] == ["bid"]
