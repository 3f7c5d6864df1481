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
import secrets
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING

from service.config import COMMAND_CONNECTIONS, Config

# For the hooks' annotations only (quoted: nothing more is imported before gevent patches).
if TYPE_CHECKING:
    from gunicorn.arbiter import Arbiter
    from gunicorn.http.message import Request
    from gunicorn.workers.base import Worker

#: One key for the console's session cookies in every worker: a session signed by one
#: must be good in the others.
os.environ.setdefault("DDZ_CONSOLE_SECRET", secrets.token_urlsafe(32))
CONFIG = Config.from_env()

#: Metrics across worker processes (service/app/metrics.py): each process writes its
#: samples to files in this directory, set here in the master before any worker forks so
#: that every worker inherits it. Unless the environment names one (``ddz serve`` does,
#: shared with its RQ worker), a fresh one that goes when the master exits.
_OWN_METRICS_DIR = None
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    _OWN_METRICS_DIR = tempfile.mkdtemp(prefix="ddz-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _OWN_METRICS_DIR

#: gunicorn's own lines (start, stop, a worker's crash) as JSON, as the app's are
#: (service/app/logs.py); the app logs each request itself, with its request id, so
#: gunicorn's access log stays off.
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "root": {"level": "INFO", "handlers": ["json"]},
    "loggers": {
        "gunicorn.error": {"level": "INFO", "propagate": True, "qualname": "gunicorn.error"},
        "gunicorn.access": {"level": "INFO", "propagate": False, "qualname": "gunicorn.access"},
    },
    "handlers": {
        "json": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "stream": "ext://sys.stderr",
        }
    },
    "formatters": {"json": {"()": "service.app.logs.Formatter"}},
}
#: gunicorn's logger, skipping the access lines nobody writes (see the class).
logger_class = "service.gunicorn_worker.QuietAccessLogger"
#: gunicorn's gevent worker, writing the errors gunicorn answers itself (headers too
#: large ...) as problem documents.
worker_class = "service.gunicorn_worker.ProblemWorker"
#: Processes: one per core unless WEB_CONCURRENCY says.
workers = CONFIG.web_concurrency or os.cpu_count() or 2
if CONFIG.worker_connections < CONFIG.max_streams + COMMAND_CONNECTIONS:
    raise SystemExit(
        f"DDZ_WORKER_CONNECTIONS ({CONFIG.worker_connections}) must exceed DDZ_MAX_STREAMS "
        f"({CONFIG.max_streams}) by at least {COMMAND_CONNECTIONS}, the connections kept for "
        "commands"
    )
worker_connections = CONFIG.worker_connections


def _enough_file_descriptors() -> None:
    """A connection is a file descriptor, and the usual soft limit (1,024) is below
    ``worker_connections``: raise it as far as the hard limit allows (the workers inherit
    it)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = worker_connections + 200  # and the database pool, Redis, logs, the listener
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))


_enough_file_descriptors()
timeout = 120
#: Seconds an idle connection stays open for the client's next request (gunicorn's default
#: is 2). People think 2-8 s between plays, so at 2 s the server closed a connection just
#: as its client sent the next command on it: a client may retry a GET then, but not a
#: POST (RFC 9110), and a soak's `leave` got no answer. Longer than the proxy's idle
#: upstream connections (deploy/nginx.conf: 60 s), so that nginx closes them first. An
#: idle connection costs a greenlet and a file descriptor, within ``worker_connections``.
keepalive = 75
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
#: Allocations (net) before the collector looks at the youngest objects (default 700);
#: see post_worker_init.
GC_YOUNGEST_THRESHOLD = 50_000


def pre_request(worker: "Worker", req: "Request") -> None:
    if req.req_number >= REQUESTS_PER_CONNECTION:
        req.must_close = True  # gunicorn answers with "Connection: close", then closes


def post_worker_init(worker: "Worker") -> None:
    """Hide what the worker allocated at start-up (the app, its modules, schemas, the
    OpenAPI document: about 85,000 objects) from the garbage collector. Otherwise every
    full collection walks them all, and on a busy machine that held every request of the
    worker for 35-70 ms; these objects live as long as the process anyway. And collect
    the youngest generation after 50,000 allocations rather than 700: 5,000 open streams
    are about a million objects, and each full collection over them (which the default
    thresholds brought about every few seconds under load) held the whole process for
    300-400 ms, the slowest deliveries and commands of the stream benchmark.

    And end open event streams and long polls, and close idle kept-alive connections, as
    soon as the worker is told to stop: gunicorn would otherwise wait for them
    (``graceful_timeout``, 30 s) and then cut them off. Ended, they reconnect, to a
    worker that is not stopping."""
    import gc
    import threading
    import time

    from service import census
    from service.api.wsgi import app
    from service.gunicorn_worker import ProblemWorker

    gc.freeze()
    gc.set_threshold(GC_YOUNGEST_THRESHOLD, *gc.get_threshold()[1:])
    census.start_if_asked("api")
    notifier = app.extensions["ddz"].notifier

    def drain_when_stopping() -> None:
        while worker.alive:
            time.sleep(0.5)
        notifier.drain()
        if isinstance(worker, ProblemWorker):
            worker.close_idle()

    threading.Thread(target=drain_when_stopping, name="ddz-drain", daemon=True).start()


def child_exit(server: "Arbiter", worker: "Worker") -> None:
    """A worker's live gauges (its open streams) leave the sums with it."""
    from service.app.metrics import process_exited

    process_exited(int(worker.pid))


def on_exit(server: "Arbiter") -> None:
    if _OWN_METRICS_DIR:
        shutil.rmtree(_OWN_METRICS_DIR, ignore_errors=True)


def worker_exit(server: "Arbiter", worker: "Worker") -> None:
    """Close the worker's connections (pool, listener, Redis), its last appends announced,
    and end the process there, with the status gunicorn was exiting with. gunicorn starts
    a stopped worker's replacement only once the process is gone, and meanwhile its
    streams' clients all reconnect to the workers left: the listener's thread took up to a
    second to notice the stop, and the interpreter's teardown of a busy worker's objects
    more than another (docs/scaling.md, "A restart's seconds, measured again")."""
    import logging

    from service.api.wsgi import app

    app.extensions["ddz"].close(wait=False)
    exiting = sys.exc_info()[1]  # gunicorn calls this as its SystemExit goes by
    code = exiting.code if isinstance(exiting, SystemExit) else 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code % 256 if isinstance(code, int) else 0 if code is None else 1)
