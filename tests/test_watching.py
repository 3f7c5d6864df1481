"""Watching a public table (docs/tables.md, "Watching"): over whole hands with 头撂, 摊打
and 报到, every item a watcher receives — the page and the stream, without a token — is
checked against what the operator's events say an onlooker may know at that version, and
the stream carries what the pages do; a private table is not watched; a finished hand's
replay is public (in the API and on a page), but not before its end or for a private
table's hand. Real RQ workers in burst mode, in this process (the fixtures of ``jobs.py``)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from api_support import Knowledge, Observer, bearer, choice, leaks, seed_where
from jobs import events, join, new_player, new_table, run_burst, worker_app
from servers import OPERATOR_TOKEN

import service.app.tables
from service.rules import counts_of, report_units

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wapp(worker_database_url, worker_redis_url):
    """As the jobs plugin's app, without rate limits (the seats poll as fast as they can)."""
    app = worker_app(worker_database_url, worker_redis_url, rate_limits=False)
    yield app
    app.extensions["ddz"].close()


def first_bidder_reports(d, ruleset) -> bool:
    """The first bidder (the marked card's holder) with the bottom holds a 报到 unit."""
    return bool(report_units(counts_of(d.hands[d.marked_seat] + d.bottom), ruleset))


def play_showing_and_reporting(api, match_id: str, tokens: dict[str, str], report: str) -> None:
    """The four people play the hand: the first bid is 3 (头撂), the landlord shows its
    hand (摊打) and declares 报到 (``report``: ``play`` or ``no_play``)."""
    for _ in range(800):
        any_token = next(iter(tokens.values()))
        view = api.get(f"/v1/matches/{match_id}", headers=bearer(any_token)).json
        if view["phase"] == "ended":
            return
        token = tokens[view["seats"][view["turn"]]["player"]]
        view = api.get(f"/v1/matches/{match_id}", headers=bearer(token)).json
        kinds = {a["action"]: a for a in view["actions"]}
        if "bid" in kinds:
            body = {"action": "bid", "value": 3}
        elif "show_hand" in kinds:
            body = {"action": "show_hand", "value": True}
        elif "report" in kinds:
            body = {"action": "report", "value": report}
        else:
            legal = api.get(f"/v1/matches/{match_id}/legal", headers=bearer(token)).json
            body = choice(view["actions"], lambda legal=legal: legal)
        body["expected_version"] = view["version"]
        r = api.post(f"/v1/matches/{match_id}/commands", json=body, headers=bearer(token))
        assert r.status_code == 200, (body, r.json)
    raise AssertionError("the hand did not end")


def watch_page(api, table_id: str, after: str | None) -> dict:
    """A page of the watcher's items, waiting a moment for the first (the feed may lag the
    commit under load)."""
    query = {"wait": 2} | ({} if after is None else {"after": after})
    r = api.get(f"/v1/tables/{table_id}/watch", query_string=query)
    assert r.status_code == 200, r.json
    return r.json


def stream_items(api, table_id: str) -> list[dict]:
    """A watcher stream's items, until the server ends it (after its stream_seconds)."""
    response = api.get(f"/v1/tables/{table_id}/watch/stream", buffered=True)
    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    items = []
    for block in response.get_data(as_text=True).split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            item = json.loads(fields["data"])
            assert fields["id"] == item["id"] and fields["event"] == item["type"]
            items.append(item)
    return items


def test_a_watcher_sees_whole_hands_with_show_hand_and_report_as_onlookers_do(
    api, rconn, jobs_env, monkeypatch
):
    seeds = iter(
        [
            seed_where(first_bidder_reports, "shanghai-platform"),
            seed_where(lambda d, r: first_bidder_reports(d, r) and d.marked_seat == 2),
        ]
    )
    monkeypatch.setattr(service.app.tables, "new_seed", lambda: next(seeds))
    four = [new_player(api, f"w{i}") for i in range(4)]
    tokens = dict(four)
    table_id = new_table(api, four[0][1], next_hand_seconds=0, turn_seconds=60)["table_id"]
    # Watched from its start: the table's first items, and where to read on.
    start = watch_page(api, table_id, None)
    assert [i["type"] for i in start["items"]] == ["table_created", "player_joined"]
    assert "invite" not in start["items"][0]["payload"]
    for _, token in four[1:]:
        assert join(api, table_id, token).status_code == 201
    matches = []
    for report in ("play", "no_play"):
        run_burst(rconn)
        match_id = api.get(f"/v1/tables/{table_id}", headers=bearer(four[0][1])).json["match_id"]
        assert match_id not in matches
        matches.append(match_id)
        r = api.get(f"/v1/matches/{match_id}/replay")
        assert r.status_code == 403 and r.json["code"] == "replay_not_available"
        play_showing_and_reporting(api, match_id, tokens, report)
        run_burst(rconn)  # settled, and recorded at the table
    stream = stream_items(api, table_id)

    watched, after = list(start["items"]), start["last_id"]
    while True:
        page = watch_page(api, table_id, after)
        if not page["items"]:
            break
        watched += page["items"]
        after = page["last_id"]
    ids = [i["id"] for i in watched]
    assert len(set(ids)) == len(ids), "an item twice"
    # The stream starts at the latest hand's start (the transaction that appended
    # hand_started, and created and dealt its match) and carries what the pages do.
    latest = [i for i in watched if i["type"] == "hand_started"][-1]
    xid = latest["id"].split("-")[0]
    started = next(n for n, i in enumerate(watched) if i["id"].split("-")[0] == xid)
    assert watched[started]["type"] == "match_created"
    assert stream == watched[started:]

    for match_id in matches:
        operator = events(api, match_id)
        knowledge = Knowledge(operator)
        seen = [i for i in watched if i["match_id"] == match_id]
        # Every event of the hand, in order, each once.
        assert [i["version"] for i in seen] == [e["version"] for e in operator]
        types = {i["type"] for i in seen}
        assert {"hand_dealt", "show_hand", "report", "hand_ended", "settled"} <= types
        watcher = Observer(None, "", "", "watcher", seat=None)
        for i in seen:
            watcher.record(f"watch {i['type']}", i["version"], i)
        found = leaks(watcher, knowledge)
        assert not found, "\n".join(found[:20])
        dealt = next(i for i in seen if i["type"] == "hand_dealt")["payload"]
        assert dealt["hand"] is None and dealt["cards"] == [25, 25, 25, 25]
        assert "hands" not in dealt and "bottom" not in dealt and "seed" not in dealt
        chosen = next(i for i in seen if i["type"] == "landlord_chosen")["payload"]
        assert chosen["bottom"] is None
        # Once it has ended the replay is anyone's: every card, every action, the result.
        r = api.get(f"/v1/matches/{match_id}/replay")
        assert r.status_code == 200, r.json
        replay = r.json
        assert replay["seed"] == knowledge.seed and replay["deal"]["bottom"]
        assert len(replay["actions"]) == sum(i["type"] in DECISIONS for i in seen)
        page = api.get(f"/replay/{match_id}")
        assert page.status_code == 200 and page.mimetype == "text/html"
        assert replay["deal"]["hands"][0][0] in page.get_data(as_text=True)
    table_events = [i["type"] for i in watched if i["match_id"] is None]
    assert table_events.count("hand_started") == table_events.count("hand_settled") == 2


#: The events that are a seat's decision (one each in the hand record's actions).
DECISIONS = {"bid", "show_hand", "report", "play", "pass"}


def seated_table(api, rconn, prefix: str, **options) -> tuple[str, str, dict[str, str]]:
    """A table of four people (joined with its invite code when private) and its first
    hand dealt: the table, the hand and the people's tokens by player."""
    four = [new_player(api, f"{prefix}{i}") for i in range(4)]
    created = new_table(api, four[0][1], turn_seconds=60, next_hand_seconds=0, **options)
    for _, token in four[1:]:
        r = join(api, created["table_id"], token, invite=created["invite"])
        assert r.status_code == 201, r.json
    run_burst(rconn)
    match_id = api.get(f"/v1/tables/{created['table_id']}", headers=bearer(four[0][1])).json[
        "match_id"
    ]
    assert match_id
    return created["table_id"], match_id, dict(four)


def answer(api, method: str, path: str, token: str | None, body=None):
    """The answer to a request: its status, type and body (a stream's but its body: it is
    closed at once)."""
    headers = {} if token is None else bearer(token)
    r = api.open(path, method=method, headers=headers, json=body, buffered=False)
    try:
        data = b"" if r.status_code == 200 else r.get_data()
        # A page's nonce is new at each answer.
        return r.status_code, r.content_type, re.sub(rb"nonce[-=]\"?[\w-]+", b"nonce", data)
    finally:
        r.close()


def path_of(rule: str, ids: dict[str, str]) -> str:
    """The rule's path with these ids."""
    return re.sub(r"<(?:\w+:)?(\w+)>", lambda m: ids[m[1]], rule)


def routes_with_ids(app) -> list[tuple[str, str]]:
    """(method, rule) of every route whose path holds a table's or a match's id."""
    return sorted(
        (method, rule.rule)
        for rule in app.url_map.iter_rules()
        if {"table_id", "match_id"} & rule.arguments
        for method in rule.methods - {"HEAD", "OPTIONS"}
    )


def test_a_private_table_and_its_hands_are_nothing_to_whoever_never_sat_there(
    api, wapp, rconn, jobs_env
):
    """An account seated elsewhere that knew a private table's id followed its hand
    through the table, the match's view and events, while /watch said 404: now every
    route with the table's or the hand's id in its path answers whoever was not dealt it,
    and anyone without a token, exactly as for ids that do not exist; the invite code is
    the only way in. Those dealt the hand (and operators) see it."""
    table_id, match_id, tokens = seated_table(api, rconn, "hidden", private=True)
    _, outsider = new_player(api, "outsider")
    nowhere = {"table_id": str(uuid.uuid4()), "match_id": str(uuid.uuid4())}
    here = {"table_id": table_id, "match_id": match_id}
    routes = routes_with_ids(wapp)
    assert len(routes) >= 15, routes
    for method, rule in routes:
        for body in [None] if method == "GET" else [{}, {"action": "pass"}]:
            for token in (None, outsider):
                got = answer(api, method, path_of(rule, here), token, body)
                expected = answer(api, method, path_of(rule, nowhere), token, body)
                for real, fake in zip(here.values(), nowhere.values()):
                    got = (got[0], got[1], got[2].replace(real.encode(), fake.encode()))
                assert got == expected, (method, rule, token is not None, body)
    # Nor is it listed to the outsider; its players find it, and its operators.
    listed = api.get("/v1/matches", headers=bearer(outsider)).json["matches"]
    assert match_id not in [m["match_id"] for m in listed]
    for token in (*tokens.values(), OPERATOR_TOKEN):
        assert api.get(f"/v1/matches/{match_id}", headers=bearer(token)).status_code == 200
        assert api.get(f"/v1/tables/{table_id}", headers=bearer(token)).status_code == 200
    seated = next(iter(tokens.values()))
    assert match_id in [
        m["match_id"] for m in api.get("/v1/matches", headers=bearer(seated)).json["matches"]
    ]
    r = api.get(f"/v1/matches/{match_id}/replay", headers=bearer(seated))
    assert r.status_code == 403 and r.json["code"] == "replay_not_available"
    # Ended, the hand is replayed for those dealt it (with their token), for no one else.
    play_showing_and_reporting(api, match_id, tokens, "play")
    assert api.get(f"/v1/matches/{match_id}/replay", headers=bearer(seated)).status_code == 200
    for token in (None, outsider):
        headers = {} if token is None else bearer(token)
        r = api.get(f"/v1/matches/{match_id}/replay", headers=headers)
        absent = api.get(f"/v1/matches/{nowhere['match_id']}/replay", headers=headers)
        assert (r.status_code, r.get_data()) == (404, absent.get_data())
    assert api.get(f"/replay/{match_id}").status_code == 404


def test_who_was_not_dealt_a_tables_hand_watches_the_table_instead(
    worker_database_url, worker_redis_url, rconn, jobs_env
):
    """Any account seated nowhere read a table's hand live through the match's view,
    events and stream, while watchers were kept behind: now every route of the match
    sends it to the table's watchers (403 ``watch_table``, naming the table), where the
    delay holds. Those dealt the hand read it as ever."""
    delayed = worker_app(worker_database_url, worker_redis_url, watch_delay_seconds=600)
    try:
        api = delayed.test_client()
        table_id, match_id, tokens = seated_table(api, rconn, "live")
        _, outsider = new_player(api, "onlooker")
        for path in ("", "/events?after=0", "/events?after=0&wait=2", "/stream", "/record"):
            r = api.get(f"/v1/matches/{match_id}{path}", headers=bearer(outsider))
            assert r.status_code == 403 and r.json["code"] == "watch_table", (path, r.json)
            assert (
                r.json["table_id"] == table_id
                and f"/v1/tables/{table_id}/watch" in r.json["detail"]
            )
        listed = api.get("/v1/matches", headers=bearer(outsider)).json["matches"]
        assert match_id not in [m["match_id"] for m in listed]
        # The table itself is public: its hand's id and the watchers' items, ten minutes behind.
        assert (
            api.get(f"/v1/tables/{table_id}", headers=bearer(outsider)).json["match_id"] == match_id
        )
        watched = api.get(f"/v1/tables/{table_id}/watch", headers=bearer(outsider)).json
        assert watched["items"] == []
        for token in tokens.values():
            assert api.get(f"/v1/matches/{match_id}", headers=bearer(token)).status_code == 200
    finally:
        delayed.extensions["ddz"].close()


def test_a_watcher_is_as_far_behind_the_table_as_the_server_says(
    worker_database_url, worker_redis_url
):
    delayed = worker_app(worker_database_url, worker_redis_url, watch_delay_seconds=1.5)
    try:
        api = delayed.test_client()
        owner = new_player(api, "watched")
        table_id = new_table(api, owner[1])["table_id"]
        r = api.get(f"/v1/tables/{table_id}/watch")
        assert r.status_code == 200 and r.json["items"] == []
        # A long poll waits for the first item to be due. The two events are recorded
        # moments apart, so a poll answered at the first one's time may have the first
        # alone; each item comes once it is due, never before.
        seen: list[str] = []
        after = r.json["last_id"]
        for _ in range(3):
            r = api.get(f"/v1/tables/{table_id}/watch", query_string={"wait": 5, "after": after})
            answered = datetime.now(UTC)
            for item in r.json["items"]:
                assert answered >= datetime.fromisoformat(item["at"]) + timedelta(seconds=1.5)
                seen.append(item["type"])
            after = r.json["last_id"]
            if len(seen) >= 2:
                break
        assert seen == ["table_created", "player_joined"]
    finally:
        delayed.extensions["ddz"].close()
