"""What runs the service sees of the API: each request timed (by route template and
status) and logged as one JSON line with its request id, and ``/metrics`` in the
Prometheus format (docs/operations.md).

A request id comes from the client's ``X-Request-ID`` when it is a sane one (up to 128
letters, digits and ``._-``), or is made here; either way the response carries it back,
and every log line written while serving the request names it."""

from __future__ import annotations

import logging
import os
import re
import time

from flask import Flask, Response, g, request

from ..app import work
from ..app.logs import CONTEXT
from ..app.metrics import REQUEST_SECONDS, Sampled, exposition
from ..store import ledger
from .routing import Blueprint
from .services import services

log = logging.getLogger("ddz.access")
HEADER = "X-Request-ID"
_SANE = re.compile(r"[A-Za-z0-9._-]{1,128}")
#: The methods a metric names; any other is "other", as a path no route matches is
#: "unmatched": a client must not add series (each one kept for good) at will.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

bp = Blueprint("metrics", __name__, description="Metrics for Prometheus")


def _sample():
    """The gauges read at each scrape: the queue, the workers, the settlement lag, and the
    ledger's stored verdicts (kept current by each settlement and the full check)."""
    ctx = services()
    for state, count in work.depths(ctx.redis).items():
        yield "ddz_queue_jobs", "Jobs of the work queue, by state", {"state": state}, count
    alive = work.workers_alive(ctx.redis)
    yield "ddz_workers_alive", "Workers that told Redis they live, lately", {}, len(alive)
    count, oldest = ctx.store.unsettled()
    yield "ddz_unsettled_hands", "Ended hands not yet settled", {}, count
    yield (
        "ddz_unsettled_oldest_seconds",
        "How long the oldest ended hand has waited for its settlement",
        {},
        oldest,
    )
    found = ledger.verdicts(ctx.pool)
    problems = found["failing"] + len(
        found["last_check"]["problems"] if found["last_check"] else []
    )
    yield (
        "ddz_ledger_check_ok",
        "The ledger check's verdict: 1 when every checked hand adds up, 0 when one does not",
        {},
        0 if problems else 1,
    )
    yield (
        "ddz_ledger_check_problems",
        "Settled hands (and the ledger's total) failing the check",
        {},
        problems,
    )
    yield (
        "ddz_ledger_unchecked_hands",
        "Settled hands without a stored verdict (settled before verdicts were kept)",
        {},
        found["settled"] - found["checked"],
    )


SAMPLED = Sampled(_sample)


@bp.route("/metrics", methods=["GET"])
@bp.doc(
    summary="Metrics in the Prometheus text format",
    description="Every API and worker process's counters and histograms added up (requests by "
    "route and status, commands by action and outcome, version conflicts, append, job and "
    "settlement latency, open streams, the ledger check's verdict), and gauges read at the "
    "scrape (queue depths, workers alive, unsettled hands). Unauthenticated, as Prometheus "
    "scrapes: serve it on a private network only (docs/operations.md).",
    responses={
        "200": {
            "description": "The metrics",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def metrics():
    body, content_type = exposition(SAMPLED)
    return Response(body, mimetype=content_type.split(";")[0], content_type=content_type)


# Both hooks run on every request: each looks up ``request`` and ``g`` once (a context
# proxy lookup per attribute was a fifth of their cost).
def _started() -> None:
    given = request.headers.get(HEADER, "")
    request_id = given if _SANE.fullmatch(given) else os.urandom(16).hex()
    state = g._get_current_object()
    state.request_id = request_id
    # Not reset at the end: the next request served on this thread or greenlet sets it.
    CONTEXT.set({"request_id": request_id})
    state.started = time.perf_counter()


def _finished(response: Response) -> Response:
    state = g._get_current_object()
    request_id = state.get("request_id")
    if request_id is None:  # a request refused before it reached the app's hooks
        return response
    response.headers[HEADER] = request_id
    seconds = time.perf_counter() - state.started
    served = request._get_current_object()  # type: ignore[attr-defined]
    rule = served.url_rule
    route = rule.rule if rule is not None else "unmatched"
    method = served.method if served.method in METHODS else "other"
    status = response.status_code
    REQUEST_SECONDS.labels(method, route, str(status)).observe(seconds)
    log.info(
        "%s %s %s",
        served.method,
        route,
        status,
        extra={"path": served.path, "status": status, "ms": round(seconds * 1000, 2)},
    )
    return response


def install(app: Flask) -> None:
    # First of the before-request hooks, so that a refusal by a later one (a rate limit)
    # is timed and logged with its id too.
    app.before_request_funcs.setdefault(None, []).insert(0, _started)
    app.after_request(_finished)
