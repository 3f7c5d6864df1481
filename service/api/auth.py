"""Bearer tokens: a player's (from ``POST /v1/players``), a named operator's (from ``ddz
operator token NAME``), or the shared bootstrap operator token (configured)."""

from __future__ import annotations

import datetime as dt
import hmac
import uuid
from dataclasses import dataclass

from flask import request

from ..store.operators import BOOTSTRAP, Operator
from ..store.players import token_hash
from .problems import ApiError
from .services import services

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="ddz"'}


@dataclass(frozen=True)
class Caller:
    player_id: uuid.UUID | None
    #: The operator who sent the request (the bootstrap admin for the shared token).
    operator: Operator | None = None
    #: The player's token that sent the request.
    token_id: uuid.UUID | None = None
    #: When that token expires (None: never).
    expires_at: dt.datetime | None = None

    @property
    def player(self) -> str | None:
        return None if self.player_id is None else str(self.player_id)


@dataclass(frozen=True)
class PlayerCaller(Caller):
    """A caller known to be a player (see :func:`player`)."""

    player_id: uuid.UUID


def bearer_token() -> str:
    """The request's bearer token ('' without one)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def caller() -> Caller:
    """Who sent the request; 401 without a valid token."""
    token = bearer_token()
    if not token:
        raise ApiError(401, "unauthorized", "send 'Authorization: Bearer <token>'", CHALLENGE)
    operator_token = services().config.operator_token
    if operator_token and hmac.compare_digest(token.encode(), operator_token.encode()):
        return Caller(None, operator=BOOTSTRAP)
    found = services().players.by_token(token)
    if found is None:
        staff = services().operators.by_token(token)
        if staff is not None:
            return Caller(None, operator=staff)
        raise revoked()
    if found.standing != "active":
        raise refused_standing(found.standing)
    if found.expired():
        raise expired()
    return Caller(found.player_id, token_id=found.token_id, expires_at=found.expires_at)


def revoked() -> ApiError:
    return ApiError(
        401, "invalid_token", "this token belongs to no player (or was revoked)", CHALLENGE
    )


def refused_standing(standing: str) -> ApiError:
    """The problem of a player the operators suspended or banned (docs/operations.md)."""
    if standing == "banned":
        return ApiError(
            403,
            "player_banned",
            "this player is banned by the platform's operators: every request of theirs is"
            " refused, and the system plays their seats",
        )
    return ApiError(
        403,
        "player_suspended",
        "this player is suspended by the platform's operators until they are reinstated:"
        " every request of theirs is refused, and the system plays their seats",
    )


def expired() -> ApiError:
    return ApiError(
        401, "token_expired", "this token has expired; create another with a valid one", CHALLENGE
    )


def credential(who: Caller) -> bytes | None:
    """What identifies the caller's token wherever it is revoked (its hash); None for the
    shared operator token, which is never revoked."""
    return None if who.operator is BOOTSTRAP else token_hash(bearer_token())


def player() -> PlayerCaller:
    """A player's token is required (operators do not sit at tables)."""
    who = caller()
    if who.player_id is None:
        raise ApiError(403, "player_required", "this needs a player's token")
    return PlayerCaller(who.player_id, token_id=who.token_id, expires_at=who.expires_at)


def operator() -> Caller:
    who = caller()
    if not who.operator:
        raise ApiError(403, "operator_required", "this needs an operator's token")
    return who


def admin() -> Caller:
    """An admin's token is required (an auditor reads only: docs/operations.md)."""
    who = operator()
    assert who.operator is not None  # operator() refuses any other caller
    if not who.operator.admin:
        raise ApiError(403, "admin_required", "this needs an admin's token: an auditor reads only")
    return who


def audited(who: Caller, action: str, match_id: uuid.UUID) -> None:
    """An operator read the match's hidden data (``action``: what): the audit trail says
    who, when, from where and what. Nothing for a player reading their own."""
    if who.operator is not None:
        services().operators.audit(
            who.operator.name, action, "api", match_id=match_id, address=request.remote_addr
        )


#: OpenAPI security requirement of every authenticated operation.
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
