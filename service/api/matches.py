"""Matches: create, list, take seats, the caller's view and legal plays, commands, events
(long-poll and Server-Sent Events) and the hand record."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from flask import Response, request, stream_with_context

from ..app.commands import CommandRequest
from ..game import (
    OPERATOR,
    PLAYER,
    Command,
    CreateMatch,
    DealHand,
    Disconnect,
    GameError,
    Pass,
    Play,
    State,
    Table,
    TakeSeat,
)
from ..game.actions import command_of
from ..game.actions import offered as offered_actions
from ..game.record import export
from ..game.state import DEALING, ENDED
from ..rules import new_seed, pick_cards
from ..store import Loaded, Outcome, StoreError, request_hash, status
from . import encoding, schemas
from .auth import BEARER, Caller, caller, player
from .documents import documented, event_documents, game_error, load, seat_of, since, view_document
from .problems import ApiError
from .routing import Blueprint
from .services import services

bp = Blueprint(
    "matches",
    __name__,
    url_prefix="/v1/matches",
    description="Matches: one hand of four seats each",
)

# Built once: a schema is costly to build, and these dump on every stream event.
VIEW = schemas.View()
EVENT_DOCUMENT = schemas.EventDocument()


def command_result(outcome: Outcome, who: Caller) -> dict[str, Any]:
    """What a command answers: the new version, its events as the caller sees them, and
    the caller's view after them."""
    seat = seat_of(outcome.state, who)
    latest = Loaded(outcome.state, outcome.last_recorded_at)
    return {
        "version": outcome.state.version,
        "events": event_documents(outcome.events, seat, latest),
        "view": view_document(latest, who),
    }


def match_document(state: State, created_at, updated_at) -> dict[str, Any]:
    return {
        "match_id": state.match_id,
        "status": status(state),
        "phase": state.phase,
        "version": state.version,
        **state.table.settings(),
        "seats": [None if s is None else {"player": s.player, "bot": s.bot} for s in state.seats],
        "created_at": created_at,
        "updated_at": updated_at,
    }


def execute(request: CommandRequest) -> Outcome:
    """The command path (and the work the new state calls for), its refusals as problems."""
    try:
        return services().commands.execute(request)
    except (GameError, StoreError) as exc:
        raise game_error(exc) from None


def deal_when_full(state: State) -> Command | None:
    """The four seats are taken: deal, appended with the seat, from a fresh secret seed."""
    return DealHand(new_seed()) if state.phase == DEALING else None


@bp.route("", methods=["POST"])
@bp.arguments(
    schemas.MatchCreate(),
    required=False,
    description="Without a body, every option takes its default",
)
@bp.response(201, schemas.Match)
@bp.doc(**documented(401, 403, 422))
def create_match(body):
    """Create a match (a table for one hand) with its ruleset and money options."""
    player()
    try:
        table = Table.build(
            body["ruleset"],
            body["unit"],
            body["cap"],
            body["rake"],
            body["bombs_double"],
            body["turn_seconds"],
            body["bot_level"],
        )
    except GameError as exc:
        raise game_error(exc) from None
    match_id = uuid.uuid4()
    outcome = execute(
        CommandRequest(match_id, lambda state: CreateMatch(str(match_id), table), new_match=True)
    )
    at = outcome.last_recorded_at
    return match_document(outcome.state, at, at)


@bp.route("", methods=["GET"])
@bp.arguments(schemas.MatchQuery(), location="query")
@bp.response(200, schemas.MatchList)
@bp.doc(**documented(401, 422))
def list_matches(query):
    """List matches, newest first, optionally by status (open, playing, ended)."""
    caller()
    listed = services().store.listed(query.get("status"), query["limit"])
    return {
        "matches": [
            match_document(loaded.state, created_at, updated_at)
            for loaded, created_at, updated_at in listed
        ]
    }


@bp.route("/<uuid:match_id>/seats", methods=["POST"])
@bp.arguments(
    schemas.SeatRequest(),
    required=False,
    description="Without a body, any free seat for the caller",
)
@bp.response(201, schemas.View)
@bp.doc(**documented(401, 403, 404, 409, 422))
def take_seat(body, match_id):
    """Take a seat (a given one, or any free one), or fill one with a system bot. When the
    fourth seat is filled the hand is dealt and its commitment published."""
    who = player()

    def command(state: State) -> Command:
        seat = body["seat"]
        if seat is None:
            free = [i for i, s in enumerate(state.seats) if s is None]
            if not free:
                raise GameError("every seat is taken", "match_full")
            seat = free[0]
        if body["bot"]:
            return TakeSeat(seat, None, bot=True)
        return TakeSeat(seat, who.player)

    outcome = execute(CommandRequest(match_id, command, then=deal_when_full))
    return view_document(Loaded(outcome.state, outcome.last_recorded_at), who)


@bp.route("/<uuid:match_id>", methods=["GET"])
@bp.response(200, schemas.View)
@bp.doc(**documented(401, 404))
def get_match(match_id):
    """The caller's view of the match (docs/rules.md §6): its own hand, counts, the play to beat,
    whose turn and until when, and the actions the caller may take now."""
    who = caller()
    return view_document(load(match_id), who)


@bp.route("/<uuid:match_id>/legal", methods=["GET"])
@bp.response(200, schemas.Legal)
@bp.doc(**documented(401, 403, 404))
def legal(match_id):
    """The caller's legal plays now, each with concrete cards (for hints and bots)."""
    who = player()
    state = load(match_id).state
    seat = seat_of(state, who)
    if seat is None:
        raise ApiError(403, "not_seated", "the caller has no seat at this match")
    offered = {action["action"] for action in offered_actions(state, seat)}
    plays: list[dict] = []
    if Play.name in offered:
        plays = [
            {
                "cards": [c.code for c in pick_cards(state.hands[seat], play.counts)],
                "type": play.type.value,
                "rank": play.rank,
            }
            for play in state.plays(seat)
        ]
    can_pass = Pass.name in offered
    return {"version": state.version, "seat": seat, "plays": plays, "can_pass": can_pass}


def to_command(body: dict, seat: int) -> Command:
    return command_of(body, seat, PLAYER)


@bp.route("/<uuid:match_id>/commands", methods=["POST"])
@bp.arguments(schemas.CommandRequest())
@bp.arguments(schemas.IdempotencyHeader(), location="headers", as_kwargs=True)
@bp.response(200, schemas.CommandResult)
@bp.doc(**documented(401, 403, 404, 409, 422))
def command(body, match_id, key=None):
    """Act for the caller's seat: bid, show_hand (摊打), report (报到), play, pass or resume.
    With ``expected_version`` a stale view gets 409. With an ``Idempotency-Key`` header a
    retry of the same request gets the first response and changes nothing; the same key
    with another request gets 422."""
    who = player()

    def decide_for_caller(state: State) -> Command:
        seat = seat_of(state, who)
        if seat is None:
            raise GameError("the caller has no seat at this match", "not_seated")
        return to_command(body, seat)

    idempotency = None
    if key is not None:
        idempotency = (who.player_id, f"{match_id}:{key}", request_hash(body))
    outcome = execute(
        CommandRequest(
            match_id,
            decide_for_caller,
            expected_version=body.get("expected_version"),
            idempotency=idempotency,
        )
    )
    # The hot path: plain JSON of a document already in the schema's shape (the contract
    # tests hold it to the schema), which costs a tenth of a schema dump. A retry's outcome
    # is the first one again, so its answer is the same, byte for byte.
    return Response(
        encoding.dumps(command_result(outcome, who)), status=200, mimetype="application/json"
    )


@bp.route("/<uuid:match_id>/leave", methods=["POST"])
@bp.response(200, schemas.CommandResult)
@bp.doc(**documented(401, 403, 404, 409, 422))
def leave(match_id):
    """Leave the hand: the seat is disconnected on purpose and the system plays it to the
    end (系统代打). The first seat to disconnect pays the penalty; ``resume`` takes control
    back, but the penalty stands."""
    who = player()

    def disconnect_caller(state: State) -> Command:
        seat = seat_of(state, who)
        if seat is None:
            raise GameError("the caller has no seat at this match", "not_seated")
        return Disconnect(seat, "left")

    return command_result(execute(CommandRequest(match_id, disconnect_caller)), who)


def viewer(state: State, who: Caller):
    return OPERATOR if who.operator else seat_of(state, who)


@bp.route("/<uuid:match_id>/events", methods=["GET"])
@bp.arguments(schemas.EventsQuery(), location="query")
@bp.response(200, schemas.EventList)
@bp.doc(**documented(401, 404, 422))
def events(query, match_id):
    """The events the caller may see after version ``after``; with ``wait``, waits up to
    that many seconds for the next one (long-polling)."""
    who = caller()
    with services().notifier.watch(match_id) as woken:
        found, latest = since(match_id, query["after"])
        if not found and query["wait"] > 0:
            woken.wait(query["wait"])
            found, latest = since(match_id, query["after"])
    return {
        "version": latest.state.version,
        "events": event_documents(found, viewer(latest.state, who), latest),
    }


def _last_event_id() -> int | None:
    raw = request.headers.get("Last-Event-ID")
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise ApiError(
            400,
            "invalid_last_event_id",
            "Last-Event-ID must be a version number sent by this stream",
        )
    return int(raw)


def _sse(event: str, data: Any, event_id: int | None = None) -> str:
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [f"event: {event}", f"data: {encoding.dumps(data).decode()}"]
    return "\n".join(lines) + "\n\n"


@bp.route("/<uuid:match_id>/stream", methods=["GET"])
@bp.doc(
    summary="Server-Sent Events of the match",
    description="First a `snapshot` event with the caller's view (its `id` is the version), then "
    "each event the caller may see, with `id:` = its version and `event:` = its type. Reconnect "
    "with `Last-Event-ID` to resume after that version with nothing lost or repeated. Comments "
    "keep a quiet connection alive; the server closes the stream after a while (and at once "
    "when the server process is stopping), and the client reconnects.\n\n"
    "A match's last event is `settled`: the settlement job appends it shortly after "
    "`hand_ended`, once the ledger holds the hand's settlement. The stream closes right after "
    "sending `settled` (a stream opened on a settled match sends its snapshot and closes), and "
    "a reconnection with the `Last-Event-ID` of `settled` gets 204 No Content, which tells an "
    "EventSource to stop reconnecting. Between `hand_ended` and `settled` the stream stays open.",
    responses={
        "200": {
            "description": "An event stream",
            "content": {"text/event-stream": {"schema": schemas.STREAM_EVENT}},
        },
        "204": {
            "description": "The match is settled and the client has its every event: nothing more will come"
        },
        "400": {"$ref": "#/components/responses/BAD_REQUEST"},
        "401": {"$ref": "#/components/responses/UNAUTHORIZED"},
        "404": {"$ref": "#/components/responses/NOT_FOUND"},
    },
    parameters=[
        {
            "in": "header",
            "name": "Last-Event-ID",
            "required": False,
            "description": "Resume after this version (the `id` of the last event received)",
            "schema": {"type": "string", "pattern": "^[0-9]{1,9}$"},
        }
    ],
    security=BEARER,
)
def stream(match_id):
    who = caller()
    resume_after = _last_event_id()
    loaded = load(match_id)
    if resume_after is not None and resume_after > loaded.state.version:
        raise ApiError(
            400,
            "invalid_last_event_id",
            f"this match is at version {loaded.state.version}; it has no event {resume_after}",
        )
    if resume_after == loaded.state.version and loaded.state.settled:
        return Response(status=204)
    config = services().config

    def generate() -> Iterator[str]:
        store, notifier = services().store, services().notifier
        seat = viewer(loaded.state, who)
        yield "retry: 1000\n\n"
        after = resume_after
        if after is None:
            after = loaded.state.version
            yield _sse("snapshot", VIEW.dump(view_document(loaded, who)), after)
        started = time.monotonic()
        while True:
            remaining = config.stream_seconds - (time.monotonic() - started)
            if remaining <= 0:
                return
            with notifier.watch(match_id) as woken:
                found, latest = store.since(match_id, after)
                if not found:
                    if latest.state.settled:
                        return  # the client has the match's last event: nothing more will come
                    if notifier.draining:
                        return  # the client reconnects (to a process that is not stopping)
                    if not woken.wait(min(config.keepalive_seconds, remaining)):
                        yield ": keep-alive\n\n"
                    continue
            for document in event_documents(found, seat, latest):
                yield _sse(document["type"], EVENT_DOCUMENT.dump(document), document["version"])
                after = document["version"]

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return Response(stream_with_context(generate()), mimetype="text/event-stream", headers=headers)


@bp.route("/<uuid:match_id>/record", methods=["GET"])
@bp.response(200, schemas.HandRecord)
@bp.doc(**documented(401, 403, 404))
def record(match_id):
    """The hand record (``ddz-hand/1``): to the seated players once the hand has ended, to
    operators at any time."""
    who = caller()
    stored, latest = since(match_id, 0)
    state = latest.state
    if not who.operator and (seat_of(state, who) is None or state.phase != ENDED):
        raise ApiError(
            403,
            "record_not_available",
            "the record is for the seated players once the hand has ended",
        )
    document = export([s.event for s in stored])
    document.setdefault("commitment", None)
    document.setdefault("seed", None)
    document.setdefault("deal", None)
    return document
