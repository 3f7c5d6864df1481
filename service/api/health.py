"""Liveness and readiness."""

from __future__ import annotations

from ..app.work import any_worker_alive
from ..store import ping
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
    description="A worker lives while its heartbeat in Redis does (a worker renews it three times "
    "per `DDZ_WORKER_HEARTBEAT_SECONDS`, 3 s): without one, bot turns, turn timers and settlement "
    "would not happen. Otherwise 503, its `checks` saying which of `database`, `redis` and "
    "`worker` failed.",
    responses={"503": {"$ref": "#/components/responses/SERVICE_UNAVAILABLE"}},
)
def readyz():
    checks = {}
    try:
        ping(services().pool, timeout=5)
        checks["database"] = "ok"
    except Exception:  # noqa: BLE001 - any failure means not ready
        checks["database"] = "unreachable"
    try:
        services().redis.ping()
        checks["redis"] = "ok"
        checks["worker"] = (
            "ok"
            if any_worker_alive(services().redis)
            else "no worker alive: no worker's heartbeat is in Redis"
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
