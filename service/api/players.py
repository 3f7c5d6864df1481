"""Players: sign up and get a bearer token."""

from __future__ import annotations

from . import schemas
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
@bp.doc(responses={"422": {"$ref": "#/components/responses/UNPROCESSABLE_ENTITY"}})
def create_player(body):
    """Create a player (or a bot account, for an author's program). The token in the answer
    is shown only this once."""
    player_id, token = services().players.create(body["name"], body["bot_account"])
    return {
        "player_id": player_id,
        "name": body["name"],
        "bot_account": body["bot_account"],
        "token": token,
    }
