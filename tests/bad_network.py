"""A bad network for the Python client's tests (tests/test_client.py, tests/test_bridge.py):
real HTTP whose player streams drop, whose first command loses its answer, and whose
service may then be down for a while."""

from __future__ import annotations

from collections.abc import Iterator

import httpx


class DroppingStream(httpx.SyncByteStream):
    """A response body whose connection drops after ``chunks`` chunks."""

    def __init__(self, inner: httpx.SyncByteStream, chunks: int) -> None:
        self.inner, self.chunks = inner, chunks

    def __iter__(self) -> Iterator[bytes]:
        for n, chunk in enumerate(self.inner, 1):
            yield chunk
            if n == self.chunks:
                raise httpx.ReadError("the connection dropped")

    def close(self) -> None:
        self.inner.close()


class BadNetwork(httpx.BaseTransport):
    """Real HTTP, with a bad network's faults: each connection of the player's stream drops
    after a few chunks, the answer of the first command is lost once the service has acted
    on it, then the next ``outage`` requests find no service (as while it restarts) and the
    next ``busy`` are answered 503 (as by a service shedding load). Records each command
    sent (its Idempotency-Key)."""

    def __init__(self, stream_chunks: int = 3, outage: int = 0, busy: int = 0) -> None:
        self.inner = httpx.HTTPTransport()
        self.stream_chunks = stream_chunks
        self.outage, self.busy = outage, busy
        self.stream_connections = 0
        self.command_keys: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.command_keys and self.outage:
            self.outage -= 1
            raise httpx.ConnectError("connection refused: the service is down")
        if self.command_keys and self.busy:
            self.busy -= 1
            problem = {"status": 503, "code": "unavailable", "detail": "busy, try again"}
            return httpx.Response(503, json=problem, headers={"Retry-After": "0"})
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/commands"):
            self.command_keys.append(request.headers["Idempotency-Key"])
            if len(self.command_keys) == 1:
                response.read()
                response.close()
                raise httpx.ReadError("the connection dropped before the answer")
        if request.url.path == "/v1/me/stream":
            self.stream_connections += 1
            assert isinstance(response.stream, httpx.SyncByteStream)
            response.stream = DroppingStream(response.stream, self.stream_chunks)
        return response

    def close(self) -> None:
        self.inner.close()
