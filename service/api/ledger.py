"""Settlements and the ledger: a match's settlement breakdown, a player's balance and
entries, and the operators' check of the whole ledger."""

from __future__ import annotations

import uuid

import marshmallow as ma
from marshmallow import fields as f

from ..app import audit
from ..game import explain
from ..store import ledger
from .auth import caller, operator
from .documents import documented, load, seat_of
from .problems import ApiError
from .routing import Blueprint
from .schemas import FactorsSchema
from .services import services

bp = Blueprint("ledger", __name__, url_prefix="/v1", description="Settlements and the ledger")

AMOUNTS = f.List(
    f.String(),
    required=True,
    metadata={"description": "One decimal amount per seat, in seat order"},
)


class StepSchema(ma.Schema):
    key = f.String(
        required=True,
        metadata={"description": "multiplier, stake, report_no_play, cap, rake or penalty"},
    )
    zh = f.String(
        required=True, metadata={"description": "The step's name in Chinese (倍数, 封顶…)"}
    )
    en = f.String(required=True, metadata={"description": "The step's name in English"})
    formula = f.String(
        required=True,
        metadata={"description": "The step with its numbers, e.g. 1.00 × 3 × 32/3 = 32.00"},
    )
    rule = f.String(
        required=True,
        allow_none=True,
        metadata={"description": "The anchor of its section in docs/rules.md"},
    )


class ExplainedSchema(ma.Schema):
    steps = f.List(f.Nested(StepSchema), required=True)
    capped = f.Boolean(required=True, metadata={"description": "Whether the cap took something"})
    cap_took = f.String(
        required=True, metadata={"description": "What the cap took (0.00: nothing)"}
    )
    penalty_seat = f.Integer(
        required=True, allow_none=True, metadata={"description": "The seat that paid the penalty"}
    )


class SettlementSchema(ma.Schema):
    match_id = f.UUID(required=True)
    settled_at = f.DateTime(required=True)
    landlord = f.Integer(required=True)
    bid = f.Integer(required=True)
    winner = f.String(required=True)
    factors = f.Nested(FactorsSchema, required=True)
    multiplier = f.String(
        required=True, metadata={"description": "Exact: an integer or a fraction such as 16/3"}
    )
    first_disconnect = f.Integer(required=True, allow_none=True)
    gross = AMOUNTS
    after_cap = AMOUNTS
    rake = AMOUNTS
    penalty = AMOUNTS
    net = AMOUNTS
    house = f.String(required=True)
    explained = f.Nested(
        ExplainedSchema,
        required=True,
        metadata={"description": "The settlement step by step, as docs/rules.md §5 computes it"},
    )


class Entry(ma.Schema):
    entry_id = f.Integer(required=True)
    match_id = f.UUID(
        required=True,
        allow_none=True,
        metadata={"description": "The hand (the one voided, for a void); null for a correction"},
    )
    seat = f.Integer(required=True, allow_none=True)
    kind = f.String(
        required=True,
        metadata={
            "description": "stake, rake or penalty (a settlement's); correction or void (an "
            "operator's adjustment, docs/operations.md)"
        },
    )
    amount = f.String(required=True)
    created_at = f.DateTime(required=True)


class PlayerLedger(ma.Schema):
    player_id = f.UUID(required=True)
    balance = f.String(required=True)
    entries = f.List(f.Nested(Entry), required=True, metadata={"description": "Newest first"})


class LedgerCheck(ma.Schema):
    ok = f.Boolean(required=True)
    entries = f.Integer(required=True)
    matches = f.Integer(required=True)
    total = f.String(required=True)
    problems = f.List(f.String(), required=True)


@bp.route("/matches/<uuid:match_id>/settlement", methods=["GET"])
@bp.response(200, SettlementSchema)
@bp.doc(**documented(401, 403, 404))
def match_settlement(match_id: uuid.UUID):
    """The settlement of an ended hand, as written to the ledger: factors, multiplier,
    gross, after the cap, system cut, penalty, net and the house's share; and ``explained``,
    each step with its numbers, named in Chinese and English (the console's match page
    shows the same)."""
    who = caller()
    state = load(match_id).state
    if not who.operator and seat_of(state, who) is None:
        raise ApiError(
            403, "not_seated", "settlements are for the match's seated players and operators"
        )
    found = ledger.settlement(services().pool, match_id)
    if found is None:
        raise ApiError(404, "not_settled", "the hand has not been settled (yet)")
    assert state.result is not None and state.table is not None  # a settled hand ended
    found["explained"] = explain.explain(state.result, state.table)
    found["explained"]["cap_took"] = f"{found['explained']['cap_took']:.2f}"
    return found


@bp.route("/players/<uuid:player_id>/ledger", methods=["GET"])
@bp.response(200, PlayerLedger)
@bp.doc(**documented(401, 403))
def player_ledger(player_id: uuid.UUID):
    """A player's balance and ledger entries; a player sees only their own."""
    who = caller()
    if not who.operator and who.player_id != player_id:
        raise ApiError(403, "not_your_ledger", "a player sees only their own ledger")
    return ledger.player_ledger(services().pool, player_id)


@bp.route("/admin/ledger/check", methods=["GET"])
@bp.response(200, LedgerCheck)
@bp.doc(**documented(401, 403))
def check_ledger():
    """Every movement, every match and the whole ledger add to zero, and every settled
    match recomputed from its events equals its ledger entries; lists any difference."""
    operator()
    return audit.check_ledger(services().pool, services().store)
