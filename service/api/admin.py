"""Operator endpoints: unredacted events and the audit of a match, the players (bot
accounts among them) (operators only)."""

from __future__ import annotations

import uuid

from ..game import OPERATOR
from ..game.record import Discrepancy, export, verify
from . import schemas
from .auth import audited, operator
from .documents import after_cursor, documented, event_documents, page_cursor, since
from .routing import Blueprint
from .services import services

bp = Blueprint(
    "admin", __name__, url_prefix="/v1/admin", description="Operators: everything, and audits"
)


@bp.route("/matches/<uuid:match_id>/events", methods=["GET"])
@bp.response(200, schemas.EventList)
@bp.doc(**documented(401, 403, 404))
def all_events(match_id: uuid.UUID):
    """Every event of the match, hidden cards and the seed included."""
    who = operator()
    stored, latest = since(match_id, 0)
    audited(who, "events", match_id)
    return {"version": latest.state.version, "events": event_documents(stored, OPERATOR, latest)}


@bp.route("/matches/<uuid:match_id>/audit", methods=["GET"])
@bp.response(200, schemas.Audit)
@bp.doc(**documented(401, 403, 404))
def audit(match_id: uuid.UUID):
    """Runs the checks of ``ddz verify`` on the match's hand record, rebuilt from its stored
    events: deal and commitment, every action through the rules, the settlement."""
    operator()
    stored, _ = since(match_id, 0)  # 404 for an unknown match
    document = export(e.event for e in stored)
    try:
        verify(document)
    except Discrepancy as exc:
        return {"match_id": match_id, "ok": False, "discrepancy": str(exc)}
    return {"match_id": match_id, "ok": True, "discrepancy": None}


@bp.route("/players", methods=["GET"])
@bp.arguments(schemas.PlayersQuery(), location="query")
@bp.response(200, schemas.PlayerList)
@bp.doc(**documented(401, 403, 422))
def players(query):
    """The registered players, newest first, a page at a time; ``bot_account=true`` lists
    the bot accounts only (authors' programs), ``false`` the people only."""
    operator()
    limit = query["limit"]
    found = services().players.registered(
        query["bot_account"], limit + 1, after_cursor(query["cursor"])
    )
    page = found[:limit]
    return {
        "players": [vars(p) for p in page],
        "next_cursor": page_cursor(page[-1].created_at, page[-1].player_id)
        if len(found) > limit
        else None,
    }
