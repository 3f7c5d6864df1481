"""Liveness and readiness."""

from __future__ import annotations

from . import schemas
from ..store import retried
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
@bp.doc(responses={"503": {"$ref": "#/components/responses/SERVICE_UNAVAILABLE"}})
def readyz():
    """PostgreSQL and Redis answer."""
    failed = []
    try:
        retried(services().pool, lambda conn: conn.execute("SELECT 1"), timeout=5)
    except Exception:  # noqa: BLE001 - any failure means not ready
        failed.append("database")
    try:
        services().redis.ping()
    except Exception:  # noqa: BLE001
        failed.append("redis")
    if failed:
        raise ApiError(503, "not_ready", f"unreachable: {', '.join(failed)}")
    return {"status": "ok", "checks": {"database": "ok", "redis": "ok"}}
