"""The caller's own bearer tokens: create another (optionally expiring), list them, revoke
one (the one in use too). A revoked token is refused by every API process within a
second: each process forgets it when PostgreSQL notifies the revocation."""

from __future__ import annotations

import uuid

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate

from .auth import player
from .documents import documented
from .problems import ApiError
from .routing import Blueprint
from .schemas import STORABLE_TEXT, JsonInteger, Strict
from .services import services

bp = Blueprint(
    "tokens", __name__, url_prefix="/v1/me/tokens", description="The caller's bearer tokens"
)

#: The longest life a token can be given: ten years.
MAX_EXPIRES_IN = 10 * 365 * 24 * 3600


class TokenCreate(Strict):
    label = f.String(
        load_default=None,
        allow_none=True,
        validate=[validate.Length(1, 64), STORABLE_TEXT],
        metadata={"description": "A name to tell the token apart (e.g. the device)"},
    )
    expires_in = JsonInteger(
        load_default=None,
        allow_none=True,
        validate=validate.Range(1, MAX_EXPIRES_IN),
        metadata={"description": "Seconds until the token stops working; null or absent: never"},
    )


class TokenInfo(ma.Schema):
    token_id = f.UUID(required=True)
    label = f.String(required=True, allow_none=True)
    last4 = f.String(
        required=True,
        allow_none=True,
        metadata={
            "description": "The token's last four characters (null for the token made with the player before tokens could be listed)"
        },
    )
    created_at = f.DateTime(required=True)
    expires_at = f.DateTime(required=True, allow_none=True, metadata={"description": "null: never"})
    current = f.Boolean(
        required=True, metadata={"description": "This is the token that sent the request"}
    )


class TokenCreated(TokenInfo):
    token = f.String(
        required=True, metadata={"description": "Bearer token; shown once, stored only as a hash"}
    )


class TokenList(ma.Schema):
    tokens = f.List(
        f.Nested(TokenInfo),
        required=True,
        metadata={"description": "Oldest first, expired ones included"},
    )


def _document(token, current_id: uuid.UUID | None) -> dict:
    return {
        "token_id": token.token_id,
        "label": token.label,
        "last4": token.last4,
        "created_at": token.created_at,
        "expires_at": token.expires_at,
        "current": token.token_id == current_id,
    }


@bp.route("", methods=["POST"])
@bp.arguments(
    TokenCreate(),
    required=False,
    description="Without a body, a token with no label that never expires",
)
@bp.response(201, TokenCreated)
@bp.doc(**documented(401, 403, 422))
def create_token(body):
    """Create another token for the caller. The token in the answer is shown only this once."""
    who = player()
    token, kept = services().players.issue(who.player_id, body["label"], body["expires_in"])
    return {**_document(kept, who.token_id), "token": token}


@bp.route("", methods=["GET"])
@bp.response(200, TokenList)
@bp.doc(**documented(401, 403))
def list_tokens():
    """The caller's tokens (never the tokens themselves: their last four characters)."""
    who = player()
    return {
        "tokens": [_document(t, who.token_id) for t in services().players.tokens(who.player_id)]
    }


@bp.route("/<uuid:token_id>", methods=["DELETE"])
@bp.response(204)
@bp.doc(**documented(401, 403, 404))
def revoke_token(token_id):
    """Revoke one of the caller's tokens (the one in use too): every API process refuses it
    within a second. Another player's token is not found."""
    who = player()
    if not services().players.revoke(who.player_id, token_id):
        raise ApiError(404, "token_not_found", "the caller has no token with this id")
