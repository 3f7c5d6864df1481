"""gunicorn's settings for the API, the one place ``ddz serve``, the Procfile, the
Dockerfile and the systemd unit take them from::

    gunicorn -c python:service.gunicorn_conf service.api.wsgi:app

Command-line flags still override these (``--bind``, ``--workers`` ...). This module
imports nothing of the app but its configuration (its hooks do, in the worker): gunicorn's master loads it
before the gevent worker patches the standard library, and psycopg, redis-py and the pool
must be imported after that.

gevent workers: an open event stream or long poll waits on a greenlet, not on a thread,
so a few hundred watching clients cannot take every thread and leave commands waiting (a
gthread worker of 32 threads held at most 32 streams). psycopg 3 cooperates with gevent
once gunicorn has patched the standard library, as do redis-py and the pool."""

import os
from typing import TYPE_CHECKING

from service.config import Config

# For the hooks' annotations only (quoted: nothing more is imported before gevent patches).
if TYPE_CHECKING:
    from gunicorn.arbiter import Arbiter
    from gunicorn.http.message import Request
    from gunicorn.workers.base import Worker

CONFIG = Config.from_env()
#: gunicorn's gevent worker, writing the errors gunicorn answers itself (headers too
#: large ...) as problem documents.
worker_class = "service.gunicorn_worker.ProblemWorker"
#: Processes: one per core unless WEB_CONCURRENCY says.
workers = CONFIG.web_concurrency or os.cpu_count() or 2
worker_connections = CONFIG.worker_connections
timeout = 120
#: No control socket (gunicorn 25.1+): its default path is one per user
#: (``~/.gunicorn/gunicorn.ctl``), so every gunicorn of a user would share it; nothing
#: here uses ``gunicornc``.
control_socket_disable = True
#: Requests one client connection carries before the worker closes it (as nginx's
#: ``keepalive_requests``; the client opens another). A connection stays with the worker
#: that accepted it, and which one that is is luck: under load one worker was seen holding
#: 24 of 32 connections, its clients waiting twice as long as the other's. New connections
#: go to the worker that gets to ``accept`` first, the less busy one, so closing now and
#: then evens the load out. A reconnect costs a local handshake.
REQUESTS_PER_CONNECTION = CONFIG.requests_per_connection


def pre_request(worker: "Worker", req: "Request") -> None:
    if req.req_number >= REQUESTS_PER_CONNECTION:
        req.must_close = True  # gunicorn answers with "Connection: close", then closes


def post_worker_init(worker: "Worker") -> None:
    """Hide what the worker allocated at start-up (the app, its modules, schemas, the
    OpenAPI document: about 85,000 objects) from the garbage collector. Otherwise every
    full collection walks them all, and on a busy machine that held every request of the
    worker for 35-70 ms; these objects live as long as the process anyway.

    And end open event streams and long polls as soon as the worker is told to stop:
    gunicorn would otherwise wait for them (``graceful_timeout``, 30 s) and then cut
    them off. Ended, they reconnect, to a worker that is not stopping."""
    import gc
    import threading
    import time

    from service.api.wsgi import app

    gc.freeze()
    notifier = app.extensions["ddz"].notifier

    def drain_when_stopping() -> None:
        while worker.alive:
            time.sleep(0.5)
        notifier.drain()

    threading.Thread(target=drain_when_stopping, name="ddz-drain", daemon=True).start()


def worker_exit(server: "Arbiter", worker: "Worker") -> None:
    """Close the worker's connections (pool, listener, Redis) before it exits."""
    from service.api.wsgi import app

    app.extensions["ddz"].close()
