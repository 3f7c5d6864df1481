"""gunicorn's gevent worker, answering the requests gunicorn refuses itself (before the app
sees them) as problem documents, as the app answers everything else.

gunicorn refuses a request line over ``limit_request_line`` (414), more header fields than
``limit_request_fields`` or one over ``limit_request_field_size`` bytes (431), and HTTP it
cannot parse (400), with an HTML page. Here gunicorn still decides the status and logs the
request; only the page it writes is replaced.

Imports nothing of the app at module level: gunicorn's master loads this class before the
worker patches the standard library (see ``gunicorn_conf``)."""

from __future__ import annotations

import http
import select
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gunicorn import glogging
from gunicorn.http import wsgi
from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine
from gunicorn.http.message import Request
from gunicorn.workers.ggevent import GeventWorker


class _Page:
    """Stands in for the client socket while gunicorn writes its error page."""

    data = b""

    def gettimeout(self) -> float:
        return 0.0

    def sendall(self, data: bytes) -> None:
        self.data += data


class QuietAccessLogger(glogging.Logger):
    """gunicorn's logger, building no access line that no handler would write. Given a
    logging configuration (``gunicorn_conf`` gives one, for its JSON lines) gunicorn counts
    its access log as on, and on every request built the line's atoms (some thirty fields)
    and a record for its ``gunicorn.access`` logger, which that configuration leaves
    without handlers (the app logs each request itself): 2.5 % of a command's CPU, for
    nothing. With a handler (``--access-logfile``, another configuration) it logs as ever."""

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        if self.access_log.hasHandlers():
            super().access(resp, req, environ, request_time)


class OneSendResponse(wsgi.Response):
    """gunicorn's response, sending a whole answer of known length (every JSON answer) in
    one ``send``: gunicorn sends the headers, then the body, so the client woke twice per
    answer, and under load the first ``send`` (which wakes the client on this machine's
    loopback) was a sixth of a worker's busy time. Streams (chunked) are written as
    gunicorn writes them."""

    def write(self, arg: bytes) -> None:
        if (
            self.headers_sent
            or self.chunked
            or self._omits_body  # type: ignore[attr-defined]  # not in the stubs
            or not arg
            or (self.response_length is not None and len(arg) > self.response_length)
        ):
            return super().write(arg)
        # gunicorn's send_headers, with the body joined to the headers.
        head = self.default_headers()
        head.extend(f"{name}: {value}\r\n" for name, value in self.headers)
        self.headers_sent = True
        self.sent += len(arg)
        self.sock.sendall(("".join(head) + "\r\n").encode("latin-1") + arg)
        return None


@contextmanager
def _wait(waits: dict[Any, Any] | None, seconds: float) -> Iterator[None]:
    """gunicorn's wait for a connection's next request (``seconds`` at most), noted in
    ``waits`` (when given) by its greenlet while it lasts."""
    import gevent

    me = gevent.getcurrent()
    # False (as gunicorn passes; its stubs do not say so): when it fires, the wait just ends.
    timeout = gevent.Timeout(seconds, False)  # type: ignore[arg-type]
    if waits is not None:
        waits[me] = timeout
    try:
        with timeout:
            yield
    finally:
        if waits is not None:
            waits.pop(me, None)


class _Listener:
    """A listening socket's address, which gunicorn asks the socket for on each connection:
    a connection accepted just before a stopping worker closes its listener failed there
    (EBADF), its request unread and its client answered nothing."""

    def __init__(self, address: Any) -> None:
        self.address = address

    def getsockname(self) -> Any:
        return self.address


class ProblemWorker(GeventWorker):
    def init_process(self) -> None:
        # gunicorn makes each request's response with its module's Response class.
        wsgi.Response = OneSendResponse  # type: ignore[misc]
        self.idle: dict[Any, Any] = {}  # greenlet: the timeout of its wait, while idle
        self.clients: dict[Any, socket.socket] = {}  # greenlet: its connection's socket
        self.fresh: set[Any] = set()  # the greenlets of connections yet to send a request
        super().init_process()

    def run(self) -> None:
        self.listeners = {s: _Listener(s.getsockname()) for s in self.sockets}
        super().run()

    def handle(self, listener: Any, client: socket.socket, addr: Any) -> None:
        import gevent

        me = gevent.getcurrent()
        self.fresh.add(me)
        self.clients[me] = client
        try:
            super().handle(self.listeners.get(listener, listener), client, addr)
        finally:
            self.fresh.discard(me)
            self.clients.pop(me, None)

    def timeout_ctx(self) -> Any:
        """A stopping worker waits for every connection to close, idle ones too, up to
        its graceful timeout (30 s): with idle connections kept 75 s
        (gunicorn_conf.py), every stop took that long. The waits between requests are
        noted so that :meth:`close_idle` can end them; once stopping, none begins. A new
        connection's wait for its first request is not idle (its client opened it to
        send one) and lasts as long as ever: it is answered, then closed."""
        import gevent

        me = gevent.getcurrent()
        if me in self.fresh:
            self.fresh.discard(me)
            return _wait(None, self.cfg.keepalive)
        return _wait(self.idle, self.cfg.keepalive if self.alive else 0)

    def close_idle(self) -> None:
        """Ends the waits of idle kept-alive connections: each closes, as at the end of its
        keep-alive, and its client opens another. Only once the worker's listeners are
        closed (gunicorn closes them within a second of the stop), so that those clients
        reach a worker that is not stopping."""
        import time

        import gevent

        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(s.fileno() != -1 for s in self.sockets):
            time.sleep(0.05)
        loop = gevent.get_hub().loop
        for greenlet, timeout in list(self.idle.items()):
            loop.run_callback(self._end_wait, greenlet, timeout)

    def _end_wait(self, greenlet: Any, timeout: Any) -> None:
        """In the hub, between two steps of the connection's greenlet: it may have read a
        request since :meth:`close_idle` looked (ended from outside then, its request
        failed with the wait's timeout), or have one arriving, which it answers."""
        from gevent import monkey

        if self.idle.get(greenlet) is not timeout:
            return
        client = self.clients.get(greenlet)
        if client is not None and client.fileno() != -1:
            # The standard library's poll: in the hub nothing may wait.
            poll = monkey.get_original("select", "poll")()
            poll.register(client.fileno(), select.POLLIN)
            if poll.poll(0):
                return
        greenlet.throw(timeout)

    def handle_error(
        self, req: Request | None, client: socket.socket, addr: object, exc: BaseException
    ) -> None:
        page = _Page()
        # gunicorn only calls sendall on the socket it writes its page to.
        super().handle_error(req, page, addr, exc)  # type: ignore[arg-type]
        status = int(page.data.split(b" ", 2)[1])
        code, detail = self.problem_of(status, exc)
        from service.api.headers import NO_STORE, SECURITY_HEADERS
        from service.api.problems import PROBLEM_JSON, document

        host = next((v for k, v in req.headers if k == "HOST"), None) if req else None
        # The problem's page on the host asked, when the request got as far as its headers.
        body = document(status, code, detail, base=f"{req.scheme}://{host}" if req and host else "")
        head = [
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
            "Connection: close",
            f"Content-Type: {PROBLEM_JSON}",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in [NO_STORE, *SECURITY_HEADERS]),
        ]
        try:
            client.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + body)
        except OSError:
            self.log.debug("Failed to send error message.")

    def problem_of(self, status: int, exc: BaseException) -> tuple[str, str]:
        if isinstance(exc, LimitRequestLine):
            return (
                "request_line_too_long",
                f"the request line (method, path and query) is over {self.cfg.limit_request_line} bytes",
            )
        if isinstance(exc, LimitRequestHeaders):
            return "headers_too_large", (
                f"the request's headers are too many or too large: at most {self.cfg.limit_request_fields} "
                f"header fields of at most {self.cfg.limit_request_field_size} bytes each"
            )
        if status == 500:
            return "internal_error", "the server failed; the request may not have been applied"
        return http.HTTPStatus(
            status
        ).name.lower(), f"the request is not valid HTTP/1.1, or not served: {exc}"
