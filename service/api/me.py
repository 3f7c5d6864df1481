"""The caller's own pages: who it is and its balance, its matches, its tables."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import marshmallow as ma
from marshmallow import fields as f

from ..app.feed import HELD_SECONDS, Cursor
from ..app.feed_fanout import PlayerSubscription
from ..app.metrics import STREAM_CATCH_UPS
from ..game.ratings import Terms
from ..store import ReaderFailed, ledger
from ..store.ratings import RatingStore
from . import encoding, schemas
from .auth import player
from .documents import (
    after_cursor,
    bot_account_of,
    documented,
    name_of,
    page_cursor,
    profiles,
    seat_of,
)
from .open_streams import OpenStream
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
    token_ended,
)

bp = Blueprint("me", __name__, url_prefix="/v1/me", description="The caller's own pages")


class Me(ma.Schema):
    player_id = f.UUID(required=True)
    name = f.String(required=True)
    bot_account = f.Boolean(required=True, metadata={"description": schemas.BOT_ACCOUNT})
    balance = f.String(required=True, metadata={"description": "The ledger's balance"})


class NamedSeat(ma.Schema):
    player = f.String(required=True, allow_none=True)
    name = f.String(required=True, allow_none=True)
    bot = f.Boolean(required=True)
    bot_account = f.Boolean(required=True, metadata={"description": schemas.BOT_ACCOUNT})


class MyMatch(ma.Schema):
    match_id = f.UUID(required=True)
    table_id = f.UUID(
        required=True, allow_none=True, metadata={"description": "The table whose hand it was"}
    )
    created_at = f.DateTime(required=True)
    phase = f.String(required=True)
    seats = f.List(f.Nested(NamedSeat, allow_none=True), required=True)
    seat = f.Integer(required=True)
    role = f.String(required=True, allow_none=True, metadata={"description": "landlord or farmer"})
    winner = f.String(
        required=True, allow_none=True, metadata={"description": "landlord or farmers"}
    )
    net = f.String(
        required=True, allow_none=True, metadata={"description": "The caller's net, once ended"}
    )
    record = f.String(required=True, metadata={"description": "The hand record's path"})
    rated = f.Boolean(
        required=True,
        metadata={
            "description": "Whether the hand counts in the caller's rating: only the hands "
            "of a table the lobby made do (its quick match's for a person, its ladder's for a "
            "bot account), never a private table's or any other whose players chose each "
            'other, nor one whose rating an operator voided (docs/ratings.md, "Fair play")'
        },
    )


class MyMatches(ma.Schema):
    matches = f.List(f.Nested(MyMatch), required=True, metadata={"description": "Newest first"})
    next_cursor = f.String(
        required=True, allow_none=True, metadata={"description": "The next page; null: no more"}
    )


class MyTable(ma.Schema):
    table_id = f.UUID(required=True)
    created_at = f.DateTime(required=True)
    path = f.String(required=True)


class MyTables(ma.Schema):
    tables = f.List(f.Nested(MyTable), required=True, metadata={"description": "Newest first"})


@bp.route("", methods=["GET"])
@bp.response(200, Me)
@bp.doc(**documented(401, 403))
def get_me():
    """The caller: its name, whether it is a bot account, and its balance in the ledger."""
    who = player()
    known = profiles([who.player])
    balance = ledger.player_ledger(services().pool, who.player_id, limit=0)["balance"]
    return {
        "player_id": who.player_id,
        "name": name_of(known, who.player) or "",
        "bot_account": bot_account_of(known, who.player),
        "balance": balance,
    }


@bp.route("/matches", methods=["GET"])
@bp.arguments(schemas.PageQuery(), location="query")
@bp.response(200, MyMatches)
@bp.doc(**documented(401, 403, 422))
def my_matches(query):
    """The caller's matches, newest first, a page at a time: the table, the seats by name,
    the caller's seat and role, the result and the caller's net, the record's path, and
    whether the hand counts in the caller's rating (a private table's never does)."""
    who = player()
    limit = query["limit"]
    found = services().store.of_player(who.player or "", after_cursor(query["cursor"]), limit + 1)
    page = found[:limit]
    known = profiles(s.player for loaded, _, _ in page for s in loaded.state.seats if s is not None)
    voided = RatingStore(services().pool).voided_among(
        [uuid.UUID(loaded.state.match_id or "") for loaded, _, _ in page]
    )
    mine = frozenset({who.player or ""} if bot_account_of(known, who.player) else ())
    tables = services().tables.table_store
    matches: list[dict[str, Any]] = []
    for loaded, created_at, table_id in page:
        state = loaded.state
        seat = seat_of(state, who)
        assert seat is not None
        result = state.result
        lobby = None if table_id is None else tables.lobby_of(table_id)
        rated = Terms(lobby, uuid.UUID(state.match_id or "") in voided, mine)
        matches.append(
            {
                "match_id": state.match_id,
                "table_id": table_id,
                "created_at": created_at,
                "phase": state.phase,
                "seats": [
                    None
                    if s is None
                    else {
                        "player": s.player,
                        "name": name_of(known, s.player),
                        "bot": s.bot,
                        "bot_account": bot_account_of(known, s.player),
                    }
                    for s in state.seats
                ],
                "seat": seat,
                "role": state.role(seat),
                "winner": None if result is None else result.outcome.winner,
                "net": None if result is None else result.settlement.to_json()["net"][seat],
                "record": f"/v1/matches/{state.match_id}/record",
                "rated": rated.rates(who.player or ""),
            }
        )
    more = len(found) > limit
    last = page[-1] if page else None
    return {
        "matches": matches,
        "next_cursor": page_cursor(last[1], uuid.UUID(last[0].state.match_id))
        if more and last is not None and last[0].state.match_id is not None
        else None,
    }


@bp.route("/tables", methods=["GET"])
@bp.response(200, MyTables)
@bp.doc(**documented(401, 403))
def my_tables():
    """The tables where the caller is seated, newest first."""
    who = player()
    return {
        "tables": [
            {"table_id": table_id, "created_at": created_at, "path": f"/v1/tables/{table_id}"}
            for table_id, created_at in services().tables.table_store.of_player(who.player or "")
        ]
    }


# The player's own stream

#: An item's id: ``<xid>-<position>-<n>`` (service.app.feed.Cursor).
ITEM_ID = r"^[0-9]{1,20}-[0-9]{1,20}-(-1|[0-9]{1,3})$"


class FeedQuery(ma.Schema):
    after = f.String(
        load_default=None,
        validate=schemas.Pattern(ITEM_ID),
        metadata={
            "description": "The `id` of the last item received; none: from the first (an id "
            "past anything that exists: 422 `cursor_unknown`)"
        },
    )
    wait = schemas.long_poll_wait()


class Items(ma.Schema):
    items = f.List(f.Nested(schemas.Item), required=True)
    last_id = f.String(
        required=True,
        allow_none=True,
        metadata={
            "description": "Send as `after` for what follows (past the last item, and past "
            "what was read that had none for the caller); null: nothing yet"
        },
    )


ITEM = schemas.Item()
#: One event of ``GET /v1/me/stream``, as its fields parse (as the match stream's).
PLAYER_STREAM_EVENT = {
    "description": "Each event of the stream: `ready` (unless resumed), then the items",
    "oneOf": [
        schemas.stream_event(
            {"const": "ready"},
            {"type": "object", "maxProperties": 0},
            "The present, when the stream starts (not after `Last-Event-ID`)",
            ITEM_ID,
            "Where the stream starts (send it back as `Last-Event-ID`)",
        ),
        schemas.stream_event(
            {"type": "string", "enum": schemas.ITEM_TYPES},
            "Item",
            "An item of the caller's stream",
            ITEM_ID,
            "The item's id (send it back as `Last-Event-ID`)",
        ),
    ],
}


def _cursor_of(text: str | None) -> Cursor | None:
    if text is None:
        return None
    cursor = Cursor.parse(text)
    if cursor is None:
        raise ApiError(
            400, "invalid_last_event_id", "Last-Event-ID must be an id sent by this stream"
        )
    return _known(cursor)


def _known(cursor: Cursor) -> Cursor:
    """The cursor, unless it is past anything that exists: well formed, so the request is
    valid by the document, and refused as the game's rules refuse (422)."""
    if services().feed.from_future(cursor):
        raise ApiError(
            422, "cursor_unknown", "no item has this id yet: send the id of an item received"
        )
    return cursor


def _watched(player_id: str) -> list[uuid.UUID]:
    """What wakes a reader of the player's own stream: the player's streams, and the player
    itself (a new seat, at a table or a match it did not watch yet, notifies its id)."""
    watched = services().feed.feed.streams(player_id)
    if player_id:
        watched.append(uuid.UUID(player_id))
    return watched


def _read_until(
    player_id: str, after: Cursor | None, states: dict, seconds: float, opened: OpenStream | None
):
    """The items after ``after``, waiting up to ``seconds`` for the first (while the token
    of ``opened`` is valid); and where the next read may start (past the events already
    read)."""
    services_ = services()
    if opened is None:
        # A read that does not wait watches nothing: the streams to watch were a query
        # of their own, a fifth of a poll's round trips.
        items, _, after = services_.feed.items(player_id, after, states)
        return items, after
    deadline_at = time.monotonic() + seconds
    while True:
        with services_.notifier.watch_all(_watched(player_id)) as woken:
            opened.on_revoked(woken.set)
            items, more, after = services_.feed.items(player_id, after, states)
            remaining = deadline_at - time.monotonic()
            if items or remaining <= 0 or services_.notifier.draining or not opened.valid():
                return items, after
            woken.wait(opened.wait(min(HELD_SECONDS, remaining) if more else remaining))


def _stream_items(
    player_id: str,
    after: Cursor | None,
    subscription: PlayerSubscription,
    opened: OpenStream,
) -> Iterator[str]:
    """The stream's messages after ``after`` (from the present without it): read here up
    to where the subscription starts, then handed over by the process's reader; until the
    token of ``opened`` ends (revoked or expired: nothing is sent after that, and the
    client's reconnection is refused)."""
    feed, notifier, config = services().feed, services().notifier, services().config
    start = subscription.start
    if start is None or not opened.valid():
        return  # the reader failed: the client reconnects, and gets a new one
    opened.on_revoked(subscription.wake)
    resumed = after is not None
    if after is None:
        after = feed.now()
        yield sse("ready", {}, str(after))
    states: dict = {}
    while after < start:
        # From what the process's reader still keeps, else from the feed.
        kept = subscription.kept(after)
        if resumed:
            STREAM_CATCH_UPS.labels("feed" if kept is None else "kept").inc()
            resumed = False
        if kept is not None:
            items = [i for fe in kept for i in feed.items_after(player_id, after, fe, states)[1]]
            resume: Cursor | None = start
        else:
            items, _, resume = feed.items(player_id, after, states, until=start.xid)
        assert resume is not None  # it reads on from a cursor
        after = resume
        for item in items:
            if not opened.valid():
                return
            yield sse(item["type"], ITEM.dump(item), item["id"])
    ends = time.monotonic() + lifetime(config)
    while not notifier.draining and time.monotonic() < ends:
        try:
            items = subscription.next(
                opened.wait(max(0.0, min(config.keepalive_seconds, ends - time.monotonic())))
            )
        except ReaderFailed:
            return  # the client reconnects, and its stream gets a new reader
        if not opened.valid():
            return
        sent = False
        for item in items:
            cursor = Cursor.parse(item["id"])
            assert cursor is not None
            if after < cursor:  # a stream that started after the reader's start
                after, sent = cursor, True
                yield sse(item["type"], ITEM.dump(item), item["id"])
        if not sent:
            # A quiet stream: kept alive without reading (it costs the database nothing).
            yield KEEP_ALIVE


@bp.route("/events", methods=["GET"])
@bp.arguments(FeedQuery(), location="query")
@bp.response(200, Items)
@bp.doc(**documented(400, 401, 403, 422))
def my_events(query):
    """What concerns the caller across its tables and matches, in one ordered sequence:
    seated, leaving (left during a hand), left (the seat is free), table_closed,
    hand_started (with the caller's own hand), your_turn (once per decision: the match, its
    version, the deadline and the actions allowed), taken_over (the system plays the
    caller's seat now: resume takes it back), hand_ended, settled; each about a hand with
    the table's ``hand_number``. ``after`` the id
    of the last item received gives what follows, with nothing missed or repeated; with
    ``wait``, waits up to that many seconds for the next (long-polling): held as a stream
    is, it ends with 401 when its token is revoked or expires, and counts against the same
    bounds."""
    who = player()
    after = None if query["after"] is None else Cursor.parse(query["after"])
    with long_poll(who, query["wait"]) as opened:
        items, resume = _read_until(
            who.player or "", None if after is None else _known(after), {}, query["wait"], opened
        )
        if opened is not None and not opened.valid():
            raise token_ended(opened)  # nothing after the token's end
    # Past the events read, with or without items: the next page reads on from there. As
    # the view: plain JSON of a document in the schema's shape (over 2,000 pages of every
    # kind of item, the schema's dump and the document were equal); the dump was a sixth
    # of a read's CPU.
    return encoding.json_response(
        {"items": items, "last_id": None if resume is None else str(resume)}
    )


@bp.route("/stream", methods=["GET"])
@bp.doc(
    **stream_doc(
        summary="Server-Sent Events of everything that concerns the caller",
        description="The items of `GET /v1/me/events` as they happen, each with `id:` its id "
        "and `event:` its type. It starts with a `ready` event whose `id` marks the present (an "
        "item committed a moment before may still follow it: never is one missed); a "
        "reconnection with `Last-Event-ID` resumes after that id with nothing lost or repeated "
        "(an id past anything that exists is refused: 422 `cursor_unknown`). "
        + CLOSES
        + " "
        + HELD_OPEN,
        schema=PLAYER_STREAM_EVENT,
        resume="Resume after this item (the `id` of the last event received)",
        id_pattern=ITEM_ID,
        errors={
            "400": {"$ref": "#/components/responses/BAD_REQUEST"},
            "401": {"$ref": "#/components/responses/UNAUTHORIZED"},
            "403": {"$ref": "#/components/responses/FORBIDDEN"},
            "422": {"$ref": "#/components/responses/UNPROCESSABLE_ENTITY"},
            **TOO_MANY_STREAMS,
        },
    )
)
def my_stream():
    who = player()
    player_id = who.player or ""
    after = _cursor_of(last_event_id())
    with ExitStack() as held:
        opened = open_stream(who)  # the caller's bounds first (see long_poll)
        held.callback(opened.close)
        slot = admitted()
        held.callback(slot.close)

        def generate() -> Iterator[str]:
            yield RETRY
            # The process's reader hands the stream the player's items from where it joins
            # (service/app/feed_fanout.py); the stream reads those before that itself.
            subscription = services().feed_fanout.subscribe(player_id)
            try:
                yield from _stream_items(player_id, after, subscription, opened)
            finally:
                subscription.close()

        response = event_stream(generate())
        response.call_on_close(held.pop_all().close)  # also when the stream never starts
        return response
