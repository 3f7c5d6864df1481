"""Who may do what with a match (docs/tables.md): only its seated players, or an operator,
seat system bots at it, so that nobody fills another's match with bots and a match of bots
alone is an operator's; stakes stay within the operators' bounds (``DDZ_MAX_UNIT``,
``DDZ_MAX_RAKE``); and the ledger holds the worst hand at the largest stake the contract
allows."""

from __future__ import annotations

import dataclasses
import uuid
from decimal import Decimal
from fractions import Fraction

import psycopg
from api_support import OP, bearer
from jobs import new_match, new_player, take_seat

from service.game import Factors, HandOutcome, settle
from service.game.settlement import HandResult
from service.game.state import Seat
from service.rules.cards import DECK
from service.rules.deal import SEATS
from service.store.ledger import write_settlement

#: The largest amount the contract's pattern allows (`^\d{1,9}(\.\d{1,2})?$`), and the
#: largest share.
LARGEST_UNIT, LARGEST_RAKE = Decimal("999999999.99"), Decimal("1")
#: The fewest cards a bomb has (docs/rules.md §2).
BOMB_CARDS = 4


def test_a_player_without_a_seat_cannot_seat_bots_at_another_s_match(client):
    _, owner = new_player(client, "owner")
    _, stranger = new_player(client, "stranger")
    match_id = new_match(client, owner)
    take_seat(client, match_id, owner, seat=0)
    path = f"/v1/matches/{match_id}"
    before = client.get(path, headers=bearer(owner)).json["version"]

    r = client.post(f"{path}/seats", json={"seat": 3, "bot": True}, headers=bearer(stranger))
    assert r.status_code == 403 and r.json["code"] == "not_seated", r.json
    assert client.get(path, headers=bearer(owner)).json["version"] == before  # nothing changed

    # The seated player may; so may an operator.
    assert take_seat(client, match_id, owner, bot=True, seat=3)["seats"][3]["bot"]
    r = client.post(f"{path}/seats", json={"seat": 2, "bot": True}, headers=OP)
    assert r.status_code == 201, r.json


def test_a_match_of_bots_alone_is_an_operator_s(client):
    _, token = new_player(client, "alone")
    match_id = new_match(client, token)
    for seat in range(4):
        r = client.post(
            f"/v1/matches/{match_id}/seats", json={"seat": seat, "bot": True}, headers=bearer(token)
        )
        assert r.status_code == 403 and r.json["code"] == "not_seated", r.json

    r = client.post("/v1/matches", json={"bot_level": "easy"}, headers=OP)
    assert r.status_code == 201, r.json
    match_id = r.json["match_id"]
    for seat in range(4):
        r = client.post(
            f"/v1/matches/{match_id}/seats", json={"seat": seat, "bot": True}, headers=OP
        )
        assert r.status_code == 201, r.json
    assert r.json["phase"] != "seating"  # dealt
    # An operator sits at no table, and an Idempotency-Key is a player's.
    r = client.post(f"/v1/matches/{match_id}/seats", json={}, headers=OP)
    assert r.status_code == 403 and r.json["code"] == "player_required"
    r = client.post("/v1/matches", json={}, headers={**OP, "Idempotency-Key": "k"})
    assert r.status_code == 403 and r.json["code"] == "player_required"


def test_stakes_beyond_the_operators_bounds_are_refused(client, app):
    config = app.extensions["ddz"].config
    _, token = new_player(client, "high roller")
    over_unit = str(config.max_unit + Decimal("0.01"))
    over_rake = str(config.max_rake + Decimal("0.01"))
    for path, body in (
        ("/v1/matches", {"unit": over_unit}),
        ("/v1/matches", {"rake": over_rake}),
        ("/v1/tables", {"unit": over_unit}),
        ("/v1/tables", {"rake": over_rake}),
        ("/v1/lobby/tickets", {"unit": over_unit}),
    ):
        r = client.post(path, json=body, headers=bearer(token))
        assert r.status_code == 422 and r.json["code"] == "stake_out_of_bounds", (path, r.json)
        assert ("DDZ_MAX_UNIT" if "unit" in body else "DDZ_MAX_RAKE") in r.json["detail"]
    # Operators are held to the bounds too; at the bounds, a match is made.
    r = client.post("/v1/matches", json={"unit": over_unit}, headers=OP)
    assert r.status_code == 422 and r.json["code"] == "stake_out_of_bounds"
    at_bounds = {"unit": str(config.max_unit), "rake": str(config.max_rake)}
    assert client.post("/v1/matches", json=at_bounds, headers=bearer(token)).status_code == 201


def worst_hand() -> HandOutcome:
    """The hand that moves the most: bid 3 with every factor, 明王, 头撂, 摊打, 报到 then 打,
    and as many bombs as a hand can hold. A hand ends when one seat plays its last card,
    so the three others keep a card each: at most 105 of the 108 cards are played, four
    or more to a bomb."""
    most_bombs = (len(DECK) - (SEATS - 1)) // BOMB_CARDS
    factors = Factors(
        marked_joker=True,
        first_bid_three=True,
        show_hand=True,
        report="play",
        report_units=1,
        bombs=most_bombs,
    )
    return HandOutcome(landlord=0, bid=3, winner="landlord", factors=factors, first_disconnect=0)


def test_the_worst_hand_at_the_largest_stake_settles_in_the_ledger(client, database_url):
    """numeric(16,2) held 10**14: a hand of 12 bombs at the largest unit overflowed it."""
    outcome = worst_hand()
    assert outcome.factors.bombs == 26
    settlement = settle(outcome, unit=LARGEST_UNIT, rake=LARGEST_RAKE)
    # The landlord's gain, whole to the house at a rake of 1: the largest ledger entry.
    assert settlement.multiplier == Fraction(32, 3) * 2**26
    largest = max(
        abs(a) for name in ("after_cap", "rake", "penalty") for a in getattr(settlement, name)
    )
    assert largest == settlement.rake[0] == Decimal("6442450943935575490.56")

    # The hand booked as the settlement job books it, on a match of the store.
    r = client.post("/v1/matches", json={}, headers=OP)
    match_id = uuid.UUID(r.json["match_id"])
    state = app_state(client, match_id)
    ended = dataclasses.replace(
        state, seats=(Seat(None, True),) * SEATS, result=HandResult(outcome, settlement)
    )
    with psycopg.connect(database_url) as conn:
        assert write_settlement(conn, match_id, ended)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT movement, kind, amount FROM ledger_entries WHERE match_id = %s", (match_id,)
        ).fetchall()
    assert max(abs(amount) for _, _, amount in rows) == largest
    balances: dict[int, Decimal] = {}
    for movement, _, amount in rows:
        balances[movement] = balances.get(movement, Decimal(0)) + amount
    assert set(balances.values()) == {Decimal(0)}


def app_state(client, match_id: uuid.UUID):
    return client.application.extensions["ddz"].store.load(match_id).state
