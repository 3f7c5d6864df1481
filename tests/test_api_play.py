"""Whole hands over the REST API, as players see them.

Four players (and one onlooker with no seat) play a hand to the end over real HTTP, each
choosing among the actions its own view offers and the plays ``/legal`` lists, while each
also follows the match's event stream (SSE) and polls ``/events``. Every body each of them
receives is kept, and afterwards checked against what the operator's unredacted events say
that player could know at that version (docs/rules.md §6). Then the result (zero-sum
settlement), each seat's hand record (``ddz-hand/1``, verified) and the operator's audit.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from api_support import (
    ClientApi,
    HttpApi,
    Knowledge,
    StreamReader,
    advance_to_playing,
    assert_problem,
    leaks,
    new_match,
    new_player,
    operator_events,
    run_bots,
    seated_match,
    seed_where,
    take_seat,
    to_act,
    view_of,
    zero_sum,
)
from servers import OPERATOR_TOKEN

from service.app import commands as commands_module
from service.game.record import verify
from service.rules import counts_of, report_units


def landlord_can_report(d, ruleset) -> bool:
    """The first bidder (the marked card's holder) with the bottom holds a 报到 unit."""
    return bool(report_units(counts_of(d.hands[d.marked_seat] + d.bottom), ruleset))


def use_seed(monkeypatch, seed: bytes) -> None:
    """The next deal of the app (in this process) uses ``seed`` instead of a fresh one."""
    assert hasattr(commands_module, "new_seed"), (
        "the command path no longer draws the deal's seed with app.commands.new_seed"
    )
    monkeypatch.setattr(commands_module, "new_seed", lambda: seed)


class Hand:
    """Drives one match from its seats' own views; keeps what the test checks afterwards."""

    def __init__(self, match_id: str, seats, onlooker, rng: random.Random, script: dict):
        self.match_id, self.seats, self.onlooker, self.rng, self.script = (
            match_id,
            seats,
            onlooker,
            rng,
            script,
        )
        self.path = f"/v1/matches/{match_id}"
        self.phases_seen: list[str] = []
        self.events_after = {id(o): 0 for o in [*seats, onlooker]}

    def views(self) -> dict[int, dict]:
        views = {}
        for player in self.seats:
            reply = player.get(self.path)
            assert reply.status == 200, reply.text
            views[player.seat] = reply.json
        reply = self.onlooker.get(self.path)
        assert reply.status == 200, reply.text
        assert (
            reply.json["seat"] is None and reply.json["hand"] == [] and reply.json["actions"] == []
        )
        return views

    def poll_events(self) -> None:
        for player in [*self.seats, self.onlooker]:
            after = self.events_after[id(player)]
            reply = player.get(f"{self.path}/events?after={after}")
            assert reply.status == 200, reply.text
            page = reply.json
            versions = [e["version"] for e in page["events"]]
            assert versions == list(range(after + 1, after + 1 + len(versions)))
            if versions:
                self.events_after[id(player)] = versions[-1]

    def choose(self, player, view: dict) -> dict:
        kinds = {a["action"]: a for a in view["actions"]}
        if "bid" in kinds:
            choices = kinds["bid"]["choices"]
            first = all(b is None for b in view["bids"])
            if first and "first_bid" in self.script:
                assert self.script["first_bid"] in choices
                return {"action": "bid", "value": self.script["first_bid"]}
            return {"action": "bid", "value": self.rng.choice(choices)}
        if "show_hand" in kinds:
            return {"action": "show_hand", "value": self.script.get("show_hand", True)}
        if "report" in kinds:
            return {"action": "report", "value": self.script.get("report", "play")}
        assert kinds and kinds.keys() <= {"play", "pass"}, view["actions"]
        reply = player.get(f"{self.path}/legal")
        assert reply.status == 200, reply.text
        legal = reply.json
        assert legal["version"] == view["version"] and legal["seat"] == player.seat
        assert legal["can_pass"] == ("pass" in kinds)
        # The view offers play exactly when /legal has a play (a seat that beats nothing passes).
        assert ("play" in kinds) == bool(legal["plays"]), (view["actions"], len(legal["plays"]))
        hand = Counter(view["hand"])
        for play in legal["plays"]:
            assert not Counter(play["cards"]) - hand, f"/legal offers cards not in the hand: {play}"
        if view["lead"] is None:
            assert legal["plays"], "the seat that leads has no legal play"
        if legal["can_pass"] and (not legal["plays"] or self.rng.random() < 0.2):
            return {"action": "pass"}
        plays = legal["plays"]
        play = (
            max(plays, key=lambda p: len(p["cards"]))
            if self.rng.random() < 0.6
            else self.rng.choice(plays)
        )
        return {"action": "play", "cards": play["cards"]}

    def play(self, max_steps: int = 500) -> dict[int, dict]:
        for step in range(max_steps):
            views = self.views()
            versions = {v["version"] for v in views.values()}
            assert len(versions) == 1, "the seats see different versions with nobody acting"
            any_view = next(iter(views.values()))
            self.phases_seen.append(any_view["phase"])
            if any_view["phase"] == "ended":
                return views
            turn = any_view["turn"]
            acting = [seat for seat, v in views.items() if v["actions"]]
            assert acting == [turn], f"only the seat to act has actions: {acting} vs turn {turn}"
            if step % 3 == 0:
                self.poll_events()
                idle = self.seats[(turn + 1) % 4]
                reply = idle.get(f"{self.path}/legal")
                assert (
                    reply.status == 200
                    and reply.json["plays"] == []
                    and reply.json["can_pass"] is False
                )
            player = self.seats[turn]
            view = views[turn]
            body = {**self.choose(player, view), "expected_version": view["version"]}
            reply = player.post(f"{self.path}/commands", body)
            assert reply.status == 200, f"{body} refused: {reply.text}"
            result = reply.json
            versions = [e["version"] for e in result["events"]]
            assert versions and versions == list(range(view["version"] + 1, result["version"] + 1))
            assert result["view"]["version"] == result["version"]
        raise AssertionError("the hand did not end")


def play_full_hand(api, base_url: str, ruleset: str, rng: random.Random, script: dict) -> dict:
    players = [new_player(api, f"seat{i}") for i in range(4)]
    onlooker = new_player(api, "onlooker")
    match_id = new_match(players[0], ruleset=ruleset)
    readers = [StreamReader(base_url, match_id, onlooker)]
    readers[0].start()
    for seat, player in enumerate(players):
        take_seat(player, match_id, seat)
        reader = StreamReader(base_url, match_id, player)
        reader.start()
        readers.append(reader)

    hand = Hand(match_id, players, onlooker, rng, script)
    final = hand.play()
    hand.poll_events()
    for reader in readers:
        reader.finish()

    # The result: the same for every seat, zero-sum, the seed revealed.
    results = [v["result"] for v in final.values()]
    assert all(r == results[0] and r is not None for r in results)
    zero_sum(results[0])
    assert all(v["seed"] and v["turn"] is None and v["actions"] == [] for v in final.values())

    everything = operator_events(api, match_id)
    events = everything["events"]
    knowledge = Knowledge(events)
    assert knowledge.end_version is not None
    ended = next(e for e in events if e["type"] == "hand_ended")
    assert ended["payload"]["result"] == results[0]
    last_play = (
        [e for e in events if e["type"] == "play"][-1]
        if script.get("report") != "no_play"
        else None
    )
    if last_play is not None:
        landlord = results[0]["landlord"]
        assert results[0]["winner"] == (
            "landlord" if last_play["payload"]["seat"] == landlord else "farmers"
        )

    # The hand record: for each seated player, verified on its own; not for the onlooker.
    for player in players:
        reply = player.get(f"/v1/matches/{match_id}/record", at=final[0]["version"])
        assert reply.status == 200, reply.text
        record = reply.json
        assert record["format"] == "ddz-hand/1"
        assert record["seed"] == final[0]["seed"] and record["result"] == results[0]
        verify(record)
    assert_problem(onlooker.get(f"/v1/matches/{match_id}/record", at=knowledge.end_version), 403)
    audit = api.request("GET", f"/v1/admin/matches/{match_id}/audit", OPERATOR_TOKEN)
    assert audit.status == 200 and audit.json["ok"] is True and audit.json["discrepancy"] is None, (
        audit.text
    )

    # The streams: a snapshot first, then every event once, in order, across reconnections.
    for reader in readers:
        first = reader.connections[0]
        assert first[0].kind == "retry"
        snapshot = next(m for m in first if m.kind == "message")
        assert snapshot.event == "snapshot" and int(snapshot.id) == snapshot.json["version"]
        assert all(m.event != "snapshot" for c in reader.connections[1:] for m in c), (
            "snapshot on a resumed stream"
        )
        ids = reader.event_ids()
        start = int(snapshot.id)
        assert ids == list(range(start + 1, knowledge.end_version + 1)), f"stream ids {ids}"
        for message in reader.messages()[1:]:
            assert (
                message.event == message.json["type"] and int(message.id) == message.json["version"]
            )

    # Nobody ever received a card it could not see at that moment.
    found = [problem for player in [*players, onlooker] for problem in leaks(player, knowledge)]
    assert not found, "\n".join(found[:30])
    return {
        "hand": hand,
        "events": events,
        "result": results[0],
        "readers": readers,
        "players": players,
    }


@pytest.mark.slow
def test_full_hand_platform_with_show_hand_and_report(live_server, monkeypatch):
    """shanghai-platform: the first bidder bids 3 (头撂), shows the hand (摊打), declares 报到
    and plays on (打): the landlord's hand and the reported cards become public."""
    use_seed(monkeypatch, seed_where(landlord_can_report, "shanghai-platform"))
    api = HttpApi(live_server)
    played = play_full_hand(
        api,
        live_server,
        "shanghai-platform",
        random.Random(1),
        {"first_bid": 3, "show_hand": True, "report": "play"},
    )
    phases = played["hand"].phases_seen
    assert {"bidding", "show_hand", "report", "playing", "ended"} <= set(phases)
    factors = played["result"]["factors"]
    assert factors["first_bid_three"] and factors["show_hand"] and factors["report"] == "play"
    report = next(e for e in played["events"] if e["type"] == "report")
    assert report["payload"]["cards"], "报到 shows the reported cards"
    # Each seat saw the reported cards and the shown hand in its view once they were public.
    for player in played["players"]:
        views = [
            r.body
            for r in player.received
            if r.what.startswith("GET /v1/matches/")
            and isinstance(r.body, dict)
            and r.body.get("phase") == "playing"
        ]
        assert views and all(v["landlord_hand"] is not None and v["reported_cards"] for v in views)


@pytest.mark.slow
def test_full_hand_local_ruleset(live_server, monkeypatch):
    """shanghai-local, bids chosen at random among the offered ones, the marked card a joker (明王)."""
    use_seed(
        monkeypatch,
        seed_where(
            lambda d, r: d.marked_card.is_joker and not landlord_can_report(d, r), "shanghai-local"
        ),
    )
    api = HttpApi(live_server)
    played = play_full_hand(api, live_server, "shanghai-local", random.Random(7), {})
    assert played["result"]["factors"]["marked_joker"] is True
    assert all(e["payload"].get("by", "player") == "player" for e in played["events"])
    farmers_saw_bottom = [
        r
        for p in played["players"]
        if p.seat != played["result"]["landlord"]
        for r in p.received
        if isinstance(r.body, dict) and r.body.get("bottom")
    ]
    assert not farmers_saw_bottom


def test_report_then_no_play_ends_the_hand_at_once(client, monkeypatch):
    """报到 then 不打: the hand ends with a landlord win by the 报到 formula; the record
    verifies and the reported cards are public while the rest of the hand stays hidden."""
    use_seed(monkeypatch, seed_where(landlord_can_report, "shanghai-platform"))
    api = ClientApi(client)
    players = [new_player(api, f"np{i}") for i in range(4)]
    match_id = new_match(players[0])
    for seat, player in enumerate(players):
        take_seat(player, match_id, seat)
    hand = Hand(
        match_id,
        players,
        new_player(api, "np-onlooker"),
        random.Random(3),
        {"first_bid": 3, "show_hand": False, "report": "no_play"},
    )
    final = hand.play()
    result = final[0]["result"]
    assert result["winner"] == "landlord" and result["factors"]["report"] == "no_play"
    assert result["factors"]["report_units"] >= 1
    zero_sum(result)
    net = [float(x) for x in result["settlement"]["net"]]
    assert net[result["landlord"]] > 0 and all(
        net[s] < 0 for s in range(4) if s != result["landlord"]
    )
    assert all(v["reported_cards"] for v in final.values())
    events = operator_events(api, match_id)["events"]
    knowledge = Knowledge(events)
    assert not [e for e in events if e["type"] == "play"]
    for player in players:
        reply = player.get(f"/v1/matches/{match_id}/record", at=final[0]["version"])
        assert reply.status == 200, reply.text
        verify(reply.json)
    audit = api.request("GET", f"/v1/admin/matches/{match_id}/audit", OPERATOR_TOKEN)
    assert audit.status == 200 and audit.json["ok"] is True, audit.text
    found = [
        problem for player in [*players, hand.onlooker] for problem in leaks(player, knowledge)
    ]
    assert not found, "\n".join(found[:30])


@pytest.fixture()
def worker_env(monkeypatch, app, database_url, own_redis_url):
    """The app enqueues on a Redis database of this test's own (no job of another test
    is left there for the worker to take), and the RQ jobs (which read DATABASE_URL and
    REDIS_URL) run on it and on the test database."""
    import redis as redis_lib

    from service.app.work import enqueuer
    from workers import context as worker_context

    connection = redis_lib.Redis.from_url(own_redis_url)
    monkeypatch.setattr(app.extensions["ddz"], "redis", connection)
    monkeypatch.setattr(app.extensions["ddz"].commands, "on_appended", enqueuer(connection))
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("REDIS_URL", own_redis_url)
    worker_context.context.cache_clear()
    yield own_redis_url
    try:
        worker_context.context().pool.close()
    finally:
        worker_context.context.cache_clear()
        connection.close()


def test_three_bot_seats_play_a_hand_to_the_end(client, worker_env):
    """One player and three system bots: the worker plays the bots' turns between the
    player's commands; the player never waits on a bot and never sees a bot's cards."""
    api = ClientApi(client)
    human = new_player(api, "human")
    match_id = new_match(human)
    take_seat(human, match_id, 2)
    for seat in (0, 1, 3):
        reply = human.post(f"/v1/matches/{match_id}/seats", {"seat": seat, "bot": True})
        assert reply.status == 201, reply.text
    path = f"/v1/matches/{match_id}"
    rng = random.Random(11)
    human_turns = 0
    for _ in range(300):
        run_bots(worker_env)
        reply = human.get(path)
        assert reply.status == 200, reply.text
        view = reply.json
        if view["phase"] == "ended":
            break
        assert view["turn"] == 2 and view["actions"], (
            f"after the worker ran, a bot still has the turn: {view['turn']}"
        )
        human_turns += 1
        kinds = {a["action"]: a for a in view["actions"]}
        if "bid" in kinds:
            body = {"action": "bid", "value": rng.choice(kinds["bid"]["choices"])}
        elif "show_hand" in kinds:
            body = {"action": "show_hand", "value": True}
        elif "report" in kinds:
            body = {"action": "report", "value": "play"}
        else:
            legal = human.get(f"{path}/legal").json
            if legal["can_pass"] and (not legal["plays"] or rng.random() < 0.2):
                body = {"action": "pass"}
            else:
                body = {
                    "action": "play",
                    "cards": max(legal["plays"], key=lambda p: len(p["cards"]))["cards"],
                }
        reply = human.post(f"{path}/commands", {**body, "expected_version": view["version"]})
        assert reply.status == 200, reply.text
    else:
        raise AssertionError("the hand did not end")
    assert human_turns >= 1
    reply = human.get(f"{path}/events?after=0")
    assert reply.status == 200
    events = operator_events(api, match_id)["events"]
    bot_actions = [e for e in events if e["payload"].get("by") == "bot"]
    assert bot_actions and all(e["payload"]["seat"] != 2 for e in bot_actions)
    assert all(e["payload"]["seat"] == 2 for e in events if e["payload"].get("by") == "player")
    zero_sum(view["result"])
    record = human.get(f"{path}/record", at=view["version"])
    assert record.status == 200, record.text
    assert [s["bot"] for s in record.json["seats"]] == [True, True, False, True]
    verify(record.json)
    audit = api.request("GET", f"/v1/admin/matches/{match_id}/audit", OPERATOR_TOKEN)
    assert audit.status == 200 and audit.json["ok"] is True, audit.text
    knowledge = Knowledge(events)
    found = leaks(human, knowledge)
    assert not found, "\n".join(found[:30])


def test_the_list_shows_each_match_as_it_is_now(client):
    api = ClientApi(client)
    owner = new_player(api, "lister")
    open_id = new_match(owner)
    players, playing_id = seated_match(api, "listed")
    bidder, _ = to_act(players, playing_id)
    assert (
        bidder.post(f"/v1/matches/{playing_id}/commands", {"action": "bid", "value": 1}).status
        == 200
    )
    now = view_of(players[0], playing_id)

    listed = owner.get("/v1/matches?limit=200").json["matches"]
    by_id = {m["match_id"]: m for m in listed}
    assert [m["match_id"] for m in listed].index(playing_id) < [
        m["match_id"] for m in listed
    ].index(open_id)
    assert by_id[open_id]["status"] == "open" and by_id[open_id]["seats"] == [None] * 4
    entry = by_id[playing_id]
    assert (entry["status"], entry["phase"], entry["version"]) == (
        "playing",
        now["phase"],
        now["version"],
    )
    assert [s["player"] for s in entry["seats"]] == [p.player_id for p in players]
    playing = [
        m["match_id"] for m in owner.get("/v1/matches?status=playing&limit=200").json["matches"]
    ]
    assert playing_id in playing and open_id not in playing


def test_a_refused_play_names_its_cards_as_the_api_writes_them(client):
    """invalid_combination and does_not_beat name the cards in card codes (``S3``,
    ``RJ``), as hands and plays are written everywhere in the API, not in the rules'
    rank strings (``3R``)."""
    api = ClientApi(client)
    players, match_id = seated_match(api, "coded")
    view = advance_to_playing(players, match_id)
    landlord, hand = players[view["seat"]], view["hand"]
    # The hand is sorted: its lowest and highest cards differ in rank, so are no pair.
    reply = landlord.post(
        f"/v1/matches/{match_id}/commands",
        {"action": "play", "cards": [hand[0], hand[-1]], "expected_version": view["version"]},
    )
    detail = assert_problem(reply, 422, "invalid_combination")["detail"]
    assert detail.startswith(f"{hand[0]} {hand[-1]}: "), detail

    reply = landlord.post(
        f"/v1/matches/{match_id}/commands",
        {"action": "play", "cards": [hand[-1]], "expected_version": view["version"]},
    )
    assert reply.status == 200, reply.text
    follower, follower_view = to_act(players, match_id)
    lowest = follower_view["hand"][0]  # no higher than the landlord's highest card
    reply = follower.post(
        f"/v1/matches/{match_id}/commands",
        {"action": "play", "cards": [lowest], "expected_version": follower_view["version"]},
    )
    detail = assert_problem(reply, 422, "does_not_beat")["detail"]
    assert detail == f"{lowest} does not beat the single {hand[-1]}", detail
