"""How a stopping API worker ends its idle kept-alive connections
(``service/gunicorn_worker.py``), step by step on gevent's own sockets: only a connection
still waiting for a request is closed; one whose request has come, or is coming, is
answered. (tests/test_server.py stops a real gunicorn.)"""

from __future__ import annotations

import gevent
import gevent.socket

from service.gunicorn_worker import ProblemWorker, _wait


def worker_with_a_connection():
    """A worker (only what ending waits needs), a connection's two ends, and the server
    end's greenlet: it waits for a request as gunicorn does between requests, then
    'handles' it (a moment's work), and says what happened. Its listeners are closed."""
    worker = ProblemWorker.__new__(ProblemWorker)
    worker.idle, worker.clients, worker.sockets = {}, {}, []
    server, client = gevent.socket.socketpair()
    happened: list[str] = []

    def serve() -> None:
        worker.clients[gevent.getcurrent()] = server
        request = b""
        with _wait(worker.idle, 30):
            request = server.recv(100)
        if not request:
            happened.append("closed while idle")
            return
        gevent.sleep(0.2)  # the request's work: reading the store, say
        happened.append(f"answered {request.decode()}")

    greenlet = gevent.spawn(serve)
    gevent.sleep(0)  # now in its wait
    return worker, client, greenlet, happened


def end_idle(worker) -> None:
    """The worker ends its idle connections, and the loop runs the ends."""
    worker.close_idle()
    gevent.sleep(0.5)


def test_an_idle_connection_is_closed():
    worker, _, greenlet, happened = worker_with_a_connection()
    end_idle(worker)
    assert greenlet.dead and happened == ["closed while idle"]


def test_a_request_read_since_the_look_is_answered():
    """close_idle saw the connection idle; by the time its end came, the greenlet had read
    a request and was at work on it. Ended then, the request failed with a 500."""
    worker, client, greenlet, happened = worker_with_a_connection()
    loop = gevent.get_hub().loop
    seen = list(worker.idle.items())
    client.sendall(b"GET /legal")
    gevent.sleep(0.05)  # the greenlet reads it and starts its work
    for idle, timeout in seen:
        loop.run_callback(worker._end_wait, idle, timeout)
    greenlet.join(2)
    assert happened == ["answered GET /legal"]


def test_a_request_arriving_as_the_wait_ends_is_answered():
    worker, client, greenlet, happened = worker_with_a_connection()
    client.sendall(b"POST /commands")  # arrived, not yet read: the greenlet has not run
    end_idle(worker)
    greenlet.join(2)
    assert happened == ["answered POST /commands"]
