"""Settlements and the ledger: a match's settlement breakdown, a player's balance and
entries, and the operators' check of the whole ledger: its stored verdicts, and the full
check in the background."""

from __future__ import annotations

import uuid

import marshmallow as ma
from flask import request, url_for
from marshmallow import fields as f

from ..app import work
from ..game import explain
from ..store import ledger
from .auth import admin, caller, operator
from .documents import documented, load, private_hands_hidden, seat_of
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


class FullCheck(ma.Schema):
    check_id = f.Integer(required=True)
    requested_by = f.String(required=True, metadata={"description": "The operator who asked"})
    requested_at = f.DateTime(required=True)
    hands = f.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "The settled hands it checks (null until a worker starts it)"},
    )
    done = f.Integer(required=True, metadata={"description": "The hands checked so far"})
    failing = f.Integer(required=True, metadata={"description": "Of those, the hands that fail"})
    problems = f.List(
        f.String(),
        required=True,
        metadata={"description": "What it found of the ledger as a whole (its total), once done"},
    )
    finished_at = f.DateTime(required=True, allow_none=True)
    running = f.Boolean(
        required=True,
        metadata={
            "description": "Neither finished nor stalled (no progress for 10 minutes: its job "
            "or worker lost, and another may be started)"
        },
    )


class LedgerCheck(ma.Schema):
    ok = f.Boolean(
        required=True,
        metadata={
            "description": "No stored verdict fails, nor did the newest full check find the "
            "ledger's total wrong"
        },
    )
    matches = f.Integer(required=True, metadata={"description": "The settled hands"})
    checked = f.Integer(required=True, metadata={"description": "Those with a stored verdict"})
    unchecked = f.Integer(
        required=True,
        metadata={
            "description": "Those without one yet (settled before verdicts were kept): the "
            "workers check them in the background"
        },
    )
    entries = f.Integer(required=True, metadata={"description": "The checked hands' entries"})
    total = f.String(required=True, metadata={"description": "What those entries add to"})
    failing = f.Integer(required=True, metadata={"description": "The hands whose verdict fails"})
    problems = f.List(
        f.String(),
        required=True,
        metadata={
            "description": "The problems of the first 50 failing hands, then those of the "
            "ledger as a whole the newest full check found"
        },
    )
    fully_checked_at = f.DateTime(
        required=True,
        allow_none=True,
        metadata={"description": "When the newest full check to finish did (null: none has)"},
    )
    full_check = f.Nested(
        FullCheck,
        required=True,
        allow_none=True,
        metadata={"description": "The newest full check, running or not, with its progress"},
    )


@bp.route("/matches/<uuid:match_id>/settlement", methods=["GET"])
@bp.response(200, SettlementSchema)
@bp.doc(**documented(401, 403, 404))
@private_hands_hidden()
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
    """The ledger check's verdict, read from the verdicts stored as each hand is settled
    (each movement adds to zero, and the entries equal the settlement recomputed from the
    hand's events), so it costs the same with a year of history as with a day's: the
    totals, the failing hands' problems, the hands not checked yet, when the ledger was
    last checked in full and the progress of a full check under way."""
    operator()
    found = ledger.verdicts(services().pool)
    last = found["last_check"]
    whole = last["problems"] if last else []
    return {
        "ok": not (found["failing"] or whole),
        "matches": found["settled"],
        "checked": found["checked"],
        "unchecked": found["settled"] - found["checked"],
        "entries": found["entries"],
        "total": f"{found['total']:.2f}",
        "failing": found["failing"],
        "problems": [p for _, problems in found["failing_shown"] for p in problems] + whole,
        "fully_checked_at": found["fully_checked_at"],
        "full_check": last,
    }


@bp.route("/admin/ledger/check", methods=["POST"])
@bp.response(
    202,
    FullCheck,
    headers={
        "Location": {
            "description": "Where to follow its progress: GET /v1/admin/ledger/check",
            "schema": {"type": "string"},
        }
    },
)
@bp.doc(**documented(401, 403, 409))
def start_ledger_check():
    """Starts the full check of the ledger in the background (admins): every settled hand
    recomputed from its events and compared with its entries, each verdict stored anew,
    then the ledger's total; as the console's *Check every hand again*. One at a time: 409
    ``ledger_check_running`` while one runs. It is in the audit trail."""
    who = admin()
    assert who.operator is not None
    ctx = services()
    check_id = ledger.start_check(ctx.pool, who.operator.name)
    if check_id is None:
        running = ledger.verdicts(ctx.pool)["last_check"]
        assert running is not None  # start_check found it running
        raise ApiError(
            409,
            "ledger_check_running",
            f"full check {running['check_id']} is running ({running['done']} of"
            f" {running['hands'] if running['hands'] is not None else '?'} hands checked):"
            " follow it at GET /v1/admin/ledger/check",
            members={"check_id": running["check_id"]},
        )
    ctx.operators.audit(
        who.operator.name,
        "ledger_check",
        "api",
        subject=f"full check {check_id}",
        address=request.remote_addr,
    )
    work.check_ledger_later(ctx.redis, check_id)
    return ledger.full_check(ctx.pool, check_id), {"Location": url_for("ledger.check_ledger")}
