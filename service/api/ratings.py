"""Ratings (docs/ratings.md): the leaderboards and each player's public profile, which
anyone may read without a token, and the caller's own rating history."""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate

from ..game.ratings import Rating
from ..rules.rulesets import DEFAULT_RULESET, RULESETS
from ..store.ratings import RatingStore
from . import schemas
from .auth import player
from .documents import after_cursor, documented, page_cursor, profiles
from .problems import ApiError
from .routing import Blueprint
from .services import services

bp = Blueprint(
    "ratings",
    __name__,
    url_prefix="/v1",
    description="Ratings: the leaderboards, the players' profiles, the caller's history",
)

PEOPLE, BOTS = "people", "bots"
RULESET_NAMES = sorted(RULESETS)


class RatingDocument(ma.Schema):
    rating = f.Float(
        required=True,
        metadata={
            "description": "The conservative rating, `mu - 3 sigma`, which the leaderboards "
            "order by"
        },
    )
    mu = f.Float(required=True, metadata={"description": "The model's mean of the skill"})
    sigma = f.Float(required=True, metadata={"description": "Its standard deviation"})
    hands = f.Integer(required=True, metadata={"description": "Rated hands played"})
    provisional = f.Boolean(
        required=True, metadata={"description": "Fewer rated hands than a settled rating needs"}
    )


def rating_document(rating: Rating) -> dict[str, Any]:
    return {
        "rating": rating.conservative,
        "mu": rating.mu,
        "sigma": rating.sigma,
        "hands": rating.hands,
        "provisional": rating.provisional,
    }


class LeaderboardQuery(ma.Schema):
    ruleset = f.String(load_default=DEFAULT_RULESET.name, validate=validate.OneOf(RULESET_NAMES))
    kind = f.String(
        load_default=PEOPLE,
        validate=validate.OneOf([PEOPLE, BOTS]),
        metadata={"description": "people, or bot accounts (authors' programs)"},
    )
    cursor = f.String(
        load_default=None,
        validate=schemas.Pattern(r"^[A-Za-z0-9_=-]{1,200}$"),
        metadata={"description": "The `next_cursor` of the previous page; none: the first"},
    )
    limit = schemas.QueryInteger(load_default=20, validate=validate.Range(1, 100))


class OwnerDocument(ma.Schema):
    player_id = f.UUID(required=True)
    name = f.String(required=True)


def _owner_field() -> f.Nested:
    return f.Nested(
        OwnerDocument, required=True, allow_none=True, metadata={"description": schemas.OWNER}
    )


class Ranked(RatingDocument):
    rank = f.Integer(required=True, metadata={"description": "1 for the first"})
    player_id = f.UUID(required=True)
    name = f.String(required=True)
    owner = _owner_field()


class Leaderboard(ma.Schema):
    ruleset = f.String(required=True)
    kind = f.String(required=True, validate=validate.OneOf([PEOPLE, BOTS]))
    players = f.List(
        f.Nested(Ranked),
        required=True,
        metadata={"description": "By conservative rating, the highest first"},
    )
    next_cursor = f.String(
        required=True, allow_none=True, metadata={"description": "The next page; null: no more"}
    )


class RulesetRating(RatingDocument):
    ruleset = f.String(required=True)
    updated_at = f.DateTime(required=True)


class Profile(ma.Schema):
    player_id = f.UUID(required=True)
    name = f.String(required=True)
    bot_account = f.Boolean(required=True, metadata={"description": schemas.BOT_ACCOUNT})
    owner = _owner_field()
    hands = f.Integer(required=True, metadata={"description": "Rated hands, in every ruleset"})
    ratings = f.List(
        f.Nested(RulesetRating),
        required=True,
        metadata={"description": "One per ruleset the player has played"},
    )


class HistoryQuery(schemas.PageQuery):
    ruleset = f.String(
        load_default=None,
        validate=validate.OneOf(RULESET_NAMES),
        metadata={"description": "One ruleset's changes; none: every ruleset's"},
    )


class Change(ma.Schema):
    match_id = f.UUID(required=True)
    record = f.String(required=True, metadata={"description": "The hand record's path"})
    ruleset = f.String(required=True)
    won = f.Boolean(
        required=True,
        metadata={
            "description": "Whether the hand counted as won (a seat the system played after "
            "a disconnect counts as lost)"
        },
    )
    before = f.Nested(RatingDocument, required=True)
    after = f.Nested(RatingDocument, required=True)
    at = f.DateTime(required=True)
    voided = f.Boolean(
        required=True,
        metadata={
            "description": "An operator voided the hand's rating: this change was taken back "
            '(docs/ratings.md, "Fair play")'
        },
    )


class MyRatings(ma.Schema):
    ratings = f.List(f.Nested(RulesetRating), required=True)
    changes = f.List(f.Nested(Change), required=True, metadata={"description": "Newest first"})
    next_cursor = f.String(
        required=True, allow_none=True, metadata={"description": "The next page; null: no more"}
    )


def _ratings() -> RatingStore:
    return RatingStore(services().pool)


def _rank_cursor(rank: int, conservative: float, player_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(f"{rank}|{conservative!r}|{player_id}".encode()).decode()


def _after_rank(cursor: str | None) -> tuple[int, float, str] | None:
    if cursor is None:
        return None
    try:
        rank, conservative, player_id = (
            base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        )
        return int(rank), float(conservative), str(uuid.UUID(player_id))
    except (binascii.Error, UnicodeError, ValueError):
        raise ApiError(422, "invalid_cursor", "the cursor is not one this list gave") from None


@bp.route("/leaderboards", methods=["GET"])
@bp.arguments(LeaderboardQuery(), location="query")
@bp.response(200, Leaderboard)
@bp.doc(responses={"422": {"$ref": "#/components/responses/UNPROCESSABLE_ENTITY"}})
def leaderboard(query):
    """A leaderboard, a page at a time: the people (or the bot accounts) rated in a
    ruleset, by conservative rating (``mu - 3 sigma``), the highest first. Anyone may read
    it, without a token."""
    limit = query["limit"]
    found = _ratings().leaderboard(
        query["ruleset"], query["kind"] == BOTS, _after_rank(query["cursor"]), limit + 1
    )
    page = found[:limit]
    last = page[-1] if len(found) > limit else None
    return {
        "ruleset": query["ruleset"],
        "kind": query["kind"],
        "players": [
            {
                "rank": row.rank,
                "player_id": row.player_id,
                "name": row.name,
                "owner": None if row.owner is None else vars(row.owner),
                **rating_document(row.rating),
            }
            for row in page
        ],
        "next_cursor": None
        if last is None
        else _rank_cursor(last.rank, last.rating.conservative, last.player_id),
    }


@bp.route("/players/<uuid:player_id>", methods=["GET"])
@bp.response(200, Profile)
@bp.doc(responses={"404": {"$ref": "#/components/responses/NOT_FOUND"}})
def profile(player_id):
    """A player's public profile: its name, whether it is a bot account (and whose), its
    rating in each ruleset it played and its rated hands. Anyone may read it, without a
    token."""
    known = profiles([str(player_id)]).get(str(player_id))
    if known is None:
        raise ApiError(404, "player_not_found", "no such player")
    rated = _ratings().of_player(player_id)
    owner = None if known.owner_id is None else profiles([known.owner_id])[known.owner_id]
    return {
        "player_id": player_id,
        "name": known.name,
        "bot_account": known.bot_account,
        "owner": None if owner is None else {"player_id": known.owner_id, "name": owner.name},
        "hands": sum(r.rating.hands for r in rated),
        "ratings": [_ruleset_rating(r.ruleset, r.rating, r.updated_at) for r in rated],
    }


def _ruleset_rating(ruleset: str, rating: Rating, at) -> dict[str, Any]:
    return {"ruleset": ruleset, **rating_document(rating), "updated_at": at}


@bp.route("/me/ratings", methods=["GET"])
@bp.arguments(HistoryQuery(), location="query")
@bp.response(200, MyRatings)
@bp.doc(**documented(401, 403, 422))
def my_ratings(query):
    """The caller's ratings, and its rating history a page at a time, newest first: each
    rated hand's change, with whether it counted as won and whether an operator voided it
    (only the lobby's tables rate hands: docs/ratings.md, "Fair play")."""
    who = player()
    store = _ratings()
    limit = query["limit"]
    found = store.history(who.player_id, query["ruleset"], after_cursor(query["cursor"]), limit + 1)
    page = found[:limit]
    last = page[-1] if len(found) > limit else None
    return {
        "ratings": [
            _ruleset_rating(r.ruleset, r.rating, r.updated_at)
            for r in store.of_player(who.player_id)
        ],
        "changes": [
            {
                "match_id": c.match_id,
                "record": f"/v1/matches/{c.match_id}/record",
                "ruleset": c.ruleset,
                "won": c.won,
                "before": rating_document(c.before),
                "after": rating_document(c.after),
                "at": c.changed_at,
                "voided": c.voided,
            }
            for c in page
        ],
        "next_cursor": None if last is None else page_cursor(last.changed_at, last.match_id),
    }
