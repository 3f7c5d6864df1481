"""Matches: create, list, take seats, the caller's view and legal plays, commands, events
(long-poll and Server-Sent Events) and the hand record."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

from flask import Response, request

from ..app.commands import CommandRequest
from ..app.metrics import COMMANDS, OPEN_STREAMS
from ..game import (
    OPERATOR,
    PLAYER,
    Command,
    CreateMatch,
    Disconnect,
    GameError,
    Pass,
    Play,
    State,
    TakeSeat,
)
from ..game.actions import command_of
from ..game.actions import offered as offered_actions
from ..game.record import export
from ..game.state import ENDED
from ..rules import pick_cards
from ..store import (
    Batch,
    Loaded,
    Outcome,
    ReaderFailed,
    StoredEvent,
    StoreError,
    Subscription,
    TooManySubscriptions,
    request_hash,
    status,
)
from . import encoding, schemas
from .auth import Caller, audited, caller, player
from .creations import created
from .documents import (
    documented,
    event_documents,
    game_error,
    load,
    private_hands_hidden,
    profiles,
    seat_of,
    since,
    table_of,
    view_document,
    watchers_only,
    with_bot_accounts,
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
    event_stream,
    last_event_id,
    lifetime,
    long_poll,
    open_stream,
    sse,
    stream_doc,
    token_ended,
    too_many_streams,
)

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
    assert state.table is not None  # a listed match exists
    return {
        "match_id": state.match_id,
        "status": status(state),
        "phase": state.phase,
        "version": state.version,
        **state.table.settings(),
        "seats": with_bot_accounts(
            [None if s is None else {"player": s.player, "bot": s.bot} for s in state.seats]
        ),
        "created_at": created_at,
        "updated_at": updated_at,
    }


def execute(request: CommandRequest) -> Outcome:
    """The command path (and the work the new state calls for), its refusals as problems."""
    try:
        return services().commands.execute(request)
    except (GameError, StoreError) as exc:
        raise game_error(exc) from None


@bp.route("", methods=["POST"])
@bp.arguments(
    schemas.MatchCreate(),
    required=False,
    description="Without a body, every option takes its default",
)
@bp.arguments(schemas.IdempotencyHeader(), location="headers", as_kwargs=True)
@bp.response(201, schemas.Match)
@bp.doc(**documented(401, 403, 409, 422))
def create_match(body, key=None):
    """Create a match (a table for one hand) with its ruleset and money options, a stake
    within the server's bounds (`unit` at most `DDZ_MAX_UNIT`, `rake` at most
    `DDZ_MAX_RAKE`: 422 `stake_out_of_bounds`). A player creates a match to sit at it; an
    operator, to fill it with system bots (a match of bots alone is an operator's). With
    an ``Idempotency-Key`` header (a player's) a retry gets the first answer and creates
    nothing."""
    caller()
    table = table_of(body)

    def create() -> dict:
        match_id = uuid.uuid4()
        outcome = execute(
            CommandRequest(
                match_id, lambda state: CreateMatch(str(match_id), table), new_match=True
            )
        )
        at = outcome.last_recorded_at
        return match_document(outcome.state, at, at)

    return created("POST /v1/matches", key, schemas.Match(), create)


@bp.route("", methods=["GET"])
@bp.arguments(schemas.MatchQuery(), location="query")
@bp.response(200, schemas.MatchList)
@bp.doc(**documented(401, 422))
def list_matches(query):
    """List matches, newest first, optionally by status (open, playing, ended).

    A table's hands are listed to those dealt them (and to operators); others find them at
    their table."""
    who = caller()
    listed = services().store.listed(
        query.get("status"), query["limit"], None if who.operator else who.player or ""
    )
    # The page's players read at once (then each match's seats find them known).
    profiles(s.player for loaded, _, _ in listed for s in loaded.state.seats if s is not None)
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
@private_hands_hidden()
def take_seat(body, match_id):
    """Take a seat (a given one, or any free one), or fill one with a system bot: only a
    player seated at the match, or an operator, seats a bot (403 `not_seated`), so that
    nobody fills another's match with bots and a match of bots alone is an operator's.
    When the fourth seat is filled the hand is dealt and its commitment published."""
    who: Caller = caller() if body["bot"] else player()

    def command(state: State) -> Command:
        if body["bot"] and who.operator is None and seat_of(state, who) is None:
            raise GameError(
                "only a player seated at this match (or an operator) may seat a system bot",
                "not_seated",
            )
        seat = body["seat"]
        if seat is None:
            free = [i for i, s in enumerate(state.seats) if s is None]
            if not free:
                raise GameError("every seat is taken", "match_full")
            seat = free[0]
        if body["bot"]:
            return TakeSeat(seat, None, bot=True)
        return TakeSeat(seat, who.player)

    outcome = execute(CommandRequest(match_id, command))
    return view_document(Loaded(outcome.state, outcome.last_recorded_at), who)


@bp.route("/<uuid:match_id>", methods=["GET"])
@bp.response(200, schemas.View)
@bp.doc(**documented(401, 403, 404))
@private_hands_hidden()
def get_match(match_id):
    """The caller's view of the match (docs/rules.md §6): its own hand, counts, the play to beat,
    whose turn and until when, and the actions the caller may take now. A table's hand is
    read by those dealt it: anyone else watches the table (403 `watch_table`)."""
    who = caller()
    watchers_only(match_id, who)
    # As a command's answer: plain JSON of the document, already in the schema's shape
    # (the contract tests hold it to the schema); the schema's dump was half the read's CPU.
    return encoding.json_response(view_document(load(match_id), who))


@bp.route("/<uuid:match_id>/legal", methods=["GET"])
@bp.response(200, schemas.Legal)
@bp.doc(**documented(401, 403, 404))
@private_hands_hidden()
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
@bp.arguments(schemas.CommandRequestSchema())
@bp.arguments(schemas.IdempotencyHeader(), location="headers", as_kwargs=True)
@bp.response(200, schemas.CommandResult)
@bp.doc(**documented(401, 403, 404, 409, 422))
@private_hands_hidden()
def command(body, match_id, key=None):
    """Act for the caller's seat: an action its view offers (``actions``), or resume.
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
    try:
        outcome = execute(
            CommandRequest(
                match_id,
                decide_for_caller,
                expected_version=body.get("expected_version"),
                idempotency=idempotency,
            )
        )
    except ApiError as exc:
        COMMANDS.labels(body["action"], exc.code).inc()
        raise
    COMMANDS.labels(body["action"], "ok").inc()
    # A retry's outcome is the first one again, so its answer is the same, byte for byte.
    return encoding.json_response(command_result(outcome, who))


@bp.route("/<uuid:match_id>/leave", methods=["POST"])
@bp.response(200, schemas.CommandResult)
@bp.doc(**documented(401, 403, 404, 409, 422))
@private_hands_hidden()
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
@bp.doc(**documented(401, 403, 404, 422))
@private_hands_hidden()
def events(query, match_id):
    """The events the caller may see after version ``after``; with ``wait``, waits up to
    that many seconds for the next one (long-polling). A long poll is held as a stream is
    (see the match's stream): it ends with 401 when its token is revoked or expires, and
    counts against the same bounds. A table's hand is read by those dealt it: anyone else
    watches the table (403 `watch_table`)."""
    who = caller()
    watchers_only(match_id, who)
    notifier = services().notifier
    deadline_at = time.monotonic() + query["wait"]
    with long_poll(who, query["wait"]) as opened, notifier.watch(match_id) as woken:
        if opened is not None:
            opened.on_revoked(woken.set)
        # A wake may bring nothing (the listener's periodic check or a reconnection): wait
        # on until an event or the deadline rather than answer empty early. Cleared before
        # each read, so that an append during the read wakes the next wait.
        while True:
            woken.clear()
            found, latest = since(match_id, query["after"])
            remaining = deadline_at - time.monotonic()
            if found or remaining <= 0 or notifier.draining or not (opened and opened.valid()):
                break
            woken.wait(opened.wait(remaining))
        if opened is not None and not opened.valid():
            raise token_ended(opened)  # nothing after the token's end
    audited(who, "events", match_id)
    return {
        "version": latest.state.version,
        "events": event_documents(found, viewer(latest.state, who), latest),
    }


def _last_event_id() -> int | None:
    raw = last_event_id()
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise ApiError(
            400,
            "invalid_last_event_id",
            "Last-Event-ID must be a version number sent by this stream",
        )
    return int(raw)


@bp.route("/<uuid:match_id>/stream", methods=["GET"])
@bp.doc(
    **stream_doc(
        summary="Server-Sent Events of the match",
        description="First a `snapshot` event with the caller's view (its `id` is the version), then "
        "each event the caller may see, with `id:` = its version and `event:` = its type. Reconnect "
        "with `Last-Event-ID` to resume after that version with nothing lost or repeated. "
        + CLOSES
        + "\n\n"
        "A match's last event is `settled`: the settlement job appends it shortly after "
        "`hand_ended`, once the ledger holds the hand's settlement. The stream closes right after "
        "sending `settled` (a stream opened on a settled match sends its snapshot and closes), and "
        "a reconnection with the `Last-Event-ID` of `settled` gets 204 No Content, which tells an "
        "EventSource to stop reconnecting. Between `hand_ended` and `settled` the stream stays open.\n\n"
        "A table's hand is followed by those dealt it: anyone else watches the table (403 "
        "`watch_table`).\n\n" + HELD_OPEN,
        schema=schemas.STREAM_EVENT,
        resume="Resume after this version (the `id` of the last event received)",
        id_pattern="^[0-9]{1,9}$",
        errors={
            "204": {
                "description": "The match is settled and the client has its every event: nothing more will come"
            },
            "400": {"$ref": "#/components/responses/BAD_REQUEST"},
            "401": {"$ref": "#/components/responses/UNAUTHORIZED"},
            "403": {"$ref": "#/components/responses/FORBIDDEN"},
            "404": {"$ref": "#/components/responses/NOT_FOUND"},
            **TOO_MANY_STREAMS,
        },
    )
)
@private_hands_hidden()
def stream(match_id):
    who = caller()
    watchers_only(match_id, who)
    resume_after = _last_event_id()
    with ExitStack() as held:
        opened = open_stream(who)
        held.callback(opened.close)
        subscription = _subscribe(match_id)
        held.callback(subscription.close)
        # Read after subscribing: what this read misses comes in the subscription.
        found, loaded = since(match_id, resume_after)
        if resume_after is not None and resume_after > loaded.state.version:
            raise ApiError(
                400,
                "invalid_last_event_id",
                f"this match is at version {loaded.state.version}; it has no event {resume_after}",
            )
        if resume_after == loaded.state.version and loaded.state.settled:
            return Response(status=204)
        audited(who, "stream", match_id)
        response = event_stream(_follow(who, opened, subscription, loaded, found, resume_after))
        # Also when the stream never starts (the client left first).
        response.call_on_close(held.pop_all().close)
        return response


def _follow(
    who: Caller,
    opened: OpenStream,
    subscription: Subscription,
    loaded: Loaded,
    found: list[StoredEvent],
    resume_after: int | None,
) -> Iterator[bytes]:
    """The stream's messages: its start (the snapshot, or what came after
    ``resume_after``), then each batch of the match's reader, until the match is settled,
    the stream's time is up, the process stops or the token ends (revoked or expired:
    nothing is sent after that)."""
    config, notifier = services().config, services().notifier
    seat = viewer(loaded.state, who)
    with OPEN_STREAMS.track_inprogress():
        if not opened.valid():
            return
        yield RETRY.encode()
        if resume_after is None:
            yield sse(
                "snapshot", VIEW.dump(view_document(loaded, who)), loaded.state.version
            ).encode()
        else:
            yield _rendered(found, seat, loaded)
        if loaded.state.settled:
            return  # the client has the match's last event: nothing more will come
        direct = DirectStream.of(request.environ, seat, loaded.state.version)
        if direct is not None:
            # Under gunicorn's gevent worker the match's reader writes to the socket itself.
            direct.run(subscription, config, notifier, opened)
            return  # gunicorn then ends the response (its last chunk)
        after = loaded.state.version
        woken = threading.Event()
        opened.on_revoked(woken.set)
        batches = subscription.listen(lambda _: woken.set())
        ends = time.monotonic() + lifetime(config)
        while True:
            remaining = ends - time.monotonic()
            if remaining <= 0 or notifier.draining:
                return  # the client reconnects (to a process that is not stopping)
            if not batches:
                woken.wait(opened.wait(min(config.keepalive_seconds, remaining)))
                woken.clear()
                try:
                    batches = subscription.next(0)
                except ReaderFailed:
                    return  # the client reconnects, and its stream gets a new reader
            if not opened.valid():
                return
            sent = False
            for batch in batches:
                data = _news(batch, seat, after)
                if data is not None:
                    yield data
                    sent, after = True, batch.latest.state.version
                    if batch.latest.state.settled:
                        return
            batches = []
            if not sent:
                yield KEEP_ALIVE_BYTES


def _subscribe(match_id: uuid.UUID) -> Subscription:
    try:
        return services().fanout.subscribe(match_id)
    except TooManySubscriptions as exc:
        raise too_many_streams(exc) from None


#: Sent on a quiet stream, as bytes: what the streams send is bytes, rendered once.
KEEP_ALIVE_BYTES = KEEP_ALIVE.encode()


def _news(batch: Batch, seat, after: int) -> bytes | None:
    """What a stream of ``seat`` that has sent up to version ``after`` sends of ``batch``
    (None: nothing new to it)."""
    if batch.latest.state.version <= after:
        return None
    if batch.events[0].version <= after:  # partly sent already
        return _rendered([s for s in batch.events if s.version > after], seat, batch.latest)
    # The streams of one viewer share one rendering of a batch.
    if seat not in batch.rendered:
        batch.rendered[seat] = _rendered(batch.events, seat, batch.latest)
    return batch.rendered[seat]


class DirectStream:
    """A stream written straight to its client's socket by its match's reader, for each
    batch as it is read, without waking the stream's own greenlet: at 5,000 streams a
    process, a wake-up and a pass through the WSGI iterator and gunicorn's writer per
    stream and event made the last stream get its event a third of a second after the
    first. Only under gunicorn's gevent worker (its socket in the environment, one thread):
    the writes never block (what the socket does not take waits in ``pending`` for the
    stream's greenlet), so they cannot interleave with the greenlet's own, and gunicorn's
    framing (HTTP/1.1 chunks) is kept."""

    def __init__(self, sock, chunked: bool, seat, after: int):
        self._sock, self._raw, self._chunked = sock, sock._sock, chunked
        self._seat, self._after = seat, after
        self.pending = bytearray()
        self.wake = threading.Event()
        self.broken = self.done = False
        self._opened: OpenStream | None = None

    @classmethod
    def of(cls, environ: dict, seat, after: int) -> DirectStream | None:
        sock = environ.get("gunicorn.socket")
        if sock is None or not type(sock).__module__.startswith("gevent"):
            return None
        if environ.get("REQUEST_METHOD") != "GET":
            return None
        # gunicorn frames a response without Content-Length in chunks for HTTP/1.1.
        return cls(sock, environ.get("SERVER_PROTOCOL") == "HTTP/1.1", seat, after)

    def send(self, data: bytes) -> None:
        """Writes now what the socket takes; never waits."""
        self._write(self._frame(data))

    def _frame(self, data: bytes) -> bytes:
        return b"%X\r\n%s\r\n" % (len(data), data) if self._chunked else data

    def _write(self, data: bytes) -> None:
        if self.broken:
            return
        if self.pending:
            self.pending += data
            return
        try:
            written = self._raw.send(data)
        except BlockingIOError:
            written = 0
        except OSError:
            self.broken = True
            self.wake.set()
            return
        if written < len(data):
            self.pending += data[written:]
            self.wake.set()

    def on_news(self, batch: Batch | None) -> None:
        """The reader's call: ``batch`` as just read, or None on other news. Nothing is
        written once the stream's token has ended."""
        if batch is not None and not self.done and self._opened and self._opened.valid():
            data = _news(batch, self._seat, self._after)
            if data is not None:
                shared = data is batch.rendered.get(self._seat)
                if shared:
                    # Framed once per viewer too: no allocation per stream and event.
                    key = (self._seat, self._chunked)
                    if key not in batch.rendered:
                        batch.rendered[key] = self._frame(data)
                    self._write(batch.rendered[key])
                else:
                    self.send(data)
                self._after = batch.latest.state.version
                self.done = batch.latest.state.settled
        self.wake.set()

    def run(self, subscription: Subscription, config, notifier, opened: OpenStream) -> None:
        """Waits while the reader writes; sends keep-alives and what the socket could
        not take; returns when the stream ends (also when its token is revoked or
        expires: ``opened``)."""
        self._opened = opened
        opened.on_revoked(self.wake.set)
        for batch in subscription.listen(self.on_news):
            self.on_news(batch)
        ends = time.monotonic() + lifetime(config)
        while not (self.done or self.broken or subscription.failed or notifier.draining):
            remaining = ends - time.monotonic()
            if remaining <= 0:
                break
            woken = self.wake.wait(opened.wait(min(config.keepalive_seconds, remaining)))
            if not opened.valid():
                break
            if not woken:
                self.send(KEEP_ALIVE_BYTES)
            self.wake.clear()
            self._flush()
        self._flush()
        # Whatever the reader still hands this stream is not written: gunicorn is about to
        # end the response, and the socket may then carry another.
        self.broken = True

    def _flush(self) -> None:
        while self.pending and not self.broken:
            data = bytes(self.pending)
            try:
                # Waits (this greenlet only) for a slow client; meanwhile what the reader
                # sends queues behind it, as pending is not empty.
                self._sock.sendall(data)
            except OSError:
                self.broken = True
            del self.pending[: len(data)]


def _rendered(found: list[StoredEvent], seat, latest: Loaded) -> bytes:
    return "".join(
        sse(document["type"], EVENT_DOCUMENT.dump(document), document["version"])
        for document in event_documents(found, seat, latest)
    ).encode()


@bp.route("/<uuid:match_id>/record", methods=["GET"])
@bp.response(200, schemas.HandRecord)
@bp.doc(**documented(401, 403, 404))
@private_hands_hidden()
def record(match_id):
    """The hand record (``ddz-hand/1``): to the seated players once the hand has ended, to
    operators at any time (a table's hand to anyone else: 403 `watch_table`, and its
    replay once it has ended)."""
    who = caller()
    watchers_only(match_id, who)
    stored, latest = since(match_id, 0)
    state = latest.state
    if not who.operator and (seat_of(state, who) is None or state.phase != ENDED):
        raise ApiError(
            403,
            "record_not_available",
            "the record is for the seated players once the hand has ended",
        )
    audited(who, "record", match_id)
    document = export([s.event for s in stored])
    with_bot_accounts(document["seats"])
    document.setdefault("commitment", None)
    document.setdefault("seed", None)
    document.setdefault("deal", None)
    return document
