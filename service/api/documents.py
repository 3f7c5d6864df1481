"""What the blueprints share, so that none imports another: the error responses an
operation documents, a decider's or the store's refusal as a problem, the cursors of lists
that are newest first, the players' profiles (names, bot accounts) as seats show them, a
match read and shown as the caller may see it (its seat, its view, its events with the
deadline), who may read a table's hand at all (docs/tables.md, "Who sees what of a
table"), and a finished hand's public replay (which the replay's page shows too,
service/web/replay.py)."""

from __future__ import annotations

import base64
import binascii
import functools
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar, cast

from ..game import GameError, MatchSettings, State, deadline, view, visible
from ..game.record import export
from ..game.settings import DEFAULT_BOT_LEVEL
from ..game.state import ENDED
from ..store import (
    IdempotencyMismatch,
    Loaded,
    MatchNotFound,
    StoredEvent,
    StoreError,
    VersionConflict,
)
from ..store.creations import KeyInUse
from ..store.players import Profile
from ..store.tables import (
    BotAccountRequired,
    HandOf,
    LobbyTable,
    SeatedElsewhere,
    TableNotFound,
    TicketNotFound,
    TicketSeated,
    TicketWaiting,
)
from .auth import BEARER, Caller, bearer_token, caller
from .problems import ApiError
from .services import services

_View = TypeVar("_View", bound=Callable[..., Any])

#: HTTP status of each refusal of the store, by its class: every StoreError has one
#: (tests/test_registries.py), for what the store refuses is no rule of the game.
STORE_STATUS: dict[type[StoreError], int] = {
    MatchNotFound: 404,
    VersionConflict: 409,
    IdempotencyMismatch: 422,
    KeyInUse: 409,
    TableNotFound: 404,
    TicketNotFound: 404,
    TicketWaiting: 409,
    TicketSeated: 409,
    SeatedElsewhere: 409,
    BotAccountRequired: 403,
    LobbyTable: 403,
}
#: HTTP status of the decider's refusals that are not 422 (the rules refuse the command),
#: by code.
GAME_STATUS = {
    "not_seated": 403,
    "table_not_found": 404,
    "table_full": 409,
    "table_closed": 409,
}


def documented(*statuses: int) -> dict:
    """The error responses an operation documents (all are problems)."""
    names = {
        400: "BAD_REQUEST",
        401: "UNAUTHORIZED",
        403: "FORBIDDEN",
        404: "NOT_FOUND",
        409: "CONFLICT",
        413: "REQUEST_ENTITY_TOO_LARGE",
        422: "UNPROCESSABLE_ENTITY",
        503: "SERVICE_UNAVAILABLE",
    }
    return {
        "security": BEARER,
        "responses": {str(s): {"$ref": f"#/components/responses/{names[s]}"} for s in statuses},
    }


def game_error(exc: GameError | StoreError) -> ApiError:
    if isinstance(exc, StoreError):
        return ApiError(STORE_STATUS[type(exc)], exc.code, str(exc), members=exc.members)
    return ApiError(GAME_STATUS.get(exc.code, 422), exc.code, str(exc))


def table_of(body: dict[str, Any]) -> MatchSettings:
    """The table of a request's ruleset and money options (a match's, or a table's),
    within the server's bounds (:func:`within_bounds`)."""
    try:
        table = MatchSettings.build(
            body["ruleset"],
            body["unit"],
            body["cap"],
            body["rake"],
            body["bombs_double"],
            body["turn_seconds"],
            body.get("bot_level", DEFAULT_BOT_LEVEL),
        )
    except GameError as exc:
        raise game_error(exc) from None
    return within_bounds(table)


def within_bounds(table: MatchSettings) -> MatchSettings:
    """The table, when its stake is within the bounds the operators set: ``unit`` at most
    ``DDZ_MAX_UNIT`` and ``rake`` at most ``DDZ_MAX_RAKE`` (a cap needs none: it only
    lowers what a hand moves). 422 ``stake_out_of_bounds`` otherwise."""
    config = services().config
    for name, value, bound, setting in (
        ("unit", table.unit, config.max_unit, "DDZ_MAX_UNIT"),
        ("rake", table.rake, config.max_rake, "DDZ_MAX_RAKE"),
    ):
        if value > bound:
            raise ApiError(
                422,
                "stake_out_of_bounds",
                f"{name} is at most {bound} on this server ({setting}), not {value}",
            )
    return table


def seat_of(state: State, who: Caller) -> int | None:
    if who.player is None:
        return None
    for seat, taken in enumerate(state.seats):
        if taken is not None and taken.player == who.player:
            return seat
    return None


def since(match_id: uuid.UUID, after: int | None) -> tuple[list[StoredEvent], Loaded]:
    """The match's events after version ``after`` and its current state, from one read."""
    try:
        return services().store.since(match_id, after)
    except MatchNotFound as exc:
        raise game_error(exc) from None


def load(match_id: uuid.UUID) -> Loaded:
    return since(match_id, None)[1]


def page_cursor(created_at: datetime, row_id: uuid.UUID) -> str:
    """The cursor of a list's next page, after the row created at ``created_at`` with that
    id (lists newest first)."""
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{row_id}".encode()).decode()


def after_cursor(cursor: str | None) -> tuple[datetime, uuid.UUID] | None:
    """What :func:`page_cursor` made the cursor of (None: the first page)."""
    if cursor is None:
        return None
    try:
        created, _, row_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), uuid.UUID(row_id)
    except (binascii.Error, UnicodeError, ValueError):
        raise ApiError(422, "invalid_cursor", "the cursor is not one this list gave") from None


def profiles(players: Iterable[str | None]) -> dict[str, Profile]:
    """The profiles (name, bot account) of these players; a system bot's seat (None) has none."""
    return services().players.profiles(p for p in players if p is not None)


def name_of(known: dict[str, Profile], player: str | None) -> str | None:
    """The player's name among ``known`` profiles (None for a system bot's seat)."""
    profile = None if player is None else known.get(player)
    return None if profile is None else profile.name


def bot_account_of(known: dict[str, Profile], player: str | None) -> bool:
    """Whether the player is a bot account among ``known`` profiles (a system bot: no)."""
    profile = None if player is None else known.get(player)
    return profile is not None and profile.bot_account


def with_bot_accounts(seats: list[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
    """The seats (each naming its ``player``), each marked with ``bot_account`` as every
    player is shown the seats (false for a system bot's seat)."""
    known = profiles(seat["player"] for seat in seats if seat is not None)
    for seat in seats:
        if seat is not None:
            seat["bot_account"] = bot_account_of(known, seat["player"])
    return seats


def public_replay(match_id: uuid.UUID) -> dict[str, Any]:
    """The finished hand's record (a private table's hand is hidden from whoever was not
    dealt it before this: :func:`private_hands_hidden`)."""
    stored, latest = since(match_id, 0)
    if latest.state.phase != ENDED:
        raise ApiError(403, "replay_not_available", "a hand's replay is public once it has ended")
    document = export([s.event for s in stored])
    with_bot_accounts(document["seats"])
    return document


def view_document(loaded: Loaded, who: Caller) -> dict[str, Any]:
    document = view(loaded.state, seat_of(loaded.state, who))
    document["deadline"] = deadline(loaded.state, loaded.last_recorded_at)
    with_bot_accounts(document["seats"])
    return document


def event_documents(found: list[StoredEvent], seat, latest: Loaded) -> list[dict[str, Any]]:
    """The events as ``seat`` may see them; the match's latest one carries the deadline
    of the seat to act (earlier ones are superseded)."""
    documents = []
    for stored in found:
        payload = visible(stored.event, seat)
        del payload["type"], payload["version"]
        latest_event = stored.version == latest.state.version
        documents.append(
            {
                "type": stored.event.type,
                "version": stored.version,
                "schema_version": stored.event.version,
                "recorded_at": stored.recorded_at,
                "payload": payload,
                "deadline": deadline(latest.state, latest.last_recorded_at)
                if latest_event
                else None,
            }
        )
    return documents


def no_such_match() -> ApiError:
    """What a match that does not exist is answered, and so a private table's hand to
    whoever is not seated at it."""
    return game_error(MatchNotFound("no such match"))


def no_such_table() -> ApiError:
    """What a table that does not exist is answered, and so a private table to whoever
    never sat at it."""
    return game_error(TableNotFound("no such table"))


def optional_caller() -> Caller | None:
    """The caller of a route anyone may call: None without a token, or with one that is
    not valid (refused, such a route is answered as to anyone)."""
    if not bearer_token():
        return None
    try:
        return caller()
    except ApiError:
        return None


def seated_at(hand: HandOf, who: Caller | None) -> bool:
    """Whether the caller may read the table's hand: an operator, or a player dealt it."""
    return who is not None and (who.operator is not None or who.player in hand.players)


def private_hands_hidden(token: bool = True) -> Callable[[_View], _View]:
    """A route's decorator, the innermost (after its arguments are read, so that a bad
    one is answered as for any match): a match in the path that is a private table's hand
    is answered as a match that does not exist (:func:`no_such_match`) to whoever was not
    dealt it, an anonymous caller included (an operator sees it). ``token``: the route
    needs one (a caller without one gets the 401 any match would give)."""

    def hide(view: _View) -> _View:
        @functools.wraps(view)
        def hidden(*args: Any, **kwargs: Any) -> Any:
            hand = services().tables.table_store.hand_of(kwargs["match_id"])
            if hand is None or not hand.private:
                return view(*args, **kwargs)
            if not seated_at(hand, caller() if token else optional_caller()):
                raise no_such_match()
            return view(*args, **kwargs)

        return cast(_View, hidden)

    return hide


def watchers_only(match_id: uuid.UUID, who: Caller | None) -> None:
    """A table's hand is read by those dealt it (and operators); anyone else watches the
    table, as far behind it as the server keeps its watchers, or replays the hand once it
    has ended: 403 ``watch_table``, naming the table. A match no table dealt is read by
    anyone with a token, as onlookers see it."""
    hand = services().tables.table_store.hand_of(match_id)
    if hand is None or seated_at(hand, who):
        return
    raise ApiError(
        403,
        "watch_table",
        f"this hand is one of table {hand.table_id}: who was not dealt it watches the table"
        f" (GET /v1/tables/{hand.table_id}/watch), as far behind it as the server keeps"
        f" watchers, or replays the hand once it has ended (GET /v1/matches/{match_id}/replay)",
        members={"table_id": str(hand.table_id)},
    )
