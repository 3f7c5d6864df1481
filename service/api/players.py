"""Players: sign up and get a bearer token; a person registers its bot accounts."""

from __future__ import annotations

import uuid

from . import schemas
from .auth import CHALLENGE, bearer_token, caller
from .problems import ApiError
from .routing import Blueprint
from .services import services

bp = Blueprint(
    "players", __name__, url_prefix="/v1/players", description="Players and their tokens"
)


@bp.route("", methods=["POST"])
@bp.arguments(
    schemas.PlayerCreate(), required=False, description="Without a body, the name is `player`"
)
@bp.response(201, schemas.PlayerCreated)
@bp.doc(
    responses={
        "401": {"$ref": "#/components/responses/UNAUTHORIZED"},
        "403": {"$ref": "#/components/responses/FORBIDDEN"},
        "422": {"$ref": "#/components/responses/UNPROCESSABLE_ENTITY"},
    },
    security=[{}, {"bearer": []}],
)
def create_player(body):
    """Create a player (or a bot account, for an author's program). The token in the answer
    is shown only this once. A bot account belongs to the person whose token registers it
    (without a token: 401; with a bot account's or an operator's: 403 `person_required`)."""
    owner = _owner() if body["bot_account"] else None
    player_id, token = services().players.create(body["name"], body["bot_account"], owner)
    return {
        "player_id": player_id,
        "name": body["name"],
        "bot_account": body["bot_account"],
        "owner_id": owner,
        "token": token,
    }


def _owner() -> uuid.UUID:
    """The person who registers a bot account: the caller, who must be one."""
    if not bearer_token():
        raise ApiError(
            401,
            "unauthorized",
            "a bot account belongs to the person who registers it: send your own token"
            " ('Authorization: Bearer <token>')",
            CHALLENGE,
        )
    who = caller()
    profile = (
        None if who.player is None else services().players.profiles([who.player]).get(who.player)
    )
    if who.player_id is None or profile is None or profile.bot_account:
        raise ApiError(
            403,
            "person_required",
            "a bot account belongs to a person: register it with a person's token, not a bot"
            " account's or an operator's",
        )
    return who.player_id
