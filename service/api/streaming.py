"""Server-Sent Events, as every stream of the API writes them: a message, the header a
reconnection sends, and the response."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flask import Response, request, stream_with_context

from ..store import TooManySubscriptions
from . import encoding
from .auth import BEARER
from .problems import ApiError

#: How long an EventSource waits before it reconnects (ms), sent first on every stream.
RETRY = "retry: 1000\n\n"
KEEP_ALIVE = ": keep-alive\n\n"


#: Seconds a client refused for too many open streams is asked to wait.
STREAMS_RETRY_AFTER = 5
#: The answer beyond the bound on open streams, for every stream's documented errors.
TOO_MANY_STREAMS = {"503": {"$ref": "#/components/responses/SERVICE_UNAVAILABLE"}}


def too_many_streams(exc: TooManySubscriptions) -> ApiError:
    """The problem a stream beyond the process's bound gets (service/store/fanout.py)."""
    return ApiError(
        503,
        "too_many_streams",
        "this server holds as many open event streams as it may; retry later (another "
        "server may have room)",
        headers={"Retry-After": str(STREAMS_RETRY_AFTER)},
    )


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
