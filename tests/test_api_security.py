"""Bad input and access control: every refusal is an RFC 9457 problem
(``application/problem+json``, a machine-readable ``code``, a human ``detail``), changes
nothing (the match's version and events are as before), and names no card the caller may
not see."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from api_support import (
    ClientApi,
    HttpApi,
    Knowledge,
    Observer,
    advance_to_playing,
    assert_problem,
    leaks,
    new_match,
    new_player,
    operator_events,
    seated_match,
    stream_fingerprint,
    view_of,
)
from servers import OPERATOR_TOKEN

UNKNOWN = "00000000-0000-4000-8000-000000000000"


class MatchInPlay:
    """A match in play (the landlord leads), its players and an onlooker with no seat."""

    def __init__(self, api, prefix: str):
        self.api = api
        self.players, self.match_id = seated_match(api, prefix)
        self.landlord_view = advance_to_playing(self.players, self.match_id)
        self.landlord = self.players[self.landlord_view["seat"]]
        self.onlooker = new_player(api, f"{prefix}-onlooker")
        self.path = f"/v1/matches/{self.match_id}"

    @property
    def version(self) -> int:
        return stream_fingerprint(self.api, self.match_id)[0]

    def farmer(self, offset: int = 1) -> Observer:
        return self.players[(self.landlord.seat + offset) % 4]

    def hidden_from(self, player: Observer) -> list[str]:
        """Codes in another seat's hand that ``player`` neither holds nor could know of."""
        everything = operator_events(self.api, self.match_id)
        snap = Knowledge(everything["events"]).at(everything["version"])
        allowed = snap.allowed(player.seat)
        for other in range(4):
            if other != player.seat:
                hidden = [c for c in snap.hands[other] if allowed[c] == 0]
                if hidden:
                    return hidden
        raise AssertionError("no hidden card")

    def command(self, player: Observer, body=None, *, data=None, headers=None):
        return player.call(
            "POST", f"{self.path}/commands", body, data=data, headers=headers, at=self.version
        )

    def refused(self, reply, status: int, code: str | None = None) -> dict:
        return assert_problem(reply, status, code)

    def no_leaks(self) -> None:
        knowledge = Knowledge(operator_events(self.api, self.match_id)["events"])
        found = [p for player in [*self.players, self.onlooker] for p in leaks(player, knowledge)]
        assert not found, "\n".join(found)


@pytest.fixture()
def match(client):
    return MatchInPlay(ClientApi(client), f"sec-{uuid.uuid4().hex[:6]}")


def unchanged(match: MatchInPlay):
    """Context: the match's version and events are the same afterwards."""

    class Guard:
        def __enter__(self):
            self.before = stream_fingerprint(match.api, match.match_id)

        def __exit__(self, *exc):
            if exc[0] is None:
                assert stream_fingerprint(match.api, match.match_id) == self.before, (
                    "a refused request changed the match"
                )

    return Guard()


# --- the body ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, where",
    [
        ({"action": "play", "cards": ["S3"], "seat": 2}, "seat"),
        ({"action": "pass", "by": "bot"}, "by"),
        ({"action": "play", "cards": ["S3"], "expected_version": 1, "extra": None}, "extra"),
    ],
)
def test_unknown_fields_are_refused(match, body, where):
    with unchanged(match):
        problem = match.refused(match.command(match.landlord, body), 422, "invalid_request")
    assert where in json.dumps(problem.get("errors", {})) or where in problem["detail"]
    match.no_leaks()


@pytest.mark.parametrize(
    "body, code",
    [
        ({"action": 5}, "invalid_request"),
        ({"action": "dance"}, "invalid_request"),
        ({}, "invalid_request"),
        ({"action": "play", "cards": "S3"}, "invalid_request"),
        ({"action": "play", "cards": [3, 4]}, "invalid_request"),
        ({"action": "play", "cards": ["s3"]}, "invalid_request"),
        ({"action": "play", "cards": ["S1"]}, "invalid_request"),
        ({"action": "play", "cards": []}, "invalid_request"),
        ({"action": "play", "cards": ["S3"] * 34}, "invalid_request"),
        ({"action": "play", "cards": ["S3"], "expected_version": "one"}, "invalid_request"),
        ({"action": "play", "cards": ["S3"], "expected_version": -1}, "invalid_request"),
        ({"action": "play", "cards": ["S3"], "expected_version": 1.5}, "invalid_request"),
        # Each action's body has its own fields (the contract's oneOf by action).
        ({"action": "play"}, "invalid_request"),
        ({"action": "pass", "value": 1}, "invalid_request"),
        ({"action": "bid", "value": "3"}, None),
        ({"action": "bid", "value": True}, None),
        ({"action": "report", "value": 1}, None),
        ({"action": "show_hand", "value": "yes"}, None),
    ],
)
def test_wrong_types_and_shapes_are_refused(match, body, code):
    with unchanged(match):
        match.refused(match.command(match.landlord, body), 422, code)
    match.no_leaks()


def test_malformed_json_is_a_400(match):
    for data in (b"{", b'{"action": "pass",}', b"\xff\xfe", b"[1, 2", b"nul"):
        with unchanged(match):
            match.refused(match.command(match.landlord, data=data), 400)


def test_deeply_nested_json_is_a_4xx_problem(match):
    """12 KB of nested arrays (under the 16 KiB limit) is bad input, not a server failure."""
    for data in (b"[" * 6000 + b"]" * 6000, b'{"action": ' + b"[" * 6000 + b"]" * 6000 + b"}"):
        with unchanged(match):
            reply = match.command(match.landlord, data=data)
            assert 400 <= reply.status < 500, (
                f"nested JSON to /commands got {reply.status}: {reply.text[:200]}"
            )
            match.refused(reply, reply.status)
    # The same without any token, at the one endpoint that needs none.
    reply = match.api.request(
        "POST", "/v1/players", data=b'{"name": ' + b"[" * 6000 + b"]" * 6000 + b"}"
    )
    assert 400 <= reply.status < 500, (
        f"nested JSON to /v1/players got {reply.status}: {reply.text[:200]}"
    )


def test_a_body_that_is_not_an_object_is_refused(match):
    for data in (b"[]", b'"pass"', b"42", b"null"):
        with unchanged(match):
            reply = match.command(match.landlord, data=data)
            assert reply.status in (400, 422), reply.text
            match.refused(reply, reply.status)


def test_oversized_bodies_are_a_413(match):
    padding = "x" * (17 * 1024)
    with unchanged(match):
        match.refused(
            match.command(match.landlord, {"action": "pass", "pad": padding}), 413, "body_too_large"
        )
    with unchanged(match):
        reply = match.api.request("POST", "/v1/players", json_body={"name": padding})
        match.refused(reply, 413, "body_too_large")
    with unchanged(match):
        reply = match.landlord.post("/v1/matches", {"ruleset": "shanghai-platform", "pad": padding})
        match.refused(reply, 413, "body_too_large")


def chunked_post(live_server: str, path: str, token: str, parts):
    """POST with ``Transfer-Encoding: chunked`` (no Content-Length), as streaming clients do."""
    import requests
    from api_support import Reply

    response = requests.post(
        f"{live_server}{path}",
        data=iter(parts),
        timeout=30,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    return Reply(response.status_code, response.headers, response.content)


def test_oversized_chunked_body_over_http_is_a_413(live_server):
    """Without a Content-Length (chunked), a body over 16 KiB is refused as too large too."""
    api = HttpApi(live_server)
    players, match_id = seated_match(api, "chunked")
    player = players[view_of(players[0], match_id)["turn"]]
    before = stream_fingerprint(api, match_id)
    parts = [b'{"action": "bid", "value": 1, "pad": "'] + [b"x" * 1024] * 40 + [b'"}']
    reply = chunked_post(live_server, f"/v1/matches/{match_id}/commands", player.token, parts)
    assert_problem(reply, 413)
    assert stream_fingerprint(api, match_id) == before


def test_oversized_chunked_body_is_not_applied(live_server):
    """A valid command followed by 20 KiB of JSON whitespace, chunked: over the limit, so it
    must be refused (413) and change nothing, not cut at 16 KiB and executed."""
    api = HttpApi(live_server)
    players, match_id = seated_match(api, "chunked-ws")
    view = view_of(players[0], match_id)
    player = players[view["turn"]]
    before = stream_fingerprint(api, match_id)
    command = json.dumps(
        {"action": "bid", "value": 1, "expected_version": view["version"]}
    ).encode()
    parts = [command] + [b" " * 1024] * 20
    reply = chunked_post(live_server, f"/v1/matches/{match_id}/commands", player.token, parts)
    assert reply.status == 413, (
        f"a {sum(map(len, parts))}-byte body got {reply.status}: {reply.text[:200]}"
    )
    assert_problem(reply, 413)
    assert stream_fingerprint(api, match_id) == before


# --- the rules ---------------------------------------------------------------------------


def test_cards_not_in_the_hand_are_named_from_the_request_alone(match):
    """The refusal names the cards of the play that the hand lacks, which the caller sent
    itself, and no other: not the ones it holds, nor any other hidden card."""
    hidden = match.hidden_from(match.landlord)
    hand = Counter(match.landlord_view["hand"])
    held = next(iter(hand))
    with unchanged(match):
        problem = match.refused(
            match.command(match.landlord, {"action": "play", "cards": [held, hidden[0]]}),
            422,
            "cards_not_in_hand",
        )
    assert problem["detail"] == f"the hand does not hold: {hidden[0]}"
    once = next(c for c in hand if hand[c] == 1)
    with unchanged(match):
        problem = match.refused(
            match.command(match.landlord, {"action": "play", "cards": [once, once]}),
            422,
            "cards_not_in_hand",
        )
    assert problem["detail"] == f"the hand does not hold: {once}"
    match.no_leaks()


def test_rule_refusals(match):
    farmer = match.farmer()
    with unchanged(match):
        match.refused(match.command(match.landlord, {"action": "pass"}), 422, "leader_cannot_pass")
    with unchanged(match):
        match.refused(
            match.command(match.landlord, {"action": "bid", "value": 1}), 422, "wrong_phase"
        )
    with unchanged(match):  # out of turn, with a legal-looking play of its own cards
        own = view_of(farmer, match.match_id)["hand"][:1]
        match.refused(match.command(farmer, {"action": "play", "cards": own}), 422, "not_your_turn")
    with unchanged(match):
        match.refused(match.command(farmer, {"action": "pass"}), 422, "not_your_turn")
    with unchanged(match):
        match.refused(match.command(farmer, {"action": "resume"}), 422)
    match.no_leaks()


def test_stale_expected_version_is_a_409(match):
    hand = match.landlord_view["hand"]
    legal = match.landlord.get(f"{match.path}/legal").json
    stale = match.version - 1
    with unchanged(match):
        match.refused(
            match.command(
                match.landlord,
                {"action": "play", "cards": legal["plays"][0]["cards"], "expected_version": stale},
            ),
            409,
            "version_conflict",
        )
    with unchanged(match):
        match.refused(
            match.command(
                match.landlord,
                {"action": "play", "cards": hand[:1], "expected_version": match.version + 5},
            ),
            409,
            "version_conflict",
        )
    match.no_leaks()


# --- who may do what ---------------------------------------------------------------------


def test_a_player_with_no_seat_may_not_act_or_see_legal_plays(match):
    with unchanged(match):
        match.refused(
            match.command(
                match.onlooker, {"action": "play", "cards": match.landlord_view["hand"][:1]}
            ),
            403,
            "not_seated",
        )
    with unchanged(match):
        match.refused(
            match.onlooker.get(f"{match.path}/legal", at=match.version), 403, "not_seated"
        )
    view = view_of(match.onlooker, match.match_id)
    assert (
        view["seat"] is None
        and view["hand"] == []
        and view["bottom"] is None
        and view["actions"] == []
    )
    match.no_leaks()


def test_another_seats_token_acts_only_for_its_own_seat(match):
    """A farmer's token cannot make the landlord's move: the command is its own seat's,
    out of turn; and its legal plays are none."""
    farmer = match.farmer(2)
    landlord_cards = match.landlord_view["hand"][:1]
    with unchanged(match):
        problem = match.refused(
            match.command(farmer, {"action": "play", "cards": landlord_cards}), 422
        )
    assert problem["code"] in ("not_your_turn", "cards_not_in_hand")
    legal = farmer.get(f"{match.path}/legal").json
    assert legal["seat"] == farmer.seat and legal["plays"] == [] and legal["can_pass"] is False
    match.no_leaks()


def test_taking_seats_is_guarded(match):
    with unchanged(match):
        match.refused(
            match.onlooker.post(f"{match.path}/seats", {"seat": 0}, at=match.version), 422
        )
    with unchanged(match):
        match.refused(
            match.onlooker.post(f"{match.path}/seats", {"seat": 9}, at=match.version), 422
        )
    with unchanged(match):
        match.refused(
            match.onlooker.post(f"{match.path}/seats", {"seat": 0, "x": 1}, at=match.version), 422
        )
    with unchanged(match):
        match.refused(
            match.api.request("POST", f"{match.path}/seats", OPERATOR_TOKEN, json_body={"seat": 0}),
            403,
        )


def test_seating_rules(client):
    api = ClientApi(client)
    owner = new_player(api, "owner")
    match_id = new_match(owner)
    other = new_player(api, "other")
    assert owner.post(f"/v1/matches/{match_id}/seats", {"seat": 0}).status == 201
    before = stream_fingerprint(api, match_id)
    assert_problem(
        other.post(f"/v1/matches/{match_id}/seats", {"seat": 0}, at=before[0]), 422, "seat_taken"
    )
    assert_problem(
        owner.post(f"/v1/matches/{match_id}/seats", {"seat": 1}, at=before[0]),
        422,
        "already_seated",
    )
    assert stream_fingerprint(api, match_id) == before


@pytest.mark.parametrize(
    "method, suffix",
    [
        ("GET", ""),
        ("GET", "/legal"),
        ("GET", "/events"),
        ("GET", "/record"),
        ("POST", "/commands"),
        ("POST", "/seats"),
    ],
)
def test_missing_or_forged_tokens_are_a_401_with_a_challenge(match, method, suffix):
    body = (
        {"action": "pass"}
        if suffix == "/commands"
        else ({"seat": 0} if suffix == "/seats" else None)
    )
    for headers in (
        {},
        {"Authorization": "Bearer forged-token"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
        {"Authorization": OPERATOR_TOKEN},
    ):
        with unchanged(match):
            reply = match.api.request(
                method, f"{match.path}{suffix}", json_body=body, headers=headers
            )
            match.refused(reply, 401)
            assert reply.headers.get("WWW-Authenticate", "").startswith("Bearer"), reply.headers
            assert reply.json["code"] in ("unauthorized", "invalid_token")


def test_unauthenticated_list_and_create_are_401(match):
    match.refused(match.api.request("GET", "/v1/matches"), 401, "unauthorized")
    match.refused(match.api.request("POST", "/v1/matches", json_body={}), 401, "unauthorized")
    match.refused(match.api.request("GET", "/v1/matches", "forged"), 401, "invalid_token")


def test_player_tokens_may_not_use_operator_endpoints(match):
    for suffix in ("events", "audit"):
        for player in (match.landlord, match.onlooker):
            with unchanged(match):
                match.refused(
                    player.get(f"/v1/admin/matches/{match.match_id}/{suffix}", at=match.version),
                    403,
                    "operator_required",
                )
        reply = match.api.request("GET", f"/v1/admin/matches/{match.match_id}/{suffix}")
        match.refused(reply, 401)
        assert reply.headers.get("WWW-Authenticate", "").startswith("Bearer")
    match.no_leaks()


def test_the_operator_may_not_act_for_a_seat(match):
    with unchanged(match):
        reply = match.api.request(
            "POST", f"{match.path}/commands", OPERATOR_TOKEN, json_body={"action": "pass"}
        )
        match.refused(reply, 403, "player_required")


def test_the_record_is_not_available_before_the_end(match):
    for player in (*match.players, match.onlooker):
        with unchanged(match):
            match.refused(
                player.get(f"{match.path}/record", at=match.version), 403, "record_not_available"
            )
    match.no_leaks()


@pytest.mark.parametrize(
    "target, code",
    [
        (UNKNOWN, "match_not_found"),
        ("not-a-uuid", "malformed_id"),
        ("1234", "malformed_id"),
        (UNKNOWN.upper() + "0", "malformed_id"),
    ],
)
def test_unknown_or_malformed_match_ids_are_a_404(match, target, code):
    player = match.landlord
    for method, suffix, body in [
        ("GET", "", None),
        ("GET", "/legal", None),
        ("GET", "/events", None),
        ("GET", "/record", None),
        ("POST", "/commands", {"action": "pass"}),
        ("POST", "/seats", {"seat": 0}),
    ]:
        reply = player.call(method, f"/v1/matches/{target}{suffix}", body, at=match.version)
        problem = match.refused(reply, 404, code)
        if code == "malformed_id":
            assert problem["detail"] == "the match id in the path is not a UUID"
    for suffix in ("events", "audit"):
        reply = match.api.request("GET", f"/v1/admin/matches/{target}/{suffix}", OPERATOR_TOKEN)
        match.refused(reply, 404, code)
    match.no_leaks()


@pytest.mark.parametrize("query", ["after=-1", "after=x", "wait=31", "wait=-1", "wait=abc"])
def test_bad_event_queries_are_422(match, query):
    match.refused(match.landlord.get(f"{match.path}/events?{query}", at=match.version), 422)


@pytest.mark.parametrize(
    "body",
    [
        {"ruleset": "texas"},
        {"unit": "0"},
        {"unit": "1.234"},
        {"unit": 1},
        {"cap": "-5"},
        {"rake": "1.5"},
        {"turn_seconds": 0},
        {"bombs_double": "maybe"},
        {"bot_level": "expert"},
        {"seats": 4},
    ],
)
def test_bad_match_options_are_422(client, body):
    api = ClientApi(client)
    player = new_player(api, "options")
    assert_problem(player.post("/v1/matches", body, at=0), 422)


def test_bad_player_names_are_422(client):
    api = ClientApi(client)
    for body in (
        {"name": ""},
        {"name": "x" * 65},
        {"name": 5},
        {"name": "a", "admin": True},
        {"name": "nul\u0000"},
    ):
        assert_problem(api.request("POST", "/v1/players", json_body=body), 422)


def test_method_not_allowed_is_a_problem(match):
    reply = match.api.request("DELETE", match.path, match.landlord.token)
    match.refused(reply, 405)
    assert "GET" in reply.headers.get("Allow", "")


def test_leak_check_flags_a_hidden_card(match):
    """The checker these tests rely on: another seat's hand, received by a farmer, is a leak."""
    farmer = match.farmer()
    hidden = match.hidden_from(farmer)
    probe = Observer(match.api, farmer.token, farmer.player_id, "probe", seat=farmer.seat)
    probe.record("forged body", match.version, {"payload": {"cards": hidden[:3]}})
    probe.record("forged text", match.version, f"you may not know of {hidden[0]}")
    knowledge = Knowledge(operator_events(match.api, match.match_id)["events"])
    assert len(leaks(probe, knowledge)) == 2
    # A card the farmer named in its own request may come back in the answer; another may not.
    echo = Observer(match.api, farmer.token, farmer.player_id, "echo", seat=farmer.seat)
    echo.record(
        "echoed", match.version, f"the hand does not hold: {hidden[0]}", sent=Counter([hidden[0]])
    )
    assert leaks(echo, knowledge) == []
    echo.record(
        "not sent",
        match.version,
        f"the hand does not hold: {hidden[0]}, {hidden[1]}",
        sent=Counter([hidden[0]]),
    )
    assert len(leaks(echo, knowledge)) == 1
