"""Tables that play hand after hand, and the lobby, over HTTP with real RQ workers (burst
mode, in this process) on a PostgreSQL database and a Redis of this module's own (the
fixtures of ``jobs.py``)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest
from api_support import OP, bearer
from contract import committed_document
from jobs import choose, drain, feed, join, new_player, new_table, play_hand, run_burst, worker_app

import service.app.feed
import workers.context
from service.app.tables import new_invite
from service.game import GameError
from service.store import VersionConflict
from workers import sweeper

# Slow: plays hands through real workers and waits for deadlines (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wapp(worker_database_url, worker_redis_url):
    """As the jobs plugin's app, without rate limits: the people here poll as fast as they can."""
    app = worker_app(worker_database_url, worker_redis_url, rate_limits=False)
    yield app
    app.extensions["ddz"].close()


def table(api, table_id: str, token: str) -> dict:
    r = api.get(f"/v1/tables/{table_id}", headers=bearer(token))
    assert r.status_code == 200, r.json
    return r.json


def people(api, n: int) -> list[tuple[str, str]]:
    return [new_player(api, f"p{i}") for i in range(n)]


def ledger_of(db, player: str, match_ids: list[str]) -> Decimal:
    (total,) = db.execute(
        "SELECT coalesce(sum(amount), 0) FROM ledger_entries WHERE account = %s AND match_id = ANY(%s::uuid[])",
        (f"player:{player}", match_ids),
    ).fetchone()
    return total


def test_four_people_play_two_hands_in_a_row_at_one_table(api, db, rconn, jobs_env):
    four = people(api, 4)
    tokens = dict(four)
    created = new_table(api, four[0][1], next_hand_seconds=0, turn_seconds=60)
    table_id = created["table_id"]
    assert created["seats"][0]["player"] == four[0][0] and created["seats"][0]["name"] == "p0"
    assert created["hands"] == 0 and created["match_id"] is None and created["waiting"] is None
    for _, token in four[1:]:
        r = join(api, table_id, token)
        assert r.status_code == 201, r.json
    assert join(api, table_id, four[1][1]).json["code"] == "already_seated"
    late_id, late = new_player(api, "late")
    r = join(api, table_id, late)
    assert r.status_code == 409 and r.json["code"] == "table_full"

    played = []
    for hand in (1, 2):
        run_burst(rconn)
        now = table(api, table_id, late)
        assert now["match_id"] is not None and now["hands"] == hand - 1, now
        match_id = now["match_id"]
        assert match_id not in played
        view = api.get(f"/v1/matches/{match_id}", headers=bearer(four[0][1])).json
        assert [s["player"] for s in view["seats"]] == [p for p, _ in four]
        play_hand(api, match_id, tokens, rconn)
        played.append(match_id)
        run_burst(rconn)  # the settlement, then the hand recorded at the table, the next deal
    final = table(api, table_id, four[0][1])
    assert final["hands"] == 2
    assert final["match_id"] not in played  # the third hand is dealt already
    # The scoreboard equals the ledger: each player's entries for the table's two hands.
    board = {row["player"]: Decimal(row["net"]) for row in final["scoreboard"]}
    assert board == {p: ledger_of(db, p, played) for p, _ in four}
    assert sum(board.values()) <= 0  # what the players won and lost, less the house's part


def test_a_private_table_is_none_without_its_code(api, rconn, jobs_env):
    """Without its invite code a private table is answered as a table that does not
    exist, seen or joined; with it, the guest sits there and sees it (and its code)."""
    (host_id, host), (guest_id, guest) = people(api, 2)
    created = new_table(api, host, private=True)
    code = created["invite"]
    assert code
    nowhere = f"/v1/tables/{uuid.uuid4()}"
    absent = api.get(nowhere, headers=bearer(guest))
    assert absent.status_code == 404
    r = api.get(f"/v1/tables/{created['table_id']}", headers=bearer(guest))
    assert (r.status_code, r.get_data()) == (404, absent.get_data())
    for body in ({}, {"invite": "wrong"}):
        absent = api.post(f"{nowhere}/seats", json=body, headers=bearer(guest))
        r = join(api, created["table_id"], guest, **body)
        assert (r.status_code, r.get_data()) == (404, absent.get_data()), r.json
    assert table(api, created["table_id"], host)["seats"][1] is None
    r = join(api, created["table_id"], guest, invite=code)
    assert r.status_code == 201 and r.json["seats"][1]["player"] == guest_id
    assert r.json["invite"] == code
    assert table(api, created["table_id"], guest)["invite"] == code


def test_bots_fill_the_empty_seats_after_bots_after_and_a_leaver_is_freed_at_hand_end(
    api, db, rconn, jobs_env
):
    (alone_id, alone), (other_id, other) = people(api, 2)
    created = new_table(api, alone, bots_after=1, next_hand_seconds=0, turn_seconds=60)
    table_id = created["table_id"]
    assert join(api, table_id, other).status_code == 201
    waiting = table(api, table_id, alone)["waiting"]
    assert waiting["what"] == "bots"
    run_burst(rconn)
    assert table(api, table_id, alone)["match_id"] is None  # not yet: nobody waited a second
    time.sleep(1.1)
    assert sweeper.scan_tables() >= 1  # this table's bots (others of this module may be due)
    run_burst(rconn)
    now = table(api, table_id, alone)
    assert [bool(s and s["bot"]) for s in now["seats"]] == [False, False, True, True]
    match_id = now["match_id"]
    assert match_id is not None
    # The other leaves during the hand: disconnected (the system plays the seat), seated
    # until the hand is settled.
    r = api.post(f"/v1/tables/{table_id}/leave", headers=bearer(other))
    assert r.status_code == 200 and r.json["seats"][1]["leaving"] is True, r.json
    view = api.get(f"/v1/matches/{match_id}", headers=bearer(other)).json
    assert view["seats"][1]["disconnected"] is True
    # Its own stream says so, for an app that offers to take the seat back.
    items = feed_until(api, other, lambda items: any(i["type"] == "taken_over" for i in items))
    taken = [i for i in items if i["type"] == "taken_over"]
    assert [(i["match_id"], i["seat"], i["reason"]) for i in taken] == [(match_id, 1, "left")]
    r = api.post(f"/v1/tables/{table_id}/leave", headers=bearer(other))
    assert r.status_code == 403 and r.json["code"] == "not_seated"
    play_hand(api, match_id, {alone_id: alone}, rconn)
    run_burst(rconn)
    after = table(api, table_id, alone)
    assert after["hands"] == 1 and after["seats"][1] is None
    # The seat waits for a second, then a bot takes it and the next hand is dealt.
    time.sleep(1.1)
    sweeper.scan_tables()
    run_burst(rconn)
    again = table(api, table_id, alone)
    assert again["seats"][1]["bot"] is True and again["match_id"] not in (None, match_id)
    board = {row["player"]: Decimal(row["net"]) for row in again["scoreboard"]}
    assert board == {p: ledger_of(db, p, [match_id]) for p in (alone_id, other_id)}


def test_a_player_who_did_nothing_for_a_whole_hand_leaves_with_it(api, rconn, jobs_env):
    _, gone = new_player(api, "gone")
    table_id = new_table(api, gone, bots_after=0, next_hand_seconds=0, turn_seconds=1)["table_id"]
    run_burst(rconn)  # the bots take the other seats, and the hand is dealt
    # The player does nothing: its first turn times out, the system plays the rest.
    drain(rconn, until=lambda: table(api, table_id, gone)["hands"] == 1)
    after = table(api, table_id, gone)
    assert after["seats"][0] is None and after["match_id"] is None
    items = feed_until(api, gone, lambda items: items and items[-1]["type"] == "left")
    kinds = [i["type"] for i in items]
    assert kinds[-3:] == ["hand_ended", "settled", "left"] and "taken_over" in kinds
    # Nobody is left to deal to: the table deals no other hand.
    sweeper.scan_tables()
    run_burst(rconn)
    assert table(api, table_id, gone)["match_id"] is None
    assert table_id not in [
        t["table_id"] for t in api.get("/v1/me/tables", headers=bearer(gone)).json["tables"]
    ]


def test_leaving_between_hands_frees_the_seat_at_once(api, rconn, jobs_env):
    (host_id, host), (guest_id, guest) = people(api, 2)
    table_id = new_table(api, host)["table_id"]
    assert join(api, table_id, guest).status_code == 201
    r = api.post(f"/v1/tables/{table_id}/leave", headers=bearer(guest))
    assert r.status_code == 200 and r.json["seats"][1] is None
    r = api.get("/v1/me/tables", headers=bearer(host))
    assert table_id in [t["table_id"] for t in r.json["tables"]]
    r = api.get("/v1/me/tables", headers=bearer(guest))
    assert table_id not in [t["table_id"] for t in r.json["tables"]]


def test_a_leave_right_after_settled_is_between_hands(api, rconn, jobs_env, monkeypatch):
    """A player whose stream said ``settled`` and who leaves at once leaves between hands
    (``left``, the seat free), even when the worker has not yet recorded the hand at the
    table (it does so just after the settlement): the leave records it first."""
    (host_id, host), (guest_id, guest) = people(api, 2)
    table_id = new_table(api, host, bots_after=0, next_hand_seconds=60, turn_seconds=60)["table_id"]
    assert join(api, table_id, guest).status_code == 201
    run_burst(rconn)  # the bots take the other seats, and the hand is dealt
    match_id = table(api, table_id, host)["match_id"]
    ctx = workers.context.context()
    monkeypatch.setattr(ctx.tables, "record_hand", lambda match_id: "not yet")
    play_hand(api, match_id, {host_id: host, guest_id: guest}, rconn)
    drain(rconn, until=lambda: any(i["type"] == "settled" for i in feed(api, guest)["items"]))
    assert table(api, table_id, host)["match_id"] == match_id  # not yet recorded there

    r = api.post(f"/v1/tables/{table_id}/leave", headers=bearer(guest))
    assert r.status_code == 200 and r.json["seats"][1] is None, r.json
    assert r.json["hands"] == 1
    items = feed_until(api, guest, lambda items: items and items[-1]["type"] == "left")
    assert "leaving" not in [i["type"] for i in items]


def test_an_unknown_table_is_404(api, jobs_env):
    _, token = new_player(api)
    r = api.get(f"/v1/tables/{uuid.uuid4()}", headers=bearer(token))
    assert r.status_code == 404 and r.json["code"] == "table_not_found"


# --- the lobby ---------------------------------------------------------------------------


def ticket(api, token: str, **body) -> dict:
    r = api.post("/v1/lobby/tickets", json=body, headers=bearer(token))
    assert r.status_code == 201, r.json
    return r.json


def ticket_now(api, token: str, ticket_id: str) -> dict:
    r = api.get(f"/v1/lobby/tickets/{ticket_id}", headers=bearer(token))
    assert r.status_code == 200, r.json
    return r.json


def match_tickets(next_hand_seconds: int = 0) -> int:
    ctx = workers.context.context()
    return ctx.tables.match_tickets(ctx.config.lobby_bots_after, next_hand_seconds)


def test_four_tickets_are_seated_once_at_one_table_with_two_matchers_racing(
    api, db, rconn, jobs_env
):
    four = people(api, 4)
    tickets = [ticket(api, token, unit="2.00", allow_bots=False) for _, token in four]
    assert {t["status"] for t in tickets} == {"waiting"}
    rconn.flushdb()  # Redis only wakes the matcher: the tickets are in PostgreSQL
    made = []
    start = threading.Barrier(2)

    def matcher() -> None:
        start.wait()
        made.append(match_tickets())

    threads = [threading.Thread(target=matcher) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 2 and sum(made) >= 1  # (other tickets of this module may be due)
    seated = [ticket_now(api, token, t["ticket_id"]) for (_, token), t in zip(four, tickets)]
    assert {t["status"] for t in seated} == {"seated"}
    (table_id,) = {t["table_id"] for t in seated}
    rows = db.execute(
        "SELECT ticket_id, seat FROM lobby_seatings WHERE table_id = %s", (table_id,)
    ).fetchall()
    assert sorted(seat for _, seat in rows) == [0, 1, 2, 3]
    # No ticket is seated twice, whatever the code does: the database refuses it.
    with pytest.raises(psycopg.errors.UniqueViolation):
        db.execute(
            "INSERT INTO lobby_seatings (ticket_id, table_id, seat) VALUES (%s, %s, 0)",
            (rows[0][0], table_id),
        )
    assert all(
        ticket_now(api, t, k["ticket_id"])["table_id"] == table_id
        for (_, t), k in zip(four, tickets)
    )
    # The table deals its first hand to the four, at the tickets' stake.
    sweeper.scan_tables()
    run_burst(rconn)
    now = table(api, table_id, four[0][1])
    assert now["options"]["unit"] == "2.00" and now["match_id"] is not None
    assert sorted(s["player"] for s in now["seats"]) == sorted(p for p, _ in four)


def test_a_lone_ticket_that_allows_bots_gets_them_after_the_wait(api, rconn, jobs_env, monkeypatch):
    monkeypatch.setenv("DDZ_LOBBY_BOTS_AFTER", "1")
    workers.context.context.cache_clear()
    (lone_id, lone), (picky_id, picky) = people(api, 2)
    mine = ticket(api, lone, unit="3.00")
    theirs = ticket(api, picky, unit="3.00", allow_bots=False)
    run_burst(rconn)  # the matcher, woken: two tickets, no one has waited yet
    assert ticket_now(api, lone, mine["ticket_id"])["status"] == "waiting"
    time.sleep(1.1)
    sweeper.scan_tables()
    run_burst(rconn)
    seated = ticket_now(api, lone, mine["ticket_id"])
    assert seated["status"] == "seated"
    assert ticket_now(api, picky, theirs["ticket_id"])["status"] == "waiting"
    now = table(api, seated["table_id"], lone)
    assert [s["player"] for s in now["seats"]] == [lone_id, None, None, None]
    assert [s["bot"] for s in now["seats"]] == [False, True, True, True]
    assert now["match_id"] is not None
    # The player's own stream says so: seated by that ticket, then the hand started.
    items = feed_until(api, lone, lambda items: len(items) >= 2)
    assert items[0]["type"] == "seated" and items[0]["ticket_id"] == mine["ticket_id"]
    assert items[0]["table_id"] == seated["table_id"] and items[1]["type"] == "hand_started"


def test_a_ticket_is_cancelled_and_only_by_its_player(api, rconn, jobs_env):
    (a_id, a), (b_id, b) = people(api, 2)
    mine = ticket(api, a, unit="4.00", allow_bots=False)
    r = api.post("/v1/lobby/tickets", json={"unit": "4.00"}, headers=bearer(a))
    assert r.status_code == 409 and r.json["code"] == "ticket_waiting"
    assert r.json["ticket_id"] == mine["ticket_id"], "a client that lost the 201 learns its id"
    path = f"/v1/lobby/tickets/{mine['ticket_id']}"
    for method in (api.get, api.delete):
        r = method(path, headers=bearer(b))
        assert r.status_code == 404 and r.json["code"] == "ticket_not_found"
    r = api.delete(path, headers=bearer(a))
    assert r.status_code == 200 and r.json["status"] == "cancelled"
    assert ticket_now(api, a, mine["ticket_id"])["status"] == "cancelled"
    again = ticket(api, a, unit="4.00")
    assert again["status"] == "waiting"  # a new one may wait now
    assert (
        api.delete(f"/v1/lobby/tickets/{again['ticket_id']}", headers=bearer(a)).status_code == 200
    )


# --- the player's own stream -------------------------------------------------------------


def feed_until(api, token: str, done, timeout: float = 10.0) -> list[dict]:
    """The player's feed from its start, read on (a long poll at a time) until
    ``done(items)``: an item may follow the read model it comes with by a moment, since the
    feed serves only what no transaction still running can come before."""
    items: list[dict] = []
    after = None
    deadline = time.monotonic() + timeout
    while not done(items):
        left = deadline - time.monotonic()
        assert left > 0, f"the feed never got there: {[i['type'] for i in items]}"
        page = feed(api, token, after, wait=min(left, 5))
        items += page["items"]
        after = page["last_id"] or after
    return items


def sse_messages(body: str) -> list[dict]:
    messages = []
    for block in body.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":")
        )
        if "event" in fields:
            messages.append(fields)
    return messages


def test_the_player_stream_says_your_turn_once_each_and_resumes_without_gaps(api, rconn, jobs_env):
    me, token = new_player(api, "solo")
    table_id = new_table(api, token, bots_after=0, next_hand_seconds=60, turn_seconds=60)[
        "table_id"
    ]
    items: list[dict] = []
    acted: list[tuple[str, int]] = []
    after = None
    for _ in range(500):
        run_burst(rconn)
        page = feed(api, token, after)
        items += page["items"]
        after = page["last_id"]
        if any(i["type"] == "settled" for i in items):
            break
        turns = [i for i in page["items"] if i["type"] == "your_turn"]
        if not turns:
            continue
        turn = turns[-1]
        view = api.get(f"/v1/matches/{turn['match_id']}", headers=bearer(token)).json
        # Nothing happens while the player is to act: the last your_turn is the present.
        assert view["version"] == turn["version"] and view["actions"] == turn["actions"]
        body = {**choose(api, turn["match_id"], token, view), "expected_version": view["version"]}
        r = api.post(f"/v1/matches/{turn['match_id']}/commands", json=body, headers=bearer(token))
        assert r.status_code == 200, r.json
        acted.append((turn["match_id"], turn["version"]))
    else:
        raise AssertionError("the hand did not end")
    kinds = [i["type"] for i in items]
    assert kinds[0] == "seated" and items[0]["table_id"] == table_id
    assert kinds[1] == "hand_started" and kinds[-2:] == ["hand_ended", "settled"]
    # Every your_turn exactly once, and each one the player acted on.
    turns = [(i["match_id"], i["version"]) for i in items if i["type"] == "your_turn"]
    assert turns == acted and len(set(turns)) == len(turns)
    # Only what the player's seat may see: its own hand, no other seat's, no bottom.
    match_id = items[1]["match_id"]
    dealt = api.get(f"/v1/matches/{match_id}/events", headers=OP).json["events"]
    deal = next(e for e in dealt if e["type"] == "hand_dealt")["payload"]
    seat = items[1]["seat"]
    assert items[1]["hand"] == deal["hands"][seat]
    for item in items:
        assert not {"hands", "bottom", "seed"} & item.keys(), item
        assert item.get("hand") in (None, deal["hands"][seat])
    # The scoreboard is the ledger's net of the hand.
    assert items[-1]["net"] == table(api, table_id, token)["scoreboard"][0]["net"]

    # Resuming after any item gives exactly the items that followed it.
    ids = [i["id"] for i in items]
    assert len(set(ids)) == len(ids) and feed(api, token)["items"] == items
    for k in (0, 1, len(items) // 2, len(items) - 2):
        assert feed(api, token, ids[k])["items"] == items[k + 1 :]
    assert feed(api, token, ids[-1])["items"] == []
    # The Server-Sent Events stream too, from Last-Event-ID.
    r = api.get("/v1/me/stream", headers={**bearer(token), "Last-Event-ID": ids[2]}, buffered=True)
    assert r.status_code == 200 and r.mimetype == "text/event-stream"
    got = sse_messages(r.get_data(as_text=True))
    assert [m["id"] for m in got] == ids[3:]
    assert [m["event"] for m in got] == kinds[3:]
    r = api.get("/v1/me/stream", headers={**bearer(token), "Last-Event-ID": "nope"})
    assert r.status_code == 400 and r.json["code"] == "invalid_last_event_id"


def test_the_id_a_page_gives_while_items_are_held_back_is_taken_back(
    api, rconn, jobs_env, worker_database_url
):
    """A page read while an older transaction still runs holds the items after it back; the
    ``last_id`` it gives (the place before its first item) is a valid ``after``, and the
    items come once that transaction ends."""
    _, token = new_player(api, "held")
    with psycopg.connect(worker_database_url) as older:
        older.execute("SELECT txid_current()")  # running, and older than the table's append
        new_table(api, token)
        page = feed(api, token)
        assert page["items"] == []
        after = page["last_id"]
        if after is not None:
            assert feed(api, token, after)["items"] == []
        older.rollback()
    assert [i["type"] for i in feed(api, token, after, wait=5)["items"]] == ["seated"]


def test_a_cursor_from_the_future_is_refused_not_waited_for(api, rconn, jobs_env):
    _, token = new_player(api, "future")
    new_table(api, token)
    (seated,) = feed(api, token, wait=5)["items"]
    xid, position, n = seated["id"].split("-")
    # A transaction id the database has not reached: read after it, the stream would skip
    # everything until the database got that far.
    future = f"{int(xid) + 10**9}-{position}-{n}"
    r = api.get("/v1/me/events", query_string={"after": future}, headers=bearer(token))
    assert r.status_code == 422 and r.json["code"] == "cursor_unknown", r.json
    r = api.get("/v1/me/stream", headers={**bearer(token), "Last-Event-ID": future})
    assert r.status_code == 422 and r.json["code"] == "cursor_unknown", r.json
    # An id the stream gave is known, whatever its position and index.
    assert feed(api, token, seated["id"])["items"] == []
    assert feed(api, token, f"{xid}-{int(position) + 10**6}-999")["items"] == []


def test_pages_read_on_past_events_that_hold_nothing_for_the_player(
    api, rconn, jobs_env, monkeypatch
):
    me, token = new_player(api, "pages")
    table_id = new_table(api, token, bots_after=0, next_hand_seconds=60, turn_seconds=60)[
        "table_id"
    ]
    run_burst(rconn)
    play_hand(api, table(api, table_id, token)["match_id"], {me: token}, rconn)
    run_burst(rconn)
    whole = feed_until(api, token, lambda items: items and items[-1]["type"] == "settled")
    # Two events a read: most reads hold only the bots' moves, no item for the player; the
    # next page must start past them, or the player would wait there for good.
    monkeypatch.setattr(service.app.feed, "BATCH", 2)
    paged, after = [], None
    for _ in range(500):
        page = feed(api, token, after)
        paged += page["items"]
        after = page["last_id"]
        if len(paged) >= len(whole) and not page["items"]:
            break
    assert paged == whole


def test_a_new_stream_starts_at_the_present_and_a_long_poll_waits_for_the_next(
    api, rconn, jobs_env
):
    me, token = new_player(api, "waiter")
    other_id, other = new_player(api, "other")
    table_id = new_table(api, token)["table_id"]
    r = api.get("/v1/me/stream", headers=bearer(token), buffered=True)
    got = sse_messages(r.get_data(as_text=True))
    # It starts at the present (a transaction still running elsewhere in the cluster may
    # hold the present back a little, so the seat just taken may follow; never less).
    assert got[0]["event"] == "ready" and len(got) <= 2
    start = got[-1]["id"]
    # Held back, the seat comes next; nothing else does.
    late = feed(api, token, start)["items"]
    assert [(i["type"], i["table_id"]) for i in late] in ([], [("seated", table_id)])
    if late:
        start = late[-1]["id"]
    # A long poll is woken by the table's next event: the player leaves ...
    waited: list[dict] = []
    poller = threading.Thread(target=lambda: waited.append(feed(api, token, start, wait=5)))
    poller.start()
    time.sleep(0.5)
    assert not waited
    api.post(f"/v1/tables/{table_id}/leave", headers=bearer(token))
    poller.join()
    assert [i["type"] for i in waited[0]["items"]] == ["left"]
    # ... and taking a seat at a table it did not watch wakes it too (the mobile app's
    # "play now": its stream must not wait for the long poll to run out); another
    # player's table is not the player's business.
    other_table = new_table(api, other)["table_id"]
    after_leaving = waited[0]["last_id"]
    waited.clear()
    poller = threading.Thread(
        target=lambda: waited.append(feed(api, token, after_leaving, wait=25)), daemon=True
    )
    poller.start()
    time.sleep(0.5)
    assert join(api, other_table, token).status_code == 201
    poller.join(timeout=10)
    assert not poller.is_alive(), "the long poll was not woken by the player's new seat"
    assert [i["type"] for i in waited[0]["items"]] == ["seated"]
    assert [i["type"] for i in feed(api, token, start)["items"]] == ["left", "seated"]


def test_a_long_poll_is_woken_when_the_lobby_seats_the_player_at_a_new_table(api, rconn, jobs_env):
    four = people(api, 4)
    tickets = [ticket(api, token, unit="6.00", allow_bots=False) for _, token in four]
    first = four[0][1]
    now = feed(api, first)["last_id"]
    waited: list[dict] = []
    poller = threading.Thread(target=lambda: waited.append(feed(api, first, now, wait=25)))
    poller.start()
    time.sleep(0.5)
    assert match_tickets() >= 1  # (other tickets of this module may be due)
    # Woken by the seating, not by the end of its wait: the table was not one it watched.
    poller.join(10)
    assert not poller.is_alive(), "the long poll was not woken by the seating"
    seated = waited[0]["items"][0]
    assert seated["type"] == "seated" and seated["ticket_id"] == tickets[0]["ticket_id"]


# --- the player's own pages --------------------------------------------------------------


def test_the_players_pages_show_its_balance_matches_newest_first_and_tables(
    api, db, rconn, jobs_env
):
    me, token = new_player(api, "pager")
    r = api.get("/v1/me", headers=bearer(token))
    assert r.status_code == 200 and r.json == {
        "player_id": me,
        "name": "pager",
        "bot_account": False,
        "balance": "0.00",
    }
    table_id = new_table(api, token, bots_after=0, next_hand_seconds=0, turn_seconds=60)["table_id"]
    played = []
    for _ in range(2):
        run_burst(rconn)
        match_id = table(api, table_id, token)["match_id"]
        play_hand(api, match_id, {me: token}, rconn)
        played.append(match_id)
        run_burst(rconn)
    assert (
        api.get("/v1/me", headers=bearer(token)).json["balance"]
        == f"{ledger_of(db, me, played):.2f}"
    )

    pages, cursor = [], None
    while True:
        query = {"limit": 1} | ({} if cursor is None else {"cursor": cursor})
        r = api.get("/v1/me/matches", query_string=query, headers=bearer(token))
        assert r.status_code == 200, r.json
        pages.append(r.json["matches"])
        cursor = r.json["next_cursor"]
        if cursor is None:
            break
    listed = [m for page in pages for m in page]
    assert all(len(page) == 1 for page in pages)
    third = table(api, table_id, token)["match_id"]  # dealt already, not played
    assert [m["match_id"] for m in listed] == [third, *reversed(played)]
    first = listed[-1]
    assert first["table_id"] == table_id and first["seat"] == 0
    assert first["seats"][0] == {"player": me, "name": "pager", "bot": False, "bot_account": False}
    assert [s["bot"] for s in first["seats"]] == [False, True, True, True]
    assert first["role"] in ("landlord", "farmer") and first["winner"] in ("landlord", "farmers")
    assert Decimal(first["net"]) == ledger_of(db, me, [played[0]])
    assert first["record"] == f"/v1/matches/{played[0]}/record"
    assert api.get(first["record"], headers=bearer(token)).status_code == 200
    assert listed[0]["net"] is None and listed[0]["winner"] is None
    r = api.get("/v1/me/matches", query_string={"cursor": "not-a-cursor"}, headers=bearer(token))
    assert r.status_code == 422 and r.json["code"] == "invalid_cursor"
    tables = api.get("/v1/me/tables", headers=bearer(token)).json["tables"]
    assert [t["table_id"] for t in tables] == [table_id]


# --- faults ------------------------------------------------------------------------------


def test_four_people_from_the_lobby_play_three_hands_through_a_redis_flush_and_a_lost_job(
    api, db, rconn, jobs_env, monkeypatch
):
    monkeypatch.setenv("DDZ_TABLE_NEXT_HAND_SECONDS", "0")
    workers.context.context.cache_clear()
    four = people(api, 4)
    tokens = dict(four)
    tickets = [ticket(api, token, unit="5.00", allow_bots=False) for _, token in four]
    rconn.flushdb()  # the matcher's wake-ups are lost: the workers' scan seats the tickets
    sweeper.scan_tables()
    run_burst(rconn)
    (table_id,) = {
        ticket_now(api, t, k["ticket_id"])["table_id"] for (_, t), k in zip(four, tickets)
    }
    ctx = workers.context.context()
    played = []
    for hand in (1, 2, 3):
        now = table(api, table_id, four[0][1])
        if now["match_id"] is None:
            # Between hands, Redis lost the deal: the scan finds the table again.
            rconn.flushdb()
            sweeper.scan_tables()
            run_burst(rconn)
            now = table(api, table_id, four[0][1])
        assert now["hands"] == hand - 1 and now["match_id"] not in (None, *played), now
        if hand == 2:
            # The worker dies between the settlement and recording the hand at the table.
            def killed(match_id):
                raise RuntimeError("killed")

            with monkeypatch.context() as patch:
                patch.setattr(ctx.tables, "record_hand", killed)
                play_hand(api, now["match_id"], tokens, rconn)
                run_burst(rconn)
            assert table(api, table_id, four[0][1])["hands"] == 1
            assert (
                api.get(f"/v1/matches/{now['match_id']}/settlement", headers=OP).status_code == 200
            )
            rconn.flushdb()
            assert sweeper.scan_tables() >= 1  # the hand to record, found from PostgreSQL
        else:
            play_hand(api, now["match_id"], tokens, rconn)
        played.append(now["match_id"])
        run_burst(rconn)
    final = table(api, table_id, four[0][1])
    assert final["hands"] == 3
    board = {row["player"]: Decimal(row["net"]) for row in final["scoreboard"]}
    assert board == {p: ledger_of(db, p, played) for p, _ in four}
    (seated,) = db.execute(
        "SELECT count(*) FROM lobby_seatings WHERE ticket_id = ANY(%s::uuid[])",
        ([t["ticket_id"] for t in tickets],),
    ).fetchone()
    assert seated == 4


def test_a_long_poll_is_woken_when_the_player_takes_a_match_seat(api, rconn, jobs_env):
    """A match the player was not seated at when the poll began: the seat wakes it, and the
    deal it completes reaches the player at once, not when the poll runs out."""
    _, token = new_player(api, "late")
    match_id = api.post("/v1/matches", json={}, headers=bearer(token)).json["match_id"]
    for _ in range(3):  # an operator's bots: the player has no seat yet
        r = api.post(f"/v1/matches/{match_id}/seats", json={"bot": True}, headers=OP)
        assert r.status_code == 201, r.json
    start = feed(api, token)["last_id"]
    waited: list[dict] = []
    poller = threading.Thread(
        target=lambda: waited.append(feed(api, token, start, wait=25)), daemon=True
    )
    poller.start()
    time.sleep(0.5)
    r = api.post(f"/v1/matches/{match_id}/seats", json={}, headers=bearer(token))
    assert r.status_code == 201, r.json
    poller.join(timeout=10)
    assert not poller.is_alive(), "the long poll was not woken by the player's match seat"
    assert waited[0]["items"][0]["type"] == "hand_started"


# --- the rest between hands, one your_turn per decision, one table per player, refills ----


def recorded(db, table_id: str, kind: str) -> list[datetime]:
    """When each of the table's events of that type was recorded."""
    rows = db.execute(
        "SELECT recorded_at FROM events WHERE stream_id = %s AND type = %s ORDER BY version",
        (table_id, kind),
    ).fetchall()
    return [at for (at,) in rows]


def leave(api, table_id: str, token: str) -> dict:
    r = api.post(f"/v1/tables/{table_id}/leave", headers=bearer(token))
    assert r.status_code == 200, r.json
    return r.json


def test_a_leave_in_the_rest_after_a_hand_costs_nothing_and_the_rest_holds(
    api, db, rconn, jobs_env
):
    """The traced table: people and a bot, a rest of a few seconds (4, so that the steps
    inside it have time on a loaded machine). One leaves just after the settlement,
    another inside the rest: before, the first leave had the bots take the seat and the
    next hand dealt at once, so the second leave was a disconnect from it (and its
    penalty)."""
    three = people(api, 3)
    (first_id, first), (second_id, second), (third_id, third) = three
    table_id = new_table(api, first, bots_after=0, next_hand_seconds=4, turn_seconds=60)["table_id"]
    for _, token in three[1:]:
        assert join(api, table_id, token).status_code == 201
    run_burst(rconn)  # a bot takes seat 3, and hand 1 is dealt
    hand_1 = table(api, table_id, first)["match_id"]
    play_hand(api, hand_1, dict(three), rconn)
    run_burst(rconn)  # settled, and recorded at the table
    (settled_at,) = recorded(db, table_id, "hand_settled")
    rest_over = settled_at + timedelta(seconds=4)

    now = leave(api, table_id, first)
    assert now["seats"][0] is None and now["match_id"] is None
    # Bots are due for the seat once the rest is over (`at`: until when), not at once.
    assert now["waiting"]["what"] == "bots"
    assert datetime.fromisoformat(now["waiting"]["at"]) == rest_over
    run_burst(rconn)
    sweeper.scan_tables()
    run_burst(rconn)
    assert table(api, table_id, third)["match_id"] is None, "dealt inside the rest"
    # The second leaves inside the rest: between hands, at once, and it costs nothing.
    now = leave(api, table_id, second)
    assert now["match_id"] is None and now["seats"][1] is None
    items = feed_until(api, second, lambda items: items and items[-1]["type"] == "left")
    assert items[-1]["at_hand_end"] is False and items[-1]["table_id"] == table_id
    assert [i["type"] for i in items if i.get("match_id") not in (None, hand_1)] == []
    assert "taken_over" not in [i["type"] for i in items]
    # The third stays: once the rest is over the bots take the seats, and hand 2 is dealt.
    while datetime.now(UTC) < rest_over + timedelta(seconds=0.2):
        time.sleep(0.1)
    sweeper.scan_tables()
    run_burst(rconn)
    now = table(api, table_id, third)
    assert [s["bot"] for s in now["seats"]] == [True, True, False, True]
    assert now["match_id"] is not None and now["hands"] == 1
    (dealt_at,) = recorded(db, table_id, "hand_started")[1:]
    assert dealt_at >= rest_over
    # Those who left paid for hand 1 only: nothing moved for them since.
    for player in (first_id, second_id):
        (entries,) = db.execute(
            "SELECT count(*) FROM ledger_entries WHERE account = %s AND match_id <> %s",
            (f"player:{player}", hand_1),
        ).fetchone()
        assert entries == 0


def test_your_turn_comes_once_when_a_seat_leaves_between_a_play_and_the_next_turn(
    api, rconn, jobs_env
):
    """Seat 1's your_turn, then seat 0's disconnect (it left the table): no second
    your_turn for the same decision, and the one given is good to answer."""
    (a_id, a), (b_id, b) = people(api, 2)
    table_id = new_table(api, a, bots_after=0, next_hand_seconds=60, turn_seconds=60)["table_id"]
    assert join(api, table_id, b).status_code == 201
    run_burst(rconn)
    match_id = table(api, table_id, a)["match_id"]
    path = f"/v1/matches/{match_id}"
    given = None
    for _ in range(300):
        run_burst(rconn)
        view = api.get(path, headers=bearer(a)).json
        assert view["phase"] != "ended", "seat 1's turn never followed seat 0's decision"
        token = {0: a, 1: b}.get(view["turn"])
        if token is None:
            continue  # a bot's turn: its job runs in the next burst
        view = api.get(path, headers=bearer(token)).json
        if not view["actions"]:
            continue
        body = {**choose(api, match_id, token, view), "expected_version": view["version"]}
        r = api.post(f"{path}/commands", json=body, headers=bearer(token))
        assert r.status_code == 200, r.json
        if token == a and r.json["view"]["turn"] == 1:
            given = r.json["version"]
            break
    assert given is not None
    assert leave(api, table_id, a)["seats"][0]["leaving"] is True
    # Seat 0's stream says it was taken over; seat 1's has everything up to there by then.
    feed_until(api, a, lambda items: any(i["type"] == "taken_over" for i in items))
    turns = [i["version"] for i in feed(api, b)["items"] if i["type"] == "your_turn"]
    assert [v for v in turns if v >= given] == [given]
    # The match moved on (the disconnect), the decision did not: the answer is taken.
    view = api.get(path, headers=bearer(b)).json
    assert view["version"] == given + 1 and view["turn"] == 1
    body = {**choose(api, match_id, b, view), "expected_version": given}
    r = api.post(f"{path}/commands", json=body, headers=bearer(b))
    assert r.status_code == 200, r.json
    # Once seat 1 has answered, that version is stale as ever.
    again = {"action": "pass", "expected_version": given}
    r = api.post(f"{path}/commands", json=again, headers=bearer(b))
    assert r.status_code == 409 and r.json["code"] == "version_conflict", r.json


def test_a_person_sits_at_one_table_and_a_bot_account_at_a_few(api, rconn, jobs_env):
    (me_id, me), (other_id, other) = people(api, 2)
    mine = new_table(api, me)["table_id"]
    theirs = new_table(api, other)["table_id"]
    for r in (
        join(api, theirs, me),
        api.post("/v1/tables", json={}, headers=bearer(me)),
        api.post("/v1/lobby/tickets", json={"unit": "8.00"}, headers=bearer(me)),
    ):
        assert r.status_code == 409 and r.json["code"] == "seated_elsewhere", r.json
        assert r.json["table_id"] == mine
    assert table(api, theirs, other)["seats"][1] is None
    leave(api, mine, me)
    waiting = ticket(api, me, unit="8.00", allow_bots=False)
    # A waiting ticket is a table to come: no other seat meanwhile.
    r = join(api, theirs, me)
    assert r.status_code == 409 and r.json["code"] == "ticket_waiting", r.json
    assert r.json["ticket_id"] == waiting["ticket_id"]
    api.delete(f"/v1/lobby/tickets/{waiting['ticket_id']}", headers=bearer(me))
    assert join(api, theirs, me).status_code == 201
    # A bot account (a program) may follow a few tables: DDZ_BOT_ACCOUNT_TABLES, 4 here.
    r = api.post("/v1/players", json={"name": "engine", "bot_account": True}, headers=bearer(me))
    engine = r.json["token"]
    tables = [new_table(api, engine)["table_id"] for _ in range(4)]
    r = api.post("/v1/tables", json={}, headers=bearer(engine))
    assert r.status_code == 409 and r.json["code"] == "seated_elsewhere"
    assert r.json["table_id"] in tables


def test_a_seat_freed_between_hands_goes_to_a_waiting_ticket_before_the_bots(api, rconn, jobs_env):
    (a_id, a), (b_id, b) = people(api, 2)
    # The lobby's settings for a stake of 9.00 (the other options as a ticket's table has them).
    table_id = new_table(api, a, unit="9.00", bots_after=0, next_hand_seconds=60)["table_id"]
    assert join(api, table_id, b).status_code == 201
    run_burst(rconn)
    hand_1 = table(api, table_id, a)["match_id"]
    play_hand(api, hand_1, {a_id: a, b_id: b}, rconn)
    run_burst(rconn)
    assert leave(api, table_id, b)["seats"][1] is None
    (picky_id, picky), (easy_id, easy) = people(api, 2)
    refused = ticket(api, picky, unit="9.00", allow_bots=False)  # this table has bots
    wanted = ticket(api, easy, unit="9.00")
    assert match_tickets() >= 1
    now = table(api, table_id, a)
    assert [s["player"] for s in now["seats"]] == [a_id, easy_id, None, None]
    assert [s["bot"] for s in now["seats"]] == [False, False, True, True]
    # Seated there by its ticket, as the lobby says and the player's stream too; the
    # next hand still waits for the rest after the last.
    assert ticket_now(api, easy, wanted["ticket_id"])["table_id"] == table_id
    (seated,) = feed_until(api, easy, lambda items: items)
    assert seated["type"] == "seated" and seated["ticket_id"] == wanted["ticket_id"]
    assert now["match_id"] is None and now["waiting"]["what"] == "deal"
    assert ticket_now(api, picky, refused["ticket_id"])["status"] == "waiting"
    api.delete(f"/v1/lobby/tickets/{refused['ticket_id']}", headers=bearer(picky))


def test_the_lobby_seats_a_ticket_again_and_again_where_tickets_sat_before(api, rconn, jobs_env):
    """A seat of a lobby table that a ticket's player left between hands is refilled by
    the next ticket, and again when that one leaves. Found by the soak: the lobby kept one
    ticket to a seat of a table for ever, so the first refill of such a seat failed, and
    with it every later pass of the matcher: nobody was seated from the lobby again."""
    four = people(api, 4)
    for _, token in four:
        ticket(api, token, unit="17.00", allow_bots=False)
    assert match_tickets(next_hand_seconds=60) >= 1
    host = four[0][1]
    table_id = api.get("/v1/me/tables", headers=bearer(host)).json["tables"][0]["table_id"]
    run_burst(rconn)
    play_hand(api, table(api, table_id, host)["match_id"], dict(four), rconn)
    run_burst(rconn)
    leaving = dict(four)[table(api, table_id, host)["seats"][3]["player"]]
    for n in range(2):
        leave(api, table_id, leaving)  # between hands: the rest lasts a minute
        late_id, leaving = new_player(api, f"late{n}")
        waiting = ticket(api, leaving, unit="17.00", allow_bots=False)
        assert match_tickets() >= 1
        assert table(api, table_id, host)["seats"][3]["player"] == late_id
        assert ticket_now(api, leaving, waiting["ticket_id"])["table_id"] == table_id


@pytest.mark.parametrize(
    "refused",
    [
        psycopg.errors.UniqueViolation("a refill the database refuses"),
        VersionConflict("another pass refilled it first"),
        GameError("a refill the table's state refuses"),
    ],
    ids=["database", "race", "rules"],
)
def test_a_table_the_lobby_cannot_refill_holds_up_no_other_ticket(
    api, rconn, jobs_env, monkeypatch, caplog, refused
):
    """One table's refill that fails (the database refuses it, another pass came first,
    the table's state refuses it) is skipped and logged: the matcher still seats the other
    tickets, where one failure stopped every later pass."""
    tables = workers.context.context().tables
    refillable = tables.table_store.refillable

    def with_a_broken_table():
        return [(uuid.uuid4(), {"broken": True}, False), *refillable()]

    def refill(table_id, settings, ladder):
        raise refused

    monkeypatch.setattr(tables.table_store, "refillable", with_a_broken_table)
    monkeypatch.setattr(tables, "_refill", refill)
    four = people(api, 4)
    waiting = [ticket(api, token, unit="19.00", allow_bots=False) for _, token in four]
    assert match_tickets() >= 1
    assert {
        ticket_now(api, tok, w["ticket_id"])["status"] for (_, tok), w in zip(four, waiting)
    } == {"seated"}
    assert "could not refill table" in caplog.text


def test_the_lobby_seats_no_bot_account_with_its_owner_and_no_one_picks_a_seat_it_gave(
    api, rconn, jobs_env
):
    """Where hands are rated nobody chooses their opponents: the lobby never seats one
    person's accounts together (a person and its bot accounts, or two of its bot
    accounts), and nobody takes a seat at a table the lobby made but through the lobby
    (403 ``lobby_table``), where a friend could join a friend before."""
    owner_id, owner = new_player(api, "owner")
    programs = []
    for n in range(2):
        r = api.post(
            "/v1/players", json={"name": f"program{n}", "bot_account": True}, headers=bearer(owner)
        )
        programs.append((r.json["player_id"], r.json["token"]))
    strangers = people(api, 2)
    # Five tickets of three people: no table of four.
    for _, token in [(owner_id, owner), *programs, *strangers]:
        ticket(api, token, unit="13.00", allow_bots=False)
    assert match_tickets() == 0
    # A fourth person: the owner (waiting longest of the three) sits with the others.
    late_id, late = new_player(api, "fourth")
    ticket(api, late, unit="13.00", allow_bots=False)
    assert match_tickets() == 1
    table_id = api.get("/v1/me/tables", headers=bearer(late)).json["tables"][0]["table_id"]
    seated = {s["player"] for s in table(api, table_id, late)["seats"]}
    assert seated == {owner_id, late_id, *(p for p, _ in strangers)}
    assert table(api, table_id, late)["rated"] is True
    # Only the lobby seats there: a seat asked for is refused, full table or not.
    r = join(api, table_id, programs[0][1])
    assert r.status_code == 403 and r.json["code"] == "lobby_table", r.json


def test_a_table_of_people_only_that_no_one_refills_closes_and_says_so(api, rconn, jobs_env):
    four = people(api, 4)
    host = four[0][1]
    table_id = new_table(api, host, unit="11.00", next_hand_seconds=1, close_after=1)["table_id"]
    for _, token in four[1:]:
        assert join(api, table_id, token).status_code == 201
    run_burst(rconn)
    play_hand(api, table(api, table_id, host)["match_id"], dict(four), rconn)
    run_burst(rconn)
    now = leave(api, table_id, four[3][1])
    assert now["waiting"]["what"] == "close" and now["close_after"] == 1
    # The lobby refills it first, with a ticket that allows no bots (none are coming) ...
    late_id, late = new_player(api, "late")
    ticket(api, late, unit="11.00", allow_bots=False)
    assert match_tickets() >= 1
    assert table(api, table_id, host)["seats"][3]["player"] == late_id
    # ... who leaves before the rest is over: after its wait, the table closes.
    leave(api, table_id, late)
    time.sleep(1.1)
    sweeper.scan_tables()
    run_burst(rconn)
    now = table(api, table_id, host)
    assert now["closed"] is True and now["seats"] == [None] * 4 and now["waiting"] is None
    for seat, (_, token) in enumerate(four[:3]):
        items = feed_until(api, token, lambda items: items and items[-1]["type"] == "table_closed")
        assert {k: items[-1][k] for k in ("table_id", "seat", "hands")} == {
            "table_id": table_id,
            "seat": seat,
            "hands": 1,
        }
    r = join(api, table_id, late)
    assert r.status_code == 409 and r.json["code"] == "table_closed"
    assert api.get("/v1/me/tables", headers=bearer(host)).json["tables"] == []


def test_a_leave_during_a_hand_says_leaving_then_left_with_the_hand_number(api, rconn, jobs_env):
    (a_id, a), (b_id, b) = people(api, 2)
    table_id = new_table(api, a, bots_after=0, next_hand_seconds=60, turn_seconds=60)["table_id"]
    assert join(api, table_id, b).status_code == 201
    run_burst(rconn)
    match_id = table(api, table_id, a)["match_id"]
    assert leave(api, table_id, b)["seats"][1]["leaving"] is True
    items = feed_until(api, b, lambda items: "taken_over" in [i["type"] for i in items])
    assert [i["type"] for i in items][-2:] == ["leaving", "taken_over"]
    assert {k: items[-2][k] for k in ("table_id", "seat", "hand_number")} == {
        "table_id": table_id,
        "seat": 1,
        "hand_number": 1,
    }
    play_hand(api, match_id, {a_id: a}, rconn)
    run_burst(rconn)
    items = feed_until(api, b, lambda items: items and items[-1]["type"] == "left")
    assert [i["type"] for i in items][-3:] == ["hand_ended", "settled", "left"]
    assert items[-1]["at_hand_end"] is True and items[-1]["hand_number"] == 1
    # Every item about the hand names it: hand 1 of the table.
    about = [i for i in items if i["type"] not in ("seated",)]
    assert {i["hand_number"] for i in about} == {1}
    assert {i["match_id"] for i in about if "match_id" in i} == {match_id}


def test_a_zero_stake_is_refused_as_the_contract_says(api, jobs_env):
    _, token = new_player(api, "zero")
    spec = committed_document()
    for schema in ("TableCreate", "TicketCreate"):
        for field in ("unit", "cap"):
            pattern = spec["components"]["schemas"][schema]["properties"][field]["pattern"]
            assert not re.match(pattern, "0") and re.match(pattern, "0.01"), (schema, field)
    for path in ("/v1/tables", "/v1/lobby/tickets"):
        for body in ({"unit": "0"}, {"unit": "0.00"}, {"cap": "0"}):
            r = api.post(path, json=body, headers=bearer(token))
            assert r.status_code == 422 and r.json["code"] == "invalid_request", (path, r.json)


def test_an_invite_code_never_reads_as_a_command_line_option():
    """One code in 64 drawn as URL-safe base64 began with ``-``, and ``ddz bridge --invite
    CODE`` then refused it (``expected one argument``)."""
    codes = [new_invite() for _ in range(4096)]
    assert not [c for c in codes if c.startswith("-")]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{16}", c) for c in codes)
    assert len(set(codes)) == len(codes)
