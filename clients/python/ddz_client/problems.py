"""The API's refusals (RFC 9457 problem documents) as exceptions: ``code`` is the contract,
the class only groups the codes by their HTTP status."""

from __future__ import annotations

from typing import Any

import httpx


class ProblemError(Exception):
    """The service refused a request: ``status`` (HTTP), ``code`` (stable, for programs),
    ``detail`` (for people) and the whole problem document as ``body``.

    An answer that is no problem document (a proxy's error page) gets the code
    ``http_<status>``."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.body = status, code, detail, body


class BadRequest(ProblemError):
    """400: a malformed request (a bad ``Last-Event-ID``, say)."""


class Unauthorized(ProblemError):
    """401: no token, or one the service does not know."""


class Forbidden(ProblemError):
    """403: the token may not do this (``not_seated``, ``watch_table`` ...)."""


class NotFound(ProblemError):
    """404: no such match, table or ticket (or not the caller's)."""


class Conflict(ProblemError):
    """409: the state changed (``version_conflict``, ``table_full``, ``ticket_waiting`` ...)."""


class Unprocessable(ProblemError):
    """422: the request is well formed but refused (an illegal play, ``already_seated`` ...)."""


class RateLimited(ProblemError):
    """429: too many requests; retried by the client before it is raised."""


class Unavailable(ProblemError):
    """503: the service cannot answer now; retried by the client before it is raised."""


FAMILIES: dict[int, type[ProblemError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Unprocessable,
    429: RateLimited,
    503: Unavailable,
}


def problem_of(response: httpx.Response) -> ProblemError:
    """The exception for an error answer (its body read)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("code"), str):
        text = response.text[:200]
        body = {"status": response.status_code, "code": f"http_{response.status_code}"}
        body["detail"] = text or response.reason_phrase
    family = FAMILIES.get(response.status_code, ProblemError)
    return family(response.status_code, body["code"], str(body.get("detail", "")), body)
