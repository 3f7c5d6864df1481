"""Ratings (docs/ratings.md): the model's update of a hand; each settled hand rated exactly
once by the rating job, under retries, replays and two runs at once; rebuilt from the
events to the same ratings; the leaderboards' order and pages, the public profile and the
caller's history, over the API with real RQ workers (burst mode, in this process)."""

from __future__ import annotations

import threading
import uuid

import pytest
from api_support import bearer
from jobs import drain, human_match, new_player, play_hand, run_burst

import workers.context
import workers.jobs
from service.app import work
from service.app.ratings import rebuild
from service.game.ratings import PROVISIONAL_HANDS, RatedHand, Rating, rate
from service.store.ratings import RatingStore
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


def played_hand(api, rconn) -> tuple[str, dict[str, str]]:
    """A hand of two people and two system bots played to its end and settled."""
    match_id, players = human_match(api, 2, turn_seconds=60)
    tokens = dict(players)
    play_hand(api, match_id, tokens, rconn)
    drain(rconn)
    return match_id, tokens


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


def rated_player(api, db, name: str, mu: float, sigma: float, bot_account: bool = False) -> str:
    """A player with a rating set here (the leaderboard's order is what is tested)."""
    r = api.post("/v1/players", json={"name": name, "bot_account": bot_account})
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
