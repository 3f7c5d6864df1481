"""Ratings (docs/ratings.md): the model's update of a hand; each settled hand rated exactly
once by the rating job, under retries, replays and two runs at once; rebuilt from the
events to the same ratings; only the lobby's tables rated; an operator's void of a hand's
rating, honoured by the rebuild; the leaderboards' order and pages, the public profile and
the caller's history, over the API with real RQ workers (burst mode, in this process)."""

from __future__ import annotations

import itertools
import threading
import uuid

import pytest
from api_support import bearer
from jobs import drain, human_match, join, new_player, new_table, play_hand, run_burst

import workers.context
import workers.jobs
from service.app import work
from service.app.ratings import rebuild
from service.game.ratings import PROVISIONAL_HANDS, RatedHand, Rating, rate
from service.store.ratings import NOT_SETTLED, VOIDED, VOIDED_ALREADY, RatingStore
from workers import sweeper
from workers.jobs import rate_hand

PLATFORM = "shanghai-platform"


def hand(landlord_won: bool, disconnected: frozenset[int] = frozenset()) -> RatedHand:
    return RatedHand(PLATFORM, ("a", "b", "c", None), 0, landlord_won, disconnected)


def by_player(changes) -> dict:
    return {c.player: c for c in changes}


def test_the_winners_go_up_and_the_losers_down_the_landlord_three_times_a_farmer():
    won = by_player(rate(hand(True), {}))
    assert set(won) == {"a", "b", "c"}, "a system bot's seat is no rated player"
    landlord, farmer = won["a"], won["b"]
    assert landlord.won and not farmer.won
    assert landlord.after.mu > 25 > farmer.after.mu
    assert landlord.after.mu - 25 == pytest.approx(3 * (25 - farmer.after.mu), rel=0.2)
    assert all(c.after.sigma < c.before.sigma and c.after.hands == 1 for c in won.values())
    lost = by_player(rate(hand(False), {}))
    assert lost["a"].after.mu < 25 < lost["b"].after.mu and lost["b"].won


def test_a_seat_the_system_played_after_a_disconnect_is_its_players_loss():
    # The landlord's side won, but its player had left: a loss for it, not for the others.
    changes = by_player(rate(hand(True, frozenset({0})), {}))
    assert not changes["a"].won and changes["a"].after.mu < 25
    assert changes["b"].after.mu < 25  # the farmers lost the hand all the same
    # A farmer who left while the farmers won loses; the other farmer wins.
    changes = by_player(rate(hand(False, frozenset({1})), {}))
    assert not changes["b"].won and changes["b"].after.mu < 25
    assert changes["c"].won and changes["c"].after.mu > 25


def test_a_rating_is_provisional_until_enough_hands():
    assert Rating(hands=PROVISIONAL_HANDS - 1).provisional
    assert not Rating(hands=PROVISIONAL_HANDS).provisional
    assert Rating(30.0, 2.0).conservative == 24.0


def ratings_of(db, players) -> dict[str, tuple]:
    rows = db.execute(
        "SELECT player_id::text, ruleset, mu, sigma, hands FROM ratings"
        " WHERE player_id = ANY(%s::uuid[])",
        (list(players),),
    ).fetchall()
    return {row[0]: row[1:] for row in rows}


def changes_of(db, match_id: str) -> list[tuple]:
    return db.execute(
        "SELECT player_id::text, won, hands FROM rating_changes WHERE match_id = %s",
        (match_id,),
    ).fetchall()


@pytest.fixture()
def ratings_unqueued(monkeypatch, jobs_env):
    """The settlements enqueue no rating job (as when Redis loses it): the test runs the
    ratings itself."""
    monkeypatch.setattr(workers.jobs, "rate_later", lambda connection, match_id: None)


#: Each quick match here at a stake of its own, so that the lobby seats its tickets alone.
_stakes = itertools.count(101)


def lobby_hand(api, rconn, players: list[tuple[str, str]]) -> str:
    """A quick match of these players (the lobby's table, system bots in the seats left),
    its first hand played to its end and settled; the table then rests a minute."""
    unit = f"{next(_stakes)}.00"
    for _, token in players:
        r = api.post("/v1/lobby/tickets", json={"unit": unit}, headers=bearer(token))
        assert r.status_code == 201, r.json
    assert workers.context.context().tables.match_tickets(0, 60) == 1
    run_burst(rconn)  # the table deals
    table_id = api.get("/v1/me/tables", headers=bearer(players[0][1])).json["tables"][0]
    table = api.get(f"/v1/tables/{table_id['table_id']}", headers=bearer(players[0][1])).json
    assert table["rated"] is True
    play_hand(api, table["match_id"], dict(players), rconn)
    drain(rconn)
    return table["match_id"]


def played_hand(api, rconn) -> tuple[str, dict[str, str]]:
    """A quick match's hand of two new people and two system bots, played and settled."""
    players = [new_player(api, f"q{i}") for i in range(2)]
    return lobby_hand(api, rconn, players), dict(players)


@pytest.mark.slow
def test_a_settled_hand_is_rated_once_under_retries_replays_and_runs_at_once(
    api, db, rconn, ratings_unqueued
):
    match_id, tokens = played_hand(api, rconn)
    assert changes_of(db, match_id) == []
    # Two runs at once, then the job as the settlement enqueues it, a retry, a replay.
    answers: list[str] = []
    runs = [threading.Thread(target=lambda: answers.append(rate_hand(match_id))) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert sorted(answers) == ["rated 2 players", "rated already"]
    rated = ratings_of(db, tokens)
    assert {hands for _, _, _, hands in rated.values()} == {1}
    assert sorted(hands for _, _, hands in changes_of(db, match_id)) == [1, 1]
    job_id = work.id_of_job(work.RATE_HAND, match_id, 0)
    work.rate_later(rconn, match_id)
    run_burst(rconn)
    assert rate_hand(match_id) == "rated already"
    sweeper.forget(rconn, job_id)
    assert work.enqueue_once(rconn, job_id, work.RATE_HAND, match_id)
    run_burst(rconn)
    assert ratings_of(db, tokens) == rated
    assert len(changes_of(db, match_id)) == 2
    assert match_id not in {str(m) for m in RatingStore(workers.context.context().pool).pending()}
    # The player's own history shows the hand.
    player, token = next(iter(tokens.items()))
    history = api.get("/v1/me/ratings", headers=bearer(token)).json
    assert [c["match_id"] for c in history["changes"]] == [match_id]
    assert history["ratings"][0]["hands"] == 1 and history["ratings"][0]["provisional"]
    change = history["changes"][0]
    assert change["after"]["mu"] == pytest.approx(rated[player][1])


@pytest.mark.slow
def test_a_lost_rating_job_is_found_by_the_sweep_and_a_rebuild_gives_the_same(
    api, db, rconn, ratings_unqueued
):
    matches = []
    players: dict[str, str] = {}
    for _ in range(2):
        match_id, tokens = played_hand(api, rconn)
        matches.append(match_id)
        players |= tokens
    # Settled, and their rating jobs lost: the sweep finds them.
    assert sweeper.sweep()[work.RATE_HAND] >= 2
    drain(rconn)
    for match_id in matches:
        assert len(changes_of(db, match_id)) == 2
    before = ratings_of(db, players)
    assert all(hands == 1 for _, _, _, hands in before.values())
    ctx = workers.context.context()
    assert rebuild(ctx.store, RatingStore(ctx.pool)) >= 2
    after = ratings_of(db, players)
    assert after.keys() == before.keys()
    for player, (ruleset, mu, sigma, hands) in before.items():
        assert after[player][0] == ruleset and after[player][3] == hands
        assert after[player][1:3] == pytest.approx((mu, sigma))
    for match_id in matches:
        assert len(changes_of(db, match_id)) == 2


def leave_tables(api, *players: tuple[str, str]) -> None:
    """Each player leaves the table where it sits (in its rest: free of charge)."""
    for _, token in players:
        table = api.get("/v1/me/tables", headers=bearer(token)).json["tables"][0]["table_id"]
        assert api.post(f"/v1/tables/{table}/leave", headers=bearer(token)).status_code == 200


def my_match(api, token: str, match_id: str) -> dict:
    """The hand as the caller's own list shows it."""
    listed = api.get("/v1/me/matches", headers=bearer(token)).json["matches"]
    return next(m for m in listed if m["match_id"] == match_id)


def rated_hands(api, player_id: str) -> int:
    return api.get(f"/v1/players/{player_id}").json["hands"]


@pytest.mark.slow
def test_only_the_lobbys_tables_rate_hands_and_a_private_tables_say_they_do_not(
    api, db, rconn, jobs_env
):
    """A private table's hand was rated (a profile showed one rated hand after one private
    hand): a person with a few accounts at a private table moved ratings at will. Now a
    hand is rated only where nobody chose their opponents: for the people at the lobby's
    quick match (a bot account there plays unrated); not at a private table (which says so
    when it is made, and in the players' history), nor at a match of POST /v1/matches."""
    # A private table: two people, system bots in the other seats.
    (host_id, host), (guest_id, guest) = new_player(api, "host"), new_player(api, "guest")
    created = new_table(api, host, private=True, bots_after=0, next_hand_seconds=60)
    assert created["rated"] is False and created["private"] is True
    assert join(api, created["table_id"], guest, invite=created["invite"]).status_code == 201
    run_burst(rconn)
    private = api.get(f"/v1/tables/{created['table_id']}", headers=bearer(host)).json["match_id"]
    play_hand(api, private, {host_id: host, guest_id: guest}, rconn)
    drain(rconn)
    # A match of POST /v1/matches.
    alone, players = human_match(api, 2, turn_seconds=60)
    play_hand(api, alone, dict(players), rconn)
    drain(rconn)
    for match_id, token in ((private, host), (alone, players[0][1])):
        assert changes_of(db, match_id) == []
        assert my_match(api, token, match_id)["rated"] is False
    assert rated_hands(api, host_id) == rated_hands(api, guest_id) == 0
    # The lobby's quick match: its people are rated, a bot account among them is not.
    people = [new_player(api, f"quick{i}") for i in range(2)]
    owner = new_player(api, "its owner")[1]
    r = api.post(
        "/v1/players", json={"name": "program", "bot_account": True}, headers=bearer(owner)
    )
    program = (r.json["player_id"], r.json["token"])
    quick = lobby_hand(api, rconn, [*people, program])
    assert sorted(p for p, _, _ in changes_of(db, quick)) == sorted(p for p, _ in people)
    for player_id, token in people:
        assert my_match(api, token, quick)["rated"] is True
        assert rated_hands(api, player_id) == 1
    assert my_match(api, program[1], quick)["rated"] is False
    assert rated_hands(api, program[0]) == 0


@pytest.mark.slow
def test_an_operators_void_takes_a_hands_rating_back_and_a_rebuild_leaves_it_out(
    api, db, rconn, ratings_unqueued
):
    """An operator voids a hand's rating effect: each change it made is taken back from
    the rating as it stands, the history says so, and ``ddz ratings rebuild`` makes every
    rating as if the hand had never been rated; a hand voided before its rating job rates
    no one."""
    p, q, r = (new_player(api, name) for name in ("p", "q", "r"))
    farmed = lobby_hand(api, rconn, [p, q])
    leave_tables(api, p, q)
    fair = lobby_hand(api, rconn, [p, r])
    for match_id in (farmed, fair):
        assert rate_hand(match_id) == "rated 2 players"
    before = ratings_of(db, [p[0], q[0]])
    assert before[p[0]][3] == 2
    ctx = workers.context.context()
    store = RatingStore(ctx.pool)
    assert store.void(uuid.UUID(farmed), "ada", "the two are one person") == VOIDED
    assert store.void(uuid.UUID(farmed), "ada", "again") == VOIDED_ALREADY
    assert store.void(uuid.uuid4(), "ada", "no such hand") == NOT_SETTLED
    assert store.voided(uuid.UUID(farmed)).reason == "the two are one person"
    after = ratings_of(db, [p[0], q[0]])
    (change,) = [
        c
        for c in db.execute(
            "SELECT mu_before, mu FROM rating_changes WHERE match_id = %s AND player_id = %s",
            (farmed, p[0]),
        ).fetchall()
    ]
    assert after[p[0]][3] == 1
    assert after[p[0]][1] == pytest.approx(before[p[0]][1] - (change[1] - change[0]))
    # q's only hand was the farmed one: back to a new player's rating.
    assert after[q[0]][1:] == pytest.approx((Rating().mu, Rating().sigma, 0))
    history = api.get("/v1/me/ratings", headers=bearer(p[1])).json["changes"]
    assert {c["match_id"]: c["voided"] for c in history} == {farmed: True, fair: False}
    # The rebuild: as if the farmed hand had never been rated.
    rebuild(ctx.store, store)
    assert changes_of(db, farmed) == []
    assert ratings_of(db, [p[0]])[p[0]][3] == 1
    assert [
        c["match_id"] for c in api.get("/v1/me/ratings", headers=bearer(p[1])).json["changes"]
    ] == [fair]
    # Voided before its rating job: rated for no one.
    leave_tables(api, p, r)
    early = lobby_hand(api, rconn, [p, r])
    assert store.void(uuid.UUID(early), "ada", "collusion") == VOIDED
    assert rate_hand(early) == "rated 0 players"
    assert changes_of(db, early) == []
    assert my_match(api, p[1], early)["rated"] is False


def rated_player(api, db, name: str, mu: float, sigma: float, bot_account: bool = False) -> str:
    """A player with a rating set here (the leaderboard's order is what is tested); a bot
    account registered by a new person."""
    headers = bearer(new_player(api, f"{name}'s owner")[1]) if bot_account else {}
    r = api.post("/v1/players", json={"name": name, "bot_account": bot_account}, headers=headers)
    assert r.status_code == 201, r.json
    player_id = r.json["player_id"]
    db.execute(
        "INSERT INTO ratings (player_id, ruleset, bot_account, mu, sigma, hands)"
        " VALUES (%s, %s, %s, %s, %s, 25)",
        (player_id, PLATFORM, bot_account, mu, sigma),
    )
    return player_id


def whole_board(api, kind: str, limit: int) -> list[dict]:
    rows, cursor = [], None
    while True:
        query = {"ruleset": PLATFORM, "kind": kind, "limit": limit}
        if cursor:
            query["cursor"] = cursor
        r = api.get("/v1/leaderboards", query_string=query)
        assert r.status_code == 200, r.json
        rows += r.json["players"]
        cursor = r.json["next_cursor"]
        if cursor is None:
            return rows


def test_the_leaderboard_orders_by_conservative_rating_page_by_page(api, db):
    # mu 30 sigma 1 (27) above mu 40 sigma 5 (25) above mu 26 sigma 1 (23), twice 23.
    steady = rated_player(api, db, "steady", 30.0, 1.0)
    lucky = rated_player(api, db, "lucky", 40.0, 5.0)
    ties = sorted(rated_player(api, db, f"tie{i}", 26.0, 1.0) for i in range(2))
    program = rated_player(api, db, "program", 50.0, 1.0, bot_account=True)
    rows = whole_board(api, "people", limit=2)
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(a["rating"] >= b["rating"] for a, b in zip(rows, rows[1:]))
    mine = [r["player_id"] for r in rows if r["player_id"] in {steady, lucky, *ties}]
    assert mine == [steady, lucky, *ties]
    assert program not in {r["player_id"] for r in rows}
    assert program in {r["player_id"] for r in whole_board(api, "bots", limit=100)}
    first = next(r for r in rows if r["player_id"] == steady)
    assert first["rating"] == pytest.approx(27.0) and first["name"] == "steady"
    assert first["provisional"] is False
    r = api.get("/v1/leaderboards", query_string={"cursor": "bm90LWEtY3Vyc29y"})
    assert r.status_code == 422 and r.json["code"] == "invalid_cursor"


def test_a_profile_is_public_and_the_history_is_the_callers(api, db):
    player_id = rated_player(api, db, "shown", 30.0, 2.0, bot_account=True)
    r = api.get(f"/v1/players/{player_id}")
    assert r.status_code == 200, r.json
    profile = r.json
    assert profile["name"] == "shown" and profile["bot_account"] is True
    assert profile["hands"] == 25 and profile["ratings"][0]["ruleset"] == PLATFORM
    assert profile["ratings"][0]["rating"] == pytest.approx(24.0)
    r = api.get(f"/v1/players/{uuid.uuid4()}")
    assert r.status_code == 404 and r.json["code"] == "player_not_found"
    # A new player's history is empty, and its profile has no rating yet.
    new_id, token = new_player(api, "fresh")
    r = api.get("/v1/me/ratings", headers=bearer(token))
    assert r.status_code == 200 and r.json == {"ratings": [], "changes": [], "next_cursor": None}
    assert api.get(f"/v1/players/{new_id}").json["ratings"] == []
    assert api.get("/v1/me/ratings").status_code == 401
