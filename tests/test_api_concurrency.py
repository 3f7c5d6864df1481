"""Concurrent commands over real HTTP (``live_server``, a threaded server): at one
``expected_version`` exactly one command wins, every other gets a 409 problem, and the
match's event stream stays gapless (versions 1..N, no hole, no repeat) — as the operator,
``/events`` and the SSE stream all show it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from api_support import (
    HttpApi,
    Knowledge,
    StreamReader,
    assert_problem,
    leaks,
    new_match,
    new_player,
    operator_events,
    seated_match,
    to_act,
    view_of,
    wait_for,
)

THREADS = 8


def race(player, match_id: str, bodies: list[dict], expected_version: int | None):
    """Sends ``bodies`` at once (one thread each, released together by a barrier)."""
    barrier = threading.Barrier(len(bodies))

    def send(body):
        if expected_version is not None:
            body = {**body, "expected_version": expected_version}
        barrier.wait()
        return player.post(f"/v1/matches/{match_id}/commands", body, at=expected_version)

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


def options(player, match_id: str, view: dict) -> list[dict]:
    """Distinct legal commands for the seat to act (as many as there are, up to THREADS)."""
    kinds = {a["action"]: a for a in view["actions"]}
    if "bid" in kinds:
        return [{"action": "bid", "value": v} for v in kinds["bid"]["choices"]]
    if "show_hand" in kinds:
        return [{"action": "show_hand", "value": v} for v in (True, False)]
    if "report" in kinds:
        return [{"action": "report", "value": "play"}, {"action": "report", "value": "decline"}]
    legal = player.get(f"/v1/matches/{match_id}/legal").json
    found = [{"action": "play", "cards": p["cards"]} for p in legal["plays"][:THREADS]]
    if legal["can_pass"]:
        found.append({"action": "pass"})
    return found


def test_one_winner_per_version_and_a_gapless_stream(live_server):
    api = HttpApi(live_server)
    players, match_id = seated_match(api, "race")
    start = view_of(players[0], match_id)["version"]
    watcher = StreamReader(live_server, match_id, players[1], until="never")
    watcher.start()
    # The stream's events start after its snapshot: race only once it has that.
    wait_for(lambda: bool(watcher.messages()))
    winners = []
    try:
        for _ in range(14):
            player, view = to_act(players, match_id)
            if view["phase"] == "ended":
                break
            choices = options(player, match_id, view)
            bodies = [choices[i % len(choices)] for i in range(THREADS)]
            replies = race(player, match_id, bodies, view["version"])
            ok = [r for r in replies if r.status == 200]
            assert len(ok) == 1, [(r.status, r.text) for r in replies]
            for reply in replies:
                if reply.status != 200:
                    assert_problem(reply, 409, "version_conflict")
            result = ok[0].json
            versions = [e["version"] for e in result["events"]]
            assert versions == list(range(view["version"] + 1, result["version"] + 1))
            winners.append(result)
            assert view_of(players[0], match_id)["version"] == result["version"]
    finally:
        # Let the stream catch up with the last version, then stop it.
        final = view_of(players[0], match_id)["version"]
        for _ in range(100):
            if watcher.event_ids() and watcher.event_ids()[-1] >= final:
                break
            threading.Event().wait(0.05)
        watcher.stop_event.set()
        watcher.finish()

    assert len(winners) >= 10
    document = operator_events(api, match_id)
    versions = [e["version"] for e in document["events"]]
    assert versions == list(range(1, document["version"] + 1)), versions
    assert document["version"] == start + sum(len(w["events"]) for w in winners)
    # The winners' events are exactly what was stored after the start, in order.
    stored_after = [e for e in document["events"] if e["version"] > start]
    assert [(e["type"], e["version"]) for e in stored_after] == [
        (e["type"], e["version"]) for w in winners for e in w["events"]
    ]
    page = players[2].get(f"/v1/matches/{match_id}/events?after=0").json
    assert [e["version"] for e in page["events"]] == versions
    ids = watcher.event_ids()
    assert ids == list(range(start + 1, document["version"] + 1)), ids
    knowledge = Knowledge(document["events"])
    found = [p for player in players for p in leaks(player, knowledge)]
    assert not found, "\n".join(found[:20])


def test_racing_seats_at_one_version(live_server):
    """All four seats send at the same version: only the seat to act can win, once; the
    others are refused (409, or 422 not_your_turn when they were decided first)."""
    api = HttpApi(live_server)
    players, match_id = seated_match(api, "seats")
    for _ in range(4):
        player, view = to_act(players, match_id)
        version = view["version"]
        barrier = threading.Barrier(THREADS)

        def send(i, barrier=barrier, version=version):
            sender = players[i % 4]
            barrier.wait()
            return sender, sender.post(
                f"/v1/matches/{match_id}/commands",
                {"action": "bid", "value": 0, "expected_version": version},
                at=version,
            )

        with ThreadPoolExecutor(THREADS) as pool:
            results = list(pool.map(send, range(THREADS)))
        ok = [(s, r) for s, r in results if r.status == 200]
        assert len(ok) == 1 and ok[0][0] is player, [(s.seat, r.status, r.text) for s, r in results]
        for sender, reply in results:
            if reply.status == 200:
                continue
            if reply.status == 422:
                assert sender is not player
                assert_problem(reply, 422, "not_your_turn")
            else:
                assert_problem(reply, 409, "version_conflict")
        if view_of(players[0], match_id)["phase"] != "bidding":
            break
    document = operator_events(api, match_id)
    assert [e["version"] for e in document["events"]] == list(range(1, document["version"] + 1))


def test_without_expected_version_a_command_is_decided_on_the_latest_state(live_server):
    """No expected_version: a lost race is decided again on the new state, so eight copies
    of the same bid from the seat to act apply once; the others are refused by the rules."""
    api = HttpApi(live_server)
    players, match_id = seated_match(api, "noexp")
    player, view = to_act(players, match_id)
    replies = race(player, match_id, [{"action": "bid", "value": 1}] * THREADS, None)
    ok = [r for r in replies if r.status == 200]
    assert len(ok) == 1, [(r.status, r.text) for r in replies]
    for reply in replies:
        if reply.status != 200:
            assert_problem(reply, 422, "not_your_turn")
    document = operator_events(api, match_id)
    assert document["version"] == view["version"] + 1
    assert [e["type"] for e in document["events"]][-1] == "bid"


def test_racing_for_seats_deals_once(live_server):
    """Eight players race for the four seats of a new match (any free seat): four sit, each
    once, the hand is dealt exactly once, and the stream has no hole or repeat."""
    api = HttpApi(live_server)
    players = [new_player(api, f"seat-race{i}") for i in range(THREADS)]
    match_id = new_match(players[0])
    barrier = threading.Barrier(THREADS)

    def sit(player):
        barrier.wait()
        return player.post(f"/v1/matches/{match_id}/seats", {}, at=None)

    with ThreadPoolExecutor(THREADS) as pool:
        replies = list(pool.map(sit, players))
    seated = [r.json["seat"] for r in replies if r.status == 201]
    assert sorted(seated) == [0, 1, 2, 3], [(r.status, r.text[:120]) for r in replies]
    for reply in replies:
        if reply.status != 201:
            assert reply.status in (409, 422), reply.text
            assert_problem(reply, reply.status)
            assert reply.json["code"] in (
                "match_full",
                "seat_taken",
                "wrong_phase",
                "version_conflict",
            )
    document = operator_events(api, match_id)
    types = [e["type"] for e in document["events"]]
    assert [e["version"] for e in document["events"]] == list(range(1, document["version"] + 1))
    assert types.count("seat_taken") == 4 and types.count("hand_dealt") == 1
    players_seated = [
        e["payload"]["player"] for e in document["events"] if e["type"] == "seat_taken"
    ]
    assert len(set(players_seated)) == 4
