"""The request body as the app reads it: at most ``DDZ_MAX_BODY_BYTES``, also when sent
without a Content-Length, and all of it within ``DDZ_BODY_SECONDS`` of the request's
headers.

Werkzeug refuses a body whose Content-Length exceeds ``MAX_CONTENT_LENGTH``, but cuts a
chunked body at the limit and lets the app read what is left: a command followed by
padding would pass. So a chunked body is read whole (up to the limit and a byte) when the
app first reads it, and answered 413 when there is more. Only then:
read before the app, it was read before the rate limits counted the request, so that
chunked bodies held connections uncounted.

A body that does not come (a Content-Length and nothing after it, or a chunked body
trickled a byte every few seconds) held its connection for as long as the client liked.
Now the reads of a body end at the deadline (see :class:`_Deadline`); past it the request
is answered 408 ``body_timeout`` and the connection closed, the rest of the body unread."""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.exceptions import RequestEntityTooLarge, RequestTimeout


class BodyTimeout(RequestTimeout):
    problem_code = "body_timeout"

    def __init__(self, seconds: float):
        super().__init__(f"the request body did not arrive within {seconds:g} s")


class _Deadline:
    """The client's input, read until the deadline at most. Under gevent (gunicorn's
    worker) a timer ends the whole read, however many times it waits for the socket;
    elsewhere (the development server) a timeout on the socket ends each wait."""

    def __init__(self, stream: Any, sock: socket.socket, seconds: float):
        self._stream, self._sock, self._seconds = stream, sock, seconds
        self._ends = time.monotonic() + seconds
        self._gevent = type(sock).__module__.startswith("gevent")

    def read(self, size: int | None = -1) -> bytes:
        return self._waiting(self._stream.read, size)

    def readline(self, size: int | None = -1) -> bytes:
        return self._waiting(self._stream.readline, size)

    def _waiting(self, read: Callable[[int | None], bytes], size: int | None) -> bytes:
        remaining = self._ends - time.monotonic()
        if remaining <= 0:
            raise self._timed_out()
        if self._gevent:
            from gevent import Timeout

            timer = Timeout(remaining)
            try:
                with timer:
                    return read(size)
            except Timeout as exc:
                if exc is not timer:
                    raise
                raise self._timed_out() from None
        before = self._sock.gettimeout()
        self._sock.settimeout(remaining)
        try:
            return read(size)
        except TimeoutError:
            raise self._timed_out() from None
        finally:
            try:
                self._sock.settimeout(before)
            except OSError:
                pass  # closed

    def _timed_out(self) -> BodyTimeout:
        # Nothing more is read from the connection: the server closes it after the answer
        # rather than wait for the rest of the body. gunicorn closes a connection whose
        # body failed to read, but sees only an Exception as a failure, never gevent's
        # Timeout: without the flag, chunks it had already buffered were parsed as the
        # next request and answered 400 on the same connection.
        if hasattr(self._stream, "failed"):
            self._stream.failed = True
        try:
            self._sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass
        return BodyTimeout(self._seconds)


class _Whole:
    """A chunked body, read whole on its first read (413 past the limit)."""

    def __init__(self, stream: Any, limit: int):
        self._stream, self._limit = stream, limit
        self._body: io.BytesIO | None = None

    def read(self, size: int | None = -1) -> bytes:
        return self._whole().read(size)

    def readline(self, size: int | None = -1) -> bytes:
        return self._whole().readline(size)

    def _whole(self) -> io.BytesIO:
        if self._body is None:
            body = self._stream.read(self._limit + 1)
            if len(body) > self._limit:
                raise RequestEntityTooLarge()
            self._body = io.BytesIO(body)
        return self._body


class RequestBody:
    """WSGI middleware bounding the body's size and the time it takes to arrive."""

    def __init__(self, app: Callable, limit: int, seconds: float):
        self.app, self.limit, self.seconds = app, limit, seconds

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        length = environ.get("CONTENT_LENGTH")
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if length or chunked:
            sock = environ.get("gunicorn.socket") or environ.get("werkzeug.socket")
            if sock is not None:
                environ["wsgi.input"] = _Deadline(environ["wsgi.input"], sock, self.seconds)
        if chunked:
            environ["wsgi.input"] = _Whole(environ["wsgi.input"], self.limit)
            # The body ends where _Whole says: Werkzeug may read it without a length.
            environ["wsgi.input_terminated"] = True
        return self.app(environ, start_response)
