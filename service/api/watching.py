"""Watching (docs/tables.md, "Watching"): a public table's watcher stream, and a finished
hand's public replay (its page is service/web/replay.py's). Anyone may watch, without a
token: a watcher sees what the table's onlookers see (``service/app/watching.py``),
``DDZ_WATCH_DELAY_SECONDS`` behind the table. A watcher holds its connection as a
player's stream does, under the same bounds (by its token's, or its address's alone)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import marshmallow as ma
from marshmallow import fields as f

from ..app.feed import HELD_SECONDS, Cursor
from ..app.watching import Watched, Watching
from ..store import StoreError
from . import schemas
from .documents import (
    game_error,
    no_such_table,
    optional_caller,
    private_hands_hidden,
    public_replay,
)
from .problems import ApiError
from .routing import Blueprint
from .services import services
from .streaming import (
    CLOSES,
    HELD_OPEN,
    KEEP_ALIVE,
    RETRY,
    TOO_MANY_STREAMS,
    admitted,
    event_stream,
    last_event_id,
    lifetime,
    long_poll,
    open_stream,
    sse,
    stream_doc,
)

bp = Blueprint(
    "watching",
    __name__,
    url_prefix="/v1",
    description="Watching: a public table's events as its onlookers see them, and the "
    "replay of a finished hand; for anyone, without a token",
)

#: An item's id (service.app.feed.Cursor, as the player's own stream's).
ITEM_ID = r"^[0-9]{1,20}-[0-9]{1,20}-[0-9]{1,3}$"
#: An operation anyone may call, without a token.
PUBLIC: dict[str, list] = {"security": []}


class WatchQuery(ma.Schema):
    after = f.String(
        load_default=None,
        validate=schemas.Pattern(ITEM_ID),
        metadata={
            "description": "The `id` of the last item received (or `last_id`); none: from "
            "the start of the table's latest hand"
        },
    )
    wait = schemas.long_poll_wait()


class WatchItem(ma.Schema):
    id = f.String(required=True, metadata={"description": "Its place: resume after it"})
    at = f.DateTime(required=True, metadata={"description": "When its event was recorded"})
    table_id = f.String(required=True)
    match_id = f.String(
        required=True, allow_none=True, metadata={"description": "A hand's event: its match"}
    )
    hand_number = f.Integer(
        required=True, allow_none=True, metadata={"description": "A hand's event: which hand"}
    )
    type = f.String(
        required=True,
        metadata={
            "description": "The event's type: a table's (`player_joined`, `hand_started`, "
            "`hand_settled`, ...) or a hand's (`hand_dealt`, `bid`, `play`, ...)"
        },
    )
    version = f.Integer(required=True, metadata={"description": "Its version in its stream"})
    payload = f.Dict(
        required=True,
        metadata={
            "description": "As an onlooker without a seat sees it (docs/rules.md §6): no "
            "hand, no bottom, no seed before the hand has ended"
        },
    )


class WatchPage(ma.Schema):
    items = f.List(f.Nested(WatchItem), required=True)
    last_id = f.String(
        required=True,
        metadata={"description": "Send as `after` for what follows (past the last item)"},
    )


ITEM = WatchItem()
WATCH_EVENT = schemas.stream_event(
    {"type": "string"},
    "WatchItem",
    "An item of the table: an event of the table or of its hand, as onlookers see it",
    ITEM_ID,
    "The item's id (send it back as `Last-Event-ID`)",
)


def _watching() -> Watching:
    return Watching(services().feed.feed)


def _public(table_id: uuid.UUID) -> str | None:
    """The hand under way at the public table (a private one is answered as a table that
    does not exist)."""
    try:
        state = services().tables.table_store.load(table_id).state
    except StoreError as exc:
        raise game_error(exc) from None
    if state.private:
        raise no_such_table()
    return state.match_id


def _after(text: str | None, table_id: uuid.UUID) -> Cursor:
    if text is None:
        return _watching().start(table_id)
    cursor = Cursor.parse(text)
    if cursor is None:
        raise ApiError(400, "invalid_last_event_id", "Last-Event-ID must be an id sent here")
    if services().feed.from_future(cursor):
        raise ApiError(422, "cursor_unknown", "no item has this id yet: send one received")
    return cursor


def _read(table_id: uuid.UUID, after: Cursor) -> Watched:
    delay = services().config.watch_delay_seconds
    return _watching().items(table_id, after, delay, datetime.now(UTC))


def _matches_of(items: list[dict[str, Any]], watched: set[uuid.UUID]) -> None:
    """The hands the items start, added to what wakes the watcher."""
    for item in items:
        started = item["payload"].get("match_id") if item["type"] == "hand_started" else None
        if started:
            watched.add(uuid.UUID(started))


def _wait_for(got: Watched, remaining: float) -> float:
    """How long to wait before reading again: until the first item held for the delay is
    due, a moment when more is held behind a running transaction, or ``remaining``."""
    wait = remaining
    if got.more:
        wait = min(wait, HELD_SECONDS)
    if got.due is not None:
        wait = min(wait, max(0.0, (got.due - datetime.now(UTC)).total_seconds()))
    return wait


@bp.route("/tables/<uuid:table_id>/watch", methods=["GET"])
@bp.arguments(WatchQuery(), location="query")
@bp.response(200, WatchPage)
@bp.doc(
    responses={
        "404": {"$ref": "#/components/responses/NOT_FOUND"},
        "422": {"$ref": "#/components/responses/UNPROCESSABLE_ENTITY"},
    }
)
def watch(query, table_id):
    """A public table's items after ``after``: its events and its hands' events, each as
    the table's onlookers see it, in one order (from the start of its latest hand without
    ``after``), ``DDZ_WATCH_DELAY_SECONDS`` behind the table; with ``wait``, waits up to
    that many seconds for the next (long-polling), held as a stream is: under the bounds
    of the caller's token, or of its address alone without one. A private table is not
    watched (404, as for a table that does not exist)."""
    who = optional_caller()
    current = _public(table_id)
    after = _after(query["after"], table_id)
    watched = {table_id} | ({uuid.UUID(current)} if current else set())
    notifier = services().notifier
    deadline_at = time.monotonic() + query["wait"]
    with long_poll(who, query["wait"]) as opened, notifier.watch_all(list(watched)) as woken:
        if opened is not None:
            opened.on_revoked(woken.set)
        while True:
            # Cleared before each read: what is appended during it wakes the next wait.
            woken.clear()
            got = _read(table_id, after)
            remaining = deadline_at - time.monotonic()
            # A read that does not wait, or a watcher's token that ended, ends the poll
            # (what it holds is anyone's to see).
            ended = notifier.draining or opened is None or not opened.valid()
            if got.items or remaining <= 0 or ended:
                return {"items": got.items, "last_id": str(got.resume)}
            assert opened is not None  # a poll that waits holds its place
            after = got.resume
            woken.wait(opened.wait(_wait_for(got, remaining)))


@bp.route("/tables/<uuid:table_id>/watch/stream", methods=["GET"])
@bp.doc(
    **{
        **stream_doc(
            summary="Server-Sent Events of a public table, as its onlookers see it",
            description="The items of `GET /v1/tables/{table_id}/watch` as they happen (from "
            "the start of the table's latest hand), each with `id:` its id and `event:` its "
            "type, `DDZ_WATCH_DELAY_SECONDS` behind the table; `Last-Event-ID` resumes after "
            "an item with nothing lost or repeated. "
            + CLOSES
            + " A watcher without a token is counted by its address alone. "
            + HELD_OPEN,
            schema=WATCH_EVENT,
            resume="Resume after this item (the `id` of the last event received)",
            id_pattern=ITEM_ID,
            errors={
                "400": {"$ref": "#/components/responses/BAD_REQUEST"},
                "404": {"$ref": "#/components/responses/NOT_FOUND"},
                "422": {"$ref": "#/components/responses/UNPROCESSABLE_ENTITY"},
                **TOO_MANY_STREAMS,
            },
        ),
        **PUBLIC,
    }
)
def watch_stream(table_id):
    who = optional_caller()
    current = _public(table_id)
    after = _after(last_event_id(), table_id)
    opened = open_stream(who)  # the caller's bounds first, as every stream's
    try:
        slot = admitted()
    except BaseException:
        opened.close()
        raise
    config, notifier = services().config, services().notifier
    watched = {table_id} | ({uuid.UUID(current)} if current else set())

    def follow() -> Iterator[str]:
        nonlocal after
        # The wait under way, woken by a revocation of the watcher's token too.
        waiting: list[threading.Event] = []

        def revoked() -> None:
            for woken in list(waiting):
                woken.set()

        opened.on_revoked(revoked)
        yield RETRY
        ends = time.monotonic() + lifetime(config)
        while not notifier.draining:
            remaining = ends - time.monotonic()
            if remaining <= 0:
                return  # the client reconnects
            with notifier.watch_all(list(watched)) as woken:
                waiting[:] = [woken]
                got = _read(table_id, after)
                if not opened.valid():
                    return  # the watcher's token ended: so does its stream
                after = got.resume
                _matches_of(got.items, watched)
                for item in got.items:
                    yield sse(item["type"], ITEM.dump(item), item["id"])
                if got.items:
                    continue
                wait = _wait_for(got, min(config.keepalive_seconds, remaining))
                if not woken.wait(opened.wait(wait)):
                    yield KEEP_ALIVE

    response = event_stream(follow())
    # Also when the stream never starts (the client left first).
    response.call_on_close(opened.close)
    response.call_on_close(slot.close)
    return response


@bp.route("/matches/<uuid:match_id>/replay", methods=["GET"])
@bp.response(200, schemas.HandRecord)
@bp.doc(
    responses={
        "403": {"$ref": "#/components/responses/FORBIDDEN"},
        "404": {"$ref": "#/components/responses/NOT_FOUND"},
    }
)
@private_hands_hidden(token=False)
def replay(match_id):
    """A finished hand's public replay: its hand record (``ddz-hand/1``: every hand as
    dealt, the bottom, every action, the result and settlement), for anyone once the hand
    has ended (before: 403 ``replay_not_available``); a private table's hand only to those
    dealt it (with their token), and to anyone else 404 as a match that does not exist.
    The page ``/replay/{match_id}`` shows it."""
    return public_replay(match_id)
