"""The lobby (quick match): a ticket waits for a table of four with its settings."""

from __future__ import annotations

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate

from ..app.work import wake_lobby
from ..game import GameError, MatchSettings
from ..store import StoreError
from ..store.tables import Ticket, TicketNotFound
from . import schemas
from .auth import player
from .creations import created
from .documents import documented, game_error, within_bounds
from .routing import Blueprint
from .services import services

bp = Blueprint(
    "lobby",
    __name__,
    url_prefix="/v1/lobby",
    description="The lobby: quick match with three others (people or bots), at a table that"
    " lost a person or a new one",
)


class TicketCreate(schemas.MatchCreate):
    """A match's ruleset, stake and cap (the rest as the lobby's tables have it)."""

    class Meta(schemas.Strict.Meta):
        exclude = ("rake", "bombs_double", "turn_seconds")

    allow_bots = schemas.JsonBoolean(
        load_default=True,
        metadata={
            "description": "After the lobby's wait (the server's `lobby_bots_after`), play "
            "with system bots in the seats no one took"
        },
    )
    ladder = schemas.JsonBoolean(
        load_default=False,
        metadata={
            "description": "A bot account's ticket for the ladder: a table of bot accounts "
            "only (four; or, when it allows bots, two or three after the lobby's wait, with "
            "system bots in the other seats); 403 `bot_account_required` for a person"
        },
    )


class TicketDocument(ma.Schema):
    ticket_id = f.UUID(required=True)
    status = f.String(required=True, validate=validate.OneOf(["waiting", "seated", "cancelled"]))
    ruleset = f.String(required=True)
    options = f.Nested(schemas.Options, required=True)
    allow_bots = f.Boolean(required=True)
    ladder = f.Boolean(required=True, metadata={"description": "A ticket for the ladder"})
    table_id = f.UUID(
        required=True, allow_none=True, metadata={"description": "The table, once seated"}
    )
    created_at = f.DateTime(required=True)


def ticket_document(ticket: Ticket) -> dict:
    return {
        "ticket_id": ticket.ticket_id,
        "status": ticket.status,
        **MatchSettings.from_json(ticket.settings).settings(),
        "allow_bots": ticket.allow_bots,
        "ladder": ticket.ladder,
        "table_id": ticket.table_id,
        "created_at": ticket.created_at,
    }


def _own(ticket_id) -> Ticket:
    who = player()
    try:
        ticket = services().tables.table_store.ticket(ticket_id)
    except StoreError as exc:
        raise game_error(exc) from None
    if ticket.player_id != who.player_id:
        raise game_error(TicketNotFound("no such ticket"))
    return ticket


@bp.route("/tickets", methods=["POST"])
@bp.arguments(
    TicketCreate(), required=False, description="Without a body, every option takes its default"
)
@bp.arguments(schemas.IdempotencyHeader(), location="headers", as_kwargs=True)
@bp.response(201, TicketDocument)
@bp.doc(**documented(401, 403, 409, 422))
def create_ticket(body, key=None):
    """Wait for a table: a ticket is seated at a public table with the same settings that
    lost a person between hands (a ticket that allows no bots, only at a table without
    bots), else four tickets with the same settings together at a new table; a ticket
    that allows bots gets them after the lobby's wait. A player has one waiting ticket at a
    time (409 ``ticket_waiting``), and none while seated at a table (409
    ``seated_elsewhere``; a bot account, at up to the server's ``bot_account_tables``). With
    an ``Idempotency-Key`` header a retry gets the first answer (even once the ticket is
    seated) and creates nothing."""
    who = player()

    def create() -> dict:
        try:
            table = within_bounds(MatchSettings.build(body["ruleset"], body["unit"], body["cap"]))
            ticket = services().tables.table_store.create_ticket(
                who.player_id, table.to_json(), body["allow_bots"], body["ladder"]
            )
        except (GameError, StoreError) as exc:
            raise game_error(exc) from None
        wake_lobby(services().redis, ticket.ticket_id)
        return ticket_document(ticket)

    return created("POST /v1/lobby/tickets", key, TicketDocument(), create)


@bp.route("/tickets/<uuid:ticket_id>", methods=["GET"])
@bp.response(200, TicketDocument)
@bp.doc(**documented(401, 403, 404))
def get_ticket(ticket_id):
    """The caller's ticket: waiting, seated (with its table) or cancelled."""
    return ticket_document(_own(ticket_id))


@bp.route("/tickets/<uuid:ticket_id>", methods=["DELETE"])
@bp.response(200, TicketDocument)
@bp.doc(**documented(401, 403, 404, 409))
def cancel_ticket(ticket_id):
    """Cancel the caller's waiting ticket (a seated one leaves its table instead: 409)."""
    ticket = _own(ticket_id)
    try:
        return ticket_document(
            services().tables.table_store.cancel_ticket(ticket.ticket_id, ticket.player_id)
        )
    except StoreError as exc:
        raise game_error(exc) from None
