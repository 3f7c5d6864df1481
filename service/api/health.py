"""Liveness and readiness."""

from __future__ import annotations

from ..app.work import worker_alive
from ..store import retried
from . import schemas
from .problems import ApiError
from .routing import Blueprint
from .services import services

bp = Blueprint("health", __name__, url_prefix="", description="Liveness and readiness")


@bp.route("/healthz", methods=["GET"])
@bp.response(200, schemas.Health)
def healthz():
    """The process is up."""
    return {"status": "ok"}


@bp.route("/readyz", methods=["GET"])
@bp.response(200, schemas.Health)
@bp.doc(
    summary="Ready: PostgreSQL and Redis answer, and a worker lives",
    description="A worker lives when one has told Redis so within `DDZ_WORKER_GRACE_SECONDS` "
    "(30 s; an idle worker does every 15 s): without one, bot turns, turn timers and settlement "
    "would not happen. Otherwise 503, its `checks` saying which of `database`, `redis` and "
    "`worker` failed.",
    responses={"503": {"$ref": "#/components/responses/SERVICE_UNAVAILABLE"}},
)
def readyz():
    grace = services().config.worker_grace_seconds
    checks = {}
    try:
        retried(services().pool, lambda conn: conn.execute("SELECT 1"), timeout=5)
        checks["database"] = "ok"
    except Exception:  # noqa: BLE001 - any failure means not ready
        checks["database"] = "unreachable"
    try:
        services().redis.ping()
        checks["redis"] = "ok"
        checks["worker"] = (
            "ok"
            if worker_alive(services().redis, grace)
            else f"no worker alive in the last {grace:g} s"
        )
    except Exception:  # noqa: BLE001
        checks["redis"] = "unreachable"
        checks["worker"] = "unknown (Redis is unreachable)"
    failed = [name for name, state in checks.items() if state != "ok"]
    if failed:
        raise ApiError(
            503,
            "not_ready",
            f"not ready: {', '.join(failed)}",
            headers={"Retry-After": "5"},
            members={"checks": checks},
        )
    return {"status": "ok", "checks": checks}
