"""The console's search of matches by part of a player's name (service/store/reports.py):
the same matches whether few players are named (found through the seats' index) or many
(one pass over the matches, each seat's player looked up among the names' ids), whichever
seat they sit in."""

from __future__ import annotations

import uuid

from api_support import bearer

from service.store import reports


def seated(client, name: str, seat: int) -> str:
    """A new player named ``name`` with a seat, ``seat``, at a new match of theirs."""
    token = client.post("/v1/players", json={"name": name}).json["token"]
    match_id = client.post("/v1/matches", json={}, headers=bearer(token)).json["match_id"]
    r = client.post(f"/v1/matches/{match_id}/seats", json={"seat": seat}, headers=bearer(token))
    assert r.status_code == 201, r.json
    return match_id


def found(app, text: str) -> tuple[set[str], int]:
    rows, total = reports.matches(
        app.extensions["ddz"].pool, reports.MatchQuery(player=text), 1, 25
    )
    return {str(row["match_id"]) for row in rows}, total


def test_a_name_search_finds_the_same_matches_for_few_players_as_for_many(app):
    client = app.test_client()
    tag = uuid.uuid4().hex[:8]
    many = reports.BY_INDEX_AT_MOST + 2
    matches = {n: seated(client, f"{tag}-p{n}", n % 4) for n in range(many)}
    other = seated(client, f"x{uuid.uuid4().hex[:8]}", 2)
    # Many players named: every one of their matches, at any seat, and no other.
    assert found(app, tag) == (set(matches.values()), many)
    assert found(app, tag.upper()) == (set(matches.values()), many)  # any case
    # One player: through the index, the same answer for them.
    assert found(app, f"{tag}-p3") == ({matches[3]}, 1)
    assert other not in found(app, tag)[0]
    assert found(app, f"{tag}-nobody") == (set(), 0)
