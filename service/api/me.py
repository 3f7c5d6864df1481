"""The caller's own pages: who it is and its balance, its matches, its tables."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Any

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate

from ..store import ledger
from .auth import player
from .documents import documented, seat_of
from .problems import ApiError
from .routing import Blueprint
from .services import services

bp = Blueprint("me", __name__, url_prefix="/v1/me", description="The caller's own pages")


class Me(ma.Schema):
    player_id = f.UUID(required=True)
    name = f.String(required=True)
    balance = f.String(required=True, metadata={"description": "The ledger's balance"})


class MatchesQuery(ma.Schema):
    cursor = f.String(
        load_default=None,
        metadata={"description": "The `next_cursor` of the previous page; none: the newest"},
    )
    limit = f.Integer(load_default=20, validate=validate.Range(1, 100))


class NamedSeat(ma.Schema):
    player = f.String(required=True, allow_none=True)
    name = f.String(required=True, allow_none=True)
    bot = f.Boolean(required=True)


class MyMatch(ma.Schema):
    match_id = f.UUID(required=True)
    table_id = f.UUID(
        required=True, allow_none=True, metadata={"description": "The table whose hand it was"}
    )
    created_at = f.DateTime(required=True)
    phase = f.String(required=True)
    seats = f.List(f.Nested(NamedSeat, allow_none=True), required=True)
    seat = f.Integer(required=True)
    role = f.String(required=True, allow_none=True, metadata={"description": "landlord or farmer"})
    winner = f.String(
        required=True, allow_none=True, metadata={"description": "landlord or farmers"}
    )
    net = f.String(
        required=True, allow_none=True, metadata={"description": "The caller's net, once ended"}
    )
    record = f.String(required=True, metadata={"description": "The hand record's path"})


class MyMatches(ma.Schema):
    matches = f.List(f.Nested(MyMatch), required=True, metadata={"description": "Newest first"})
    next_cursor = f.String(
        required=True, allow_none=True, metadata={"description": "The next page; null: no more"}
    )


class MyTable(ma.Schema):
    table_id = f.UUID(required=True)
    created_at = f.DateTime(required=True)
    path = f.String(required=True)


class MyTables(ma.Schema):
    tables = f.List(f.Nested(MyTable), required=True, metadata={"description": "Newest first"})


@bp.route("", methods=["GET"])
@bp.response(200, Me)
@bp.doc(**documented(401, 403))
def get_me():
    """The caller: its name and its balance in the ledger."""
    who = player()
    names = services().players.names([who.player or ""])
    balance = ledger.player_ledger(services().pool, who.player_id, limit=0)["balance"]
    return {"player_id": who.player_id, "name": names.get(who.player or "", ""), "balance": balance}


def _cursor(created_at: datetime, match_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{match_id}".encode()).decode()


def _after(cursor: str | None) -> tuple[datetime, uuid.UUID] | None:
    if cursor is None:
        return None
    try:
        created, _, match = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), uuid.UUID(match)
    except (binascii.Error, UnicodeError, ValueError):
        raise ApiError(400, "invalid_cursor", "the cursor is not one this list gave") from None


@bp.route("/matches", methods=["GET"])
@bp.arguments(MatchesQuery(), location="query")
@bp.response(200, MyMatches)
@bp.doc(**documented(400, 401, 403, 422))
def my_matches(query):
    """The caller's matches, newest first, a page at a time: the table, the seats by name,
    the caller's seat and role, the result and the caller's net, and the record's path."""
    who = player()
    limit = query["limit"]
    found = services().store.of_player(who.player or "", _after(query["cursor"]), limit + 1)
    page = found[:limit]
    players = {
        s.player
        for loaded, _, _ in page
        for s in loaded.state.seats
        if s is not None and s.player is not None
    }
    names = services().players.names(sorted(players))
    matches: list[dict[str, Any]] = []
    for loaded, created_at, table_id in page:
        state = loaded.state
        seat = seat_of(state, who)
        assert seat is not None
        result = state.result
        matches.append(
            {
                "match_id": state.match_id,
                "table_id": table_id,
                "created_at": created_at,
                "phase": state.phase,
                "seats": [
                    None
                    if s is None
                    else {"player": s.player, "name": names.get(s.player or ""), "bot": s.bot}
                    for s in state.seats
                ],
                "seat": seat,
                "role": state.role(seat),
                "winner": None if result is None else result.outcome.winner,
                "net": None if result is None else result.settlement.to_json()["net"][seat],
                "record": f"/v1/matches/{state.match_id}/record",
            }
        )
    more = len(found) > limit
    last = page[-1] if page else None
    return {
        "matches": matches,
        "next_cursor": _cursor(last[1], uuid.UUID(last[0].state.match_id))
        if more and last is not None and last[0].state.match_id is not None
        else None,
    }


@bp.route("/tables", methods=["GET"])
@bp.response(200, MyTables)
@bp.doc(**documented(401, 403))
def my_tables():
    """The tables where the caller is seated, newest first."""
    who = player()
    return {
        "tables": [
            {"table_id": table_id, "created_at": created_at, "path": f"/v1/tables/{table_id}"}
            for table_id, created_at in services().tables.tables.of_player(who.player or "")
        ]
    }
