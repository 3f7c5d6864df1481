"""The console's lists (service/store/reports.py): the search of matches by part of a
player's name (the same matches whether few players are named, found through the seats'
index, or many, whichever seat they sit in); every list read a page at a time by key, each
row once and in order both ways, across the parts of a sort; and the players' figures the
settlements and the ledger keep, the same as those made again from nothing."""

from __future__ import annotations

import uuid
from decimal import Decimal

import psycopg
from api_support import OP, bearer
from handplay import play_hand

from service.store import ledger, reports


def seated(client, name: str, seat: int) -> str:
    """A new player named ``name`` with a seat, ``seat``, at a new match of theirs."""
    token = client.post("/v1/players", json={"name": name}).json["token"]
    match_id = client.post("/v1/matches", json={}, headers=bearer(token)).json["match_id"]
    r = client.post(f"/v1/matches/{match_id}/seats", json={"seat": seat}, headers=bearer(token))
    assert r.status_code == 201, r.json
    return match_id


def found(app, text: str) -> tuple[set[str], int]:
    page = reports.matches(
        app.extensions["ddz"].pool, reports.MatchQuery(player=text), reports.At(), 25
    )
    return {str(row["match_id"]) for row in page.rows}, page.total


def test_a_name_search_finds_the_same_matches_for_few_players_as_for_many(app):
    client = app.test_client()
    tag = uuid.uuid4().hex[:8]
    many = reports.BY_INDEX_AT_LEAST + 2
    matches = {n: seated(client, f"{tag}-p{n}", n % 4) for n in range(many)}
    other = seated(client, f"x{uuid.uuid4().hex[:8]}", 2)
    # Many players named: every one of their matches, at any seat, and no other.
    assert found(app, tag) == (set(matches.values()), many)
    assert found(app, tag.upper()) == (set(matches.values()), many)  # any case
    # One player: through the index, the same answer for them.
    assert found(app, f"{tag}-p3") == ({matches[3]}, 1)
    assert other not in found(app, tag)[0]
    assert found(app, f"{tag}-nobody") == (set(), 0)


def walk(search) -> list[reports.Page]:
    """Every page of a list from its first, each reached by the previous one's key."""
    pages = [search(reports.At())]
    while pages[-1].after is not None:
        pages.append(search(reports.At(after=pages[-1].after)))
    return pages


def walk_back(search, last: reports.Page) -> list[reports.Page]:
    """The pages before ``last``, each reached by the next one's key, first to last."""
    pages = [last]
    while pages[0].before is not None:
        pages.insert(0, search(reports.At(before=pages[0].before)))
    return pages


def ids(pages: list[reports.Page], key: str) -> list[list[str]]:
    return [[str(row[key]) for row in page.rows] for page in pages]


def test_the_match_list_pages_by_key_through_settled_and_unsettled_matches(ops):
    """Sorted by the house's take, the settled matches come first, then those without a
    take yet: every match once, in order, by the next page's key and by the previous
    page's; an old link's page number lands on the same page."""
    app, connection, _ = ops
    client = app.test_client()
    pool = app.extensions["ddz"].pool
    tag = uuid.uuid4().hex[:8]
    settled = [play_hand(client, connection, f"{tag}-s{n}", seed=n) for n in range(3)]
    open_ = [seated(client, f"{tag}-o{n}", n % 4) for n in range(4)]
    for sort in ("house", "created"):
        for descending in (True, False):
            query = reports.MatchQuery(player=tag, sort=sort, descending=descending)

            def search(at, query=query):
                return reports.matches(pool, query, at, 2)

            pages = walk(search)
            listed = [row for page in pages for row in page.rows]
            assert sorted(str(m["match_id"]) for m in listed) == sorted(settled + open_)
            assert all(page.total == 7 and page.counted == "exact" for page in pages)
            assert [len(page.rows) for page in pages] == [2, 2, 2, 1]
            if sort == "house":
                houses = [m["house"] for m in listed[:3]]
                assert houses == sorted(houses, reverse=descending)
                assert {str(m["match_id"]) for m in listed[:3]} == set(settled)
                # Then the matches without a take, newest first whatever the order.
                assert [m["house"] for m in listed[3:]] == [None] * 4
                times = [m["created_at"] for m in listed[3:]]
                assert times == sorted(times, reverse=descending)
            else:
                times = [m["created_at"] for m in listed]
                assert times == sorted(times, reverse=descending)
            assert ids(walk_back(search, pages[-1]), "match_id") == ids(pages, "match_id")
            assert ids([search(reports.At(page=3))], "match_id") == ids(pages[2:3], "match_id")
            assert pages[0].before is None and search(reports.At(page=9)).rows == []


def test_the_players_page_pages_by_key_in_every_sort_and_finds_a_player(ops):
    app, connection, _ = ops
    client = app.test_client()
    pool = app.extensions["ddz"].pool
    tag = uuid.uuid4().hex[:8]
    play_hand(client, connection, f"{tag}-played")
    play_hand(client, connection, f"{tag}-left", leave=True)
    idle = [client.post("/v1/players", json={"name": f"{tag}-idle{n}"}).json for n in range(3)]
    for sort in reports.PLAYER_SORTS:
        for descending in (True, False):

            def search(at, sort=sort, descending=descending):
                return reports.players(pool, sort, descending, at, 2, search=tag.upper())

            pages = walk(search)
            listed = [row for page in pages for row in page.rows]
            assert len(listed) == 5 and len({row["player_id"] for row in listed}) == 5
            assert ids(walk_back(search, pages[-1]), "player_id") == ids(pages, "player_id")
            if sort == "rate":
                # The players with hands by their rate, then those without any.
                assert [row["rate"] for row in listed[2:]] == [None] * 3
                assert [row["rate"] for row in listed[:2]] == ([1, 0] if descending else [0, 1])
            else:
                keys = [(row[sort], str(row["player_id"])) for row in listed]
                assert keys == sorted(keys, reverse=descending)
    by_id = reports.players(pool, "name", False, reports.At(), 25, search=idle[1]["player_id"])
    assert [row["name"] for row in by_id.rows] == [f"{tag}-idle1"]
    names = {row["name"] for row in reports.players(pool, "rate", True, reports.At(), 25).rows}
    assert {f"{tag}-played", f"{tag}-left"} <= names


def test_the_players_figures_follow_every_settlement_and_adjustment(ops):
    """What the settlements and the ledger's entries keep in ``player_figures`` as they
    are written is what ``ddz rebuild`` makes of them from nothing."""
    app, connection, database_url = ops
    client = app.test_client()
    pool = app.extensions["ddz"].pool
    tag = uuid.uuid4().hex[:8]
    kept = play_hand(client, connection, f"{tag}-a")
    voided = play_hand(client, connection, f"{tag}-b", leave=True)
    with pool.connection() as conn:
        (player,) = conn.execute(
            "SELECT player_id FROM players WHERE name = %s", (f"{tag}-a",)
        ).fetchone()
    ledger.correct(pool, player, Decimal("12.50"), "ada", "a goodwill credit")
    assert ledger.void(pool, uuid.UUID(voided), "ada", "a test of voids") is not None
    with psycopg.connect(database_url) as conn:
        kept_rows = conn.execute(
            "SELECT player_id, balance, hands, disconnects FROM player_figures ORDER BY 1"
        ).fetchall()
        made = conn.execute("SELECT * FROM player_figures_made() ORDER BY 1").fetchall()
        mine = conn.execute(
            "SELECT p.name, f.balance, f.hands, f.disconnects FROM player_figures f"
            " JOIN players p USING (player_id) WHERE p.name LIKE %s ORDER BY 1",
            (f"{tag}-%",),
        ).fetchall()
    assert kept_rows == made
    settlement = client.get(f"/v1/matches/{kept}/settlement", headers=OP).json
    (a, b) = mine
    assert a[2:] == (1, 0) and b[2:] == (1, 1)
    assert a[1] == Decimal(settlement["net"][2]) + Decimal("12.50")
    assert b[1] == 0  # voided: every amount moved back
