"""Tables that play hand after hand: create one, see it, take a seat, leave."""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate

from ..app.tables import TableOptions
from ..game import GameError
from ..game.table_play import BOTS, CLOSE, DEAL, MAX_WAIT_SECONDS, TableState
from ..store import StoreError
from ..store.tables import TableLoaded
from . import schemas
from .auth import Caller, caller, player
from .creations import created
from .documents import (
    bot_account_of,
    documented,
    game_error,
    name_of,
    no_such_table,
    profiles,
    table_of,
)
from .routing import Blueprint
from .services import services

bp = Blueprint(
    "tables",
    __name__,
    url_prefix="/v1/tables",
    description="Tables: four seats that play hand after hand, each hand a match",
)


def _wait(description: str) -> schemas.JsonInteger:
    """A table's wait in seconds (0 to :data:`MAX_WAIT_SECONDS`), null when not given."""
    return schemas.JsonInteger(
        load_default=None,
        allow_none=True,
        validate=validate.Range(0, MAX_WAIT_SECONDS),
        metadata={"description": description},
    )


class TableCreate(schemas.MatchCreate):
    bots_after = _wait(
        "Seconds the empty seats wait for people between hands before system bots take "
        "them; null: they wait for people"
    )
    next_hand_seconds = _wait(
        "Seconds between a hand's settlement and the next deal, whatever happens at the "
        "table meanwhile (leaves, joins, bots taking seats); null: the server's default"
    )
    close_after = _wait(
        "Seconds a table without bots (`bots_after` null) that lost a person between hands "
        "waits for another before it closes; null: the server's default"
    )
    private = schemas.JsonBoolean(
        load_default=False,
        metadata={
            "description": "A private table is joined only with its invite code. Its hands "
            "are not rated, as no table players make is: only the lobby's tables rate hands "
            '(docs/ratings.md, "Fair play")'
        },
    )


class JoinRequest(schemas.Strict):
    invite = f.String(
        load_default=None,
        allow_none=True,
        validate=validate.Length(1, 64),
        metadata={"description": "The invite code of a private table"},
    )


class TableSeatSchema(ma.Schema):
    player = f.String(required=True, allow_none=True)
    name = f.String(required=True, allow_none=True)
    bot = f.Boolean(required=True)
    bot_account = f.Boolean(required=True, metadata={"description": schemas.BOT_ACCOUNT})
    leaving = f.Boolean(
        required=True,
        metadata={"description": "Left during the hand: the seat is free once it is settled"},
    )


class Score(ma.Schema):
    player = f.String(required=True)
    name = f.String(required=True, allow_none=True)
    net = f.String(required=True, metadata={"description": "The player's net at this table"})


class Waiting(ma.Schema):
    what = f.String(
        required=True,
        validate=validate.OneOf([DEAL, BOTS, CLOSE]),
        metadata={
            "description": "The next deal, system bots for the empty seats, or closing (a "
            "table without bots that lost a person between hands)"
        },
    )
    at = f.DateTime(
        required=True,
        metadata={
            "description": "Until when: the wait is over then (never before the settlement "
            "of the last hand plus `next_hand_seconds`)"
        },
    )


class TableDocument(ma.Schema):
    table_id = f.UUID(required=True)
    version = f.Integer(required=True)
    ruleset = f.String(required=True)
    options = f.Nested(schemas.Options, required=True)
    private = f.Boolean(required=True)
    rated = f.Boolean(
        required=True,
        metadata={
            "description": "Whether its hands are rated: only at a table the lobby made, where "
            "nobody chose their opponents (its quick match's rates people, its ladder's bot "
            "accounts); a table players made, a private one above all, is unrated"
        },
    )
    invite = f.String(
        required=True,
        allow_none=True,
        metadata={"description": "A private table's invite code, shown to its seated players"},
    )
    bots_after = f.Integer(required=True, allow_none=True)
    next_hand_seconds = f.Integer(required=True)
    close_after = f.Integer(required=True)
    closed = f.Boolean(
        required=True,
        metadata={"description": "The table has closed: its seats are free, it deals no more"},
    )
    seats = f.List(f.Nested(TableSeatSchema, allow_none=True), required=True)
    match_id = f.UUID(
        required=True, allow_none=True, metadata={"description": "The hand under way, if any"}
    )
    hands = f.Integer(required=True, metadata={"description": "Hands played and settled"})
    scoreboard = f.List(f.Nested(Score), required=True)
    waiting = f.Nested(
        Waiting,
        required=True,
        allow_none=True,
        metadata={"description": "What the table waits for between hands, and until when"},
    )


def table_document(loaded: TableLoaded, viewer: str | None) -> dict[str, Any]:
    """The table as anyone may see it; its invite code only to its seated players."""
    state: TableState = loaded.state
    assert state.table is not None
    players = [s.player for s in state.seats if s is not None]
    known = profiles(players + list(state.scoreboard))
    waiting = loaded.waiting()
    seated = viewer is not None and state.seat_of(viewer) is not None
    return {
        "table_id": state.table_id,
        "version": state.version,
        **state.table.settings(),
        "private": state.private,
        "rated": services().tables.table_store.lobby_of(uuid.UUID(state.table_id)) is not None,
        "invite": state.invite if seated else None,
        "bots_after": state.bots_after,
        "next_hand_seconds": state.next_hand_seconds,
        "close_after": state.close_after,
        "closed": state.closed,
        "seats": [
            None
            if s is None
            else {
                "player": s.player,
                "name": name_of(known, s.player),
                "bot": s.bot,
                "bot_account": bot_account_of(known, s.player),
                "leaving": s.leaving,
            }
            for s in state.seats
        ],
        "match_id": state.match_id,
        "hands": state.hands,
        "scoreboard": [
            {"player": p, "name": name_of(known, p), "net": f"{net:.2f}"}
            for p, net in sorted(state.scoreboard.items(), key=lambda item: -item[1])
        ],
        "waiting": None if waiting is None else {"what": waiting[0], "at": waiting[1]},
    }


@bp.route("", methods=["POST"])
@bp.arguments(
    TableCreate(), required=False, description="Without a body, every option takes its default"
)
@bp.arguments(schemas.IdempotencyHeader(), location="headers", as_kwargs=True)
@bp.response(201, TableDocument)
@bp.doc(**documented(401, 403, 409, 422))
def create_table(body, key=None):
    """Create a table and take its first seat. A private table answers with its invite code.
    A table players make is unrated (``rated`` false): only the lobby's tables rate hands.
    A person sits at one table at a time (a bot account at a few, the server's
    ``bot_account_tables``): 409 ``seated_elsewhere``, or ``ticket_waiting`` while its lobby
    ticket waits. With an ``Idempotency-Key`` header a retry gets the first answer and
    creates nothing."""
    who = player()
    config = services().config
    next_hand, close_after = body["next_hand_seconds"], body["close_after"]
    table = table_of(body)

    def create() -> dict:
        try:
            loaded = services().tables.create(
                table,
                TableOptions(
                    body["private"],
                    body["bots_after"],
                    config.table_next_hand_seconds if next_hand is None else next_hand,
                    config.table_close_seconds if close_after is None else close_after,
                ),
                who.player,
            )
        except (GameError, StoreError) as exc:
            raise game_error(exc) from None
        return table_document(loaded, who.player)

    return created("POST /v1/tables", key, TableDocument(), create)


def _load(table_id: uuid.UUID) -> TableLoaded:
    try:
        return services().tables.table_store.load(table_id)
    except StoreError as exc:
        raise game_error(exc) from None


def _private_to(loaded: TableLoaded, table_id: uuid.UUID, who: Caller) -> bool:
    """Whether the table is private to the caller: it never sat there (an operator sees
    every table)."""
    state = loaded.state
    if not state.private or who.operator is not None:
        return False
    player = who.player or ""
    if state.seat_of(player) is not None:
        return False
    return not services().tables.table_store.was_seated(table_id, player)


@bp.route("/<uuid:table_id>", methods=["GET"])
@bp.response(200, TableDocument)
@bp.doc(**documented(401, 404))
def get_table(table_id):
    """The table: its seats with the players' names, the hand under way, the hands played,
    the scoreboard (each player's net at this table) and what it waits for. A private
    table is shown to those who sat there (and operators); to anyone else it is 404, as a
    table that does not exist."""
    who = caller()
    loaded = _load(table_id)
    if _private_to(loaded, table_id, who):
        raise no_such_table()
    return table_document(loaded, who.player)


@bp.route("/<uuid:table_id>/seats", methods=["POST"])
@bp.arguments(JoinRequest(), required=False, description="A private table needs its invite code")
@bp.arguments(schemas.IdempotencyHeader(), location="headers", as_kwargs=True)
@bp.response(201, TableDocument)
@bp.doc(**documented(401, 403, 404, 409, 422))
def join_table(body, table_id, key=None):
    """Take a free seat. When the fourth is taken the next hand is dealt to the four (after
    the table's rest, if it played a hand). A person sits at one table at a time (a bot
    account at a few): 409 ``seated_elsewhere``, or ``ticket_waiting`` while its lobby
    ticket waits; a closed table: 409 ``table_closed``. With an ``Idempotency-Key`` header
    a retry gets the first answer and takes no other seat."""
    who = player()

    def create() -> dict:
        try:
            loaded = services().tables.join(table_id, who.player or "", body["invite"])
        except GameError as exc:
            if exc.code == "invite_required":
                raise no_such_table() from None  # nothing said of a private table
            raise game_error(exc) from None
        except StoreError as exc:
            raise game_error(exc) from None
        return table_document(loaded, who.player)

    return created(f"POST /v1/tables/{table_id}/seats", key, TableDocument(), create)


@bp.route("/<uuid:table_id>/leave", methods=["POST"])
@bp.response(200, TableDocument)
@bp.doc(**documented(401, 403, 404, 409, 422))
def leave_table(table_id):
    """Leave the table. Between hands (the rest after a hand included) the seat is free at
    once, and the player's stream says ``left``; during a hand the seat is disconnected
    (the system plays it to the end, the penalty stands): the stream says ``leaving`` now,
    and ``left`` once the hand is settled, when the seat is free."""
    who = player()
    try:
        loaded = services().tables.leave(table_id, who.player or "")
    except GameError as exc:
        if exc.code == "not_seated" and _private_to(_load(table_id), table_id, who):
            raise no_such_table() from None
        raise game_error(exc) from None
    except StoreError as exc:
        raise game_error(exc) from None
    return table_document(loaded, who.player)
