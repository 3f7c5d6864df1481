"""Server-Sent Events, as every stream of the API writes them: a message, the header a
reconnection sends, and the response."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Response, request, stream_with_context

from ..config import Config
from ..store import Slot, TooManySubscriptions
from ..store.operators import BOOTSTRAP
from . import encoding
from .auth import BEARER, Caller, caller, credential, expired, revoked
from .open_streams import Bound, OpenStream, TooManyOpen
from .problems import ApiError
from .rate_limits import address_key, token_key
from .services import services

#: How long an EventSource waits before it reconnects (ms), sent first on every stream.
RETRY = "retry: 1000\n\n"
KEEP_ALIVE = ": keep-alive\n\n"
#: The share of ``stream_seconds`` a stream's life may fall short of it, at random.
#: Streams opened together end apart: after an API process's restart, the streams that
#: reconnected at once all ended, and reconnected, at once again every ``stream_seconds``
#: (734 in 10 s, a stall of 2.5 s at the p99, five minutes after the restart and
#: every five minutes on; docs/scaling.md).
LIFETIME_SPREAD = 0.2


def lifetime(config: Config) -> float:
    """Seconds a stream opened now stays open before the client reconnects: at most
    ``stream_seconds``, at least :data:`LIFETIME_SPREAD` less of it."""
    return config.stream_seconds * (1.0 - LIFETIME_SPREAD * random.random())


#: What every stream's description says of how it closes.
CLOSES = (
    "Comments keep a quiet connection alive; the server closes the stream after a while (and "
    "at once when the server process is stopping), and the client reconnects."
)
#: What every stream's description says of its end and its bounds (long polls share them).
HELD_OPEN = (
    "A stream ends when the token that opened it is revoked or expires. A caller holds at "
    "most a few event streams and long polls open at once (beyond: 429 `open_stream_limit`), "
    "and a server process a bounded number, so that they never take the connections commands "
    "need (beyond: 503 `too_many_streams`); both with `Retry-After`."
)
#: Seconds a client refused for too many open streams is asked to wait.
STREAMS_RETRY_AFTER = 5
#: The answer beyond the bound on open streams, for every stream's documented errors.
TOO_MANY_STREAMS = {"503": {"$ref": "#/components/responses/SERVICE_UNAVAILABLE"}}


def too_many_streams(exc: TooManySubscriptions) -> ApiError:
    """The problem a stream beyond the process's bound gets (service/store/fanout.py)."""
    return ApiError(
        503,
        "too_many_streams",
        "this server holds as many open event streams and long polls as it may; retry "
        "later (another server may have room)",
        headers={"Retry-After": str(STREAMS_RETRY_AFTER)},
    )


def open_stream(who: Caller | None) -> OpenStream:
    """Admits an event stream or long poll of the caller (None: one without a token, a
    watcher's) under the bounds on what one caller holds open (429 ``open_stream_limit``
    beyond one): its token's, its player's and its address's, or its address's alone
    without a token. Watches the token: the stream ends when it is revoked or expires
    (service/api/open_streams.py). Close it when the stream ends."""
    config = services().config
    bounds = []
    # As the rate limits: not the shared operator token's, and not with the limits off.
    if config.rate_limits and (who is None or who.operator is not BOOTSTRAP):
        bounds = [Bound("address", address_key(), config.max_streams_per_address)]
        if who is not None:
            account = who.player_id or (who.operator and who.operator.operator_id)
            bounds[:0] = [
                Bound("token", token_key(), config.max_streams_per_token),
                Bound("player", str(account), config.max_streams_per_player),
            ]
    try:
        opened = services().open_streams.open(
            None if who is None else credential(who),
            None if who is None else who.expires_at,
            bounds,
        )
    except TooManyOpen as exc:
        raise ApiError(
            429,
            "open_stream_limit",
            f"this {exc.bound.per} holds {exc.bound.limit} open event streams and long "
            f"polls, as many as it may: end one, or retry after {STREAMS_RETRY_AFTER} s",
            headers={"Retry-After": str(STREAMS_RETRY_AFTER)},
        ) from None
    if who is None:
        return opened  # no token to watch
    try:
        # Watched from now on: a revocation that came since the token was looked up is
        # seen by looking it up again.
        caller()
    except BaseException:
        opened.close()
        raise
    return opened


def admitted() -> Slot:
    """A place under the process's bound on streams and long polls (503
    ``too_many_streams`` beyond it), for one that follows no single match. Close it."""
    try:
        return services().fanout.admit()
    except TooManySubscriptions as exc:
        raise too_many_streams(exc) from None


def token_ended(opened: OpenStream) -> ApiError:
    """The answer of a long poll whose token was revoked, or expired, while it waited."""
    return expired() if opened.expired else revoked()


@contextmanager
def long_poll(who: Caller | None, seconds: float) -> Iterator[OpenStream | None]:
    """A request that waits up to ``seconds`` is held open as a stream is (see
    :func:`open_stream` and :func:`admitted`) while it waits; one that does not wait is
    a read (None)."""
    if seconds <= 0:
        yield None
        return
    # The caller's bounds first: a caller at its bound takes no place of the process, not
    # even for a moment (its flood would have others refused 503 meanwhile).
    opened = open_stream(who)
    try:
        slot = admitted()
        try:
            yield opened
        finally:
            slot.close()
    finally:
        opened.close()


def sse(event: str, data: Any, event_id: int | str | None = None) -> str:
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [f"event: {event}", f"data: {encoding.dumps(data).decode()}"]
    return "\n".join(lines) + "\n\n"


def last_event_id() -> str | None:
    """The ``Last-Event-ID`` a reconnecting client sends, if any."""
    return request.headers.get("Last-Event-ID")


def event_stream(messages: Iterator[str] | Iterator[bytes]) -> Response:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return Response(stream_with_context(messages), mimetype="text/event-stream", headers=headers)


def stream_doc(
    summary: str,
    description: str,
    schema: dict[str, Any],
    resume: str,
    id_pattern: str,
    errors: dict[str, Any],
) -> dict[str, Any]:
    """The OpenAPI description of a stream operation: its events' ``schema``, what
    ``Last-Event-ID`` resumes after (``resume``, ids matching ``id_pattern``) and its other
    responses (``errors``, by status)."""
    return {
        "summary": summary,
        "description": description,
        "responses": {
            "200": {
                "description": "An event stream",
                "content": {"text/event-stream": {"schema": schema}},
            },
            **errors,
        },
        "parameters": [
            {
                "in": "header",
                "name": "Last-Event-ID",
                "required": False,
                "description": resume,
                "schema": {"type": "string", "pattern": id_pattern},
            }
        ],
        "security": BEARER,
    }
