"""Server-Sent Events, as every stream of the API writes them: a message, the header a
reconnection sends, and the response."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flask import Response, request, stream_with_context

from . import encoding

#: How long an EventSource waits before it reconnects (ms), sent first on every stream.
RETRY = "retry: 1000\n\n"
KEEP_ALIVE = ": keep-alive\n\n"


def sse(event: str, data: Any, event_id: int | str | None = None) -> str:
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [f"event: {event}", f"data: {encoding.dumps(data).decode()}"]
    return "\n".join(lines) + "\n\n"


def last_event_id() -> str | None:
    """The ``Last-Event-ID`` a reconnecting client sends, if any."""
    return request.headers.get("Last-Event-ID")


def event_stream(messages: Iterator[str]) -> Response:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return Response(stream_with_context(messages), mimetype="text/event-stream", headers=headers)
