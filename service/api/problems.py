"""Errors as RFC 9457 problem details (``application/problem+json``), each with the stable
machine-readable ``code`` the decider or the API gives it."""

from __future__ import annotations

import http
import logging
from typing import Any

import marshmallow as ma
from apispec import BasePlugin
from apispec_oneofschema import MarshmallowPlugin as OneOfPlugin
from flask import Response, current_app, has_request_context, request
from flask_smorest import Api as SmorestApi
from flask_smorest.utils import prepare_response
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from ..store import DatabaseUnavailable
from . import encoding

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"


class ProblemSchema(ma.Schema):
    """What :func:`problem` answers: every member but ``errors`` is always there."""

    type = ma.fields.String(
        required=True,
        metadata={
            "description": "The address of the page describing `code`, served by this service: `/docs/problems#<code>`"
        },
    )
    title = ma.fields.String(required=True, metadata={"description": "The HTTP status phrase"})
    status = ma.fields.Integer(required=True, metadata={"description": "The HTTP status code"})
    detail = ma.fields.String(
        required=True, metadata={"description": "What went wrong, for people"}
    )
    code = ma.fields.String(
        required=True, metadata={"description": "What went wrong, for programs (stable)"}
    )
    errors = ma.fields.Dict(
        metadata={
            "description": "Where the request does not match its schema: by location (json, query, headers), then field"
        }
    )
    checks = ma.fields.Dict(
        keys=ma.fields.String(),
        values=ma.fields.String(),
        metadata={
            "description": "From /readyz: what was checked (database, redis, worker), each `ok` or what failed"
        },
    )
    ticket_id = ma.fields.String(
        metadata={"description": "With `ticket_waiting`: the player's ticket that waits"}
    )
    table_id = ma.fields.String(
        metadata={"description": "With `seated_elsewhere`: a table where the player sits"}
    )
    check_id = ma.fields.Integer(
        metadata={"description": "With `ledger_check_running`: the full check that runs"}
    )


class ApiError(Exception):
    """An error the API answers with a problem body."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        headers: dict | None = None,
        members: dict | None = None,
    ):
        super().__init__(detail)
        self.status, self.code, self.detail, self.headers = status, code, detail, headers or {}
        #: More members of the problem (RFC 9457 extension members), such as ``checks``.
        self.members = members or {}


#: Where the service describes every problem code (service/web/problem_docs.py).
PROBLEMS_PATH = "/docs/problems"


def document(
    status: int,
    code: str,
    detail: str,
    errors: dict | None = None,
    members: dict | None = None,
    base: str | None = None,
) -> bytes:
    """The problem document, as JSON (also what the gunicorn worker writes). Its ``type``
    is the code's entry on this service's page of problems: on ``base`` (scheme and
    host), by default the current request's; outside a request, a reference relative to
    the service."""
    if base is None:
        base = request.host_url.rstrip("/") if has_request_context() else ""
    body = {
        "type": f"{base}{PROBLEMS_PATH}#{code}",
        "title": http.HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = errors
    body.update(members or {})
    return encoding.dumps(body)


def problem(
    status: int,
    code: str,
    detail: str,
    errors: dict | None = None,
    headers: dict | None = None,
    members: dict | None = None,
    base: str | None = None,
) -> Response:
    response = Response(
        document(status, code, detail, errors, members, base),
        status=status,
        mimetype=PROBLEM_JSON,
    )
    response.headers.update(headers or {})
    return response


def too_large(limit: int) -> str:
    return f"the request body is over {limit} bytes"


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
}

#: What each error status means in this API, for its entry in ``components/responses``
#: (named after the status: ``UNAUTHORIZED``, ...).
ERROR_DESCRIPTIONS = {
    400: "The body is not valid JSON, is nested too deeply, or is not"
    f" {encoding.I_JSON_RULES} (`invalid_json`); or a header is malformed (`bad_request`)",
    401: "No bearer token, or one that belongs to no one",
    403: "The token may not do this (a player's, an operator's or an admin's is needed, or a seat at the match)",
    404: "No such resource (`malformed_id`: a path parameter that is not a UUID)",
    408: "The body did not arrive within `DDZ_BODY_SECONDS` of the request's headers (`body_timeout`); the connection is closed",
    409: "The match is not at `expected_version`, or someone else acted first (or, for the ledger's full check, one is running: `ledger_check_running`)",
    413: "The body is larger than the server accepts (`DDZ_MAX_BODY_BYTES`)",
    415: "The body is not sent as `Content-Type: application/json` (a `+json` type, or a charset other than UTF-8, is refused too)",
    422: "The request does not match its schema (see `errors`), or the rules refuse it (see `code`)",
    429: "Too many requests from this token or address (`rate_limited`; `detail` says which limit), or as many event streams and long polls open as it may hold (`open_stream_limit`); retry after `Retry-After` seconds",
    500: "The server failed; the request may not have been applied",
    503: "PostgreSQL or Redis does not answer (`database_unavailable`: after retries on fresh connections; from /readyz, also: no worker lives, see `checks`), or this server holds as many event streams and long polls as it may (`too_many_streams`)",
}
#: Headers that come with some error responses.
ERROR_HEADERS = {
    503: {
        "Retry-After": {
            "description": "Seconds to wait before trying again",
            "schema": {"type": "string"},
        }
    },
    401: {
        "WWW-Authenticate": {
            "description": 'The challenge: `Bearer realm="ddz"`',
            "schema": {"type": "string"},
        }
    },
    429: {
        "Retry-After": {
            "description": "Seconds until the limit lets requests through again",
            "schema": {"type": "integer", "minimum": 1},
        }
    },
}
_RESPONSE_REF = "#/components/responses/"


class ErrorResponses(BasePlugin):
    """Documents, on every operation, the errors that the stack answers for any operation
    like it, whatever its handler does: 500 when the server fails; 404 when a path
    parameter is not a UUID; 400, 413, 415 and 422 for a body that is not JSON, too large,
    not sent as JSON or invalid, and 408 for one that does not arrive in time; 401 where
    a token is required; 429 on the rate-limited
    ones (those under ``/v1/``). flask-smorest adds 422
    for invalid parameters; the handlers' own errors come from their ``@bp.doc``.

    503 where the database is used (every operation with a token or a body).

    Responses are then referred to by name, so that only the ones used are in
    ``components/responses``, and listed in status order."""

    def operation_helper(self, path=None, operations=None, **kwargs):
        for operation in (operations or {}).values():
            responses = operation.setdefault("responses", {})
            statuses = {500}
            if operation.get("security") or "requestBody" in operation:
                # Every operation but the liveness check uses the database.
                statuses.add(503)
            if "{" in (path or ""):
                statuses.add(404)
            if "requestBody" in operation:
                statuses |= {400, 408, 413, 415, 422}
            if operation.get("security"):
                statuses.add(401)
            if (path or "").startswith("/v1/"):
                statuses.add(429)
            for status in statuses:
                responses.setdefault(str(status), http.HTTPStatus(status).name)
            for status, response in responses.items():
                if (
                    isinstance(response, dict)
                    and set(response) == {"$ref"}
                    and response["$ref"].startswith(_RESPONSE_REF)
                ):
                    responses[status] = response["$ref"][len(_RESPONSE_REF) :]
            operation["responses"] = dict(sorted(responses.items(), key=lambda item: str(item[0])))


class Api(SmorestApi):
    """flask-smorest's Api, answering every error as a problem and documenting it so; a
    document of several kinds (``schemas.Kinds``) documented as ``oneOf`` its kinds."""

    ERROR_SCHEMA = ProblemSchema

    def __init__(self, app=None, **kwargs):
        kwargs.setdefault("spec_kwargs", {"marshmallow_plugin": OneOfPlugin()})
        super().__init__(app, **kwargs)

    def _register_error_handlers(self):
        self._app.register_error_handler(HTTPException, self.handle_http_exception)
        self._app.register_error_handler(
            ApiError,
            lambda e: problem(e.status, e.code, e.detail, headers=e.headers, members=e.members),
        )
        self._app.register_error_handler(RecursionError, self._handle_too_deep)
        self._app.register_error_handler(DatabaseUnavailable, self._handle_database_unavailable)
        self._app.register_error_handler(Exception, self._handle_unexpected)

    #: No ``default`` response: each operation lists the statuses it answers, so that a
    #: status it does not list is a contract violation rather than "some error".
    DEFAULT_ERROR_RESPONSE_NAME = None

    def handle_http_exception(self, error: HTTPException):
        data = getattr(error, "data", None) or {}
        errors = data.get("errors") or data.get("messages")
        status = error.code or 500
        unreadable = getattr(error, "exc", None)
        if isinstance(unreadable, ValueError):
            # webargs' answer to a body that is not JSON (or not UTF-8), which would say
            # "does not match the schema": the parser's own words say where it went wrong.
            return problem(400, "invalid_json", f"the body is not valid JSON: {unreadable}")
        code = getattr(error, "problem_code", None) or _HTTP_CODES.get(status, "error")
        detail = data.get("message") or self._detail(error, status, code)
        if errors:
            detail = "the request does not match the schema; see errors"
        # The exception's own headers (``Allow`` of a 405, as RFC 9110 requires), but not its
        # HTML content type.
        headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
        headers.update(data.get("headers") or {})
        return problem(status, code, detail, errors=errors, headers=headers)

    @staticmethod
    def _detail(error: HTTPException, status: int, code: str) -> str:
        """Ours, not Werkzeug's prose ("If you entered the URL manually ...")."""
        if hasattr(error, "problem_code"):
            assert error.description is not None  # an ApiError always says what went wrong
            return error.description
        if status == 404:
            return "nothing is served at this path"
        if isinstance(error, MethodNotAllowed):
            return f"this path does not take {request.method}; it takes {', '.join(sorted(error.valid_methods or ()))}"
        if status == 413:
            return too_large(current_app.config["MAX_CONTENT_LENGTH"])
        return http.HTTPStatus(status).phrase

    @staticmethod
    def _handle_too_deep(error: RecursionError):
        # Python's JSON parser recurses per nesting level; the parsers above it only
        # catch decode errors, so a body nested thousands deep arrives here.
        return problem(400, "invalid_json", "the JSON body is nested too deeply")

    @staticmethod
    def _handle_database_unavailable(error: DatabaseUnavailable):
        # Said only after the retries on fresh connections: PostgreSQL is away, or no
        # connection came in time. A command may then not know whether it committed; sent
        # again with the same Idempotency-Key, it is applied at most once.
        log.warning("database unavailable: %s", error)
        detail = "the database does not answer; try again shortly (a command with the same Idempotency-Key applies once)"
        return problem(503, "database_unavailable", detail, headers={"Retry-After": "1"})

    @staticmethod
    def _handle_unexpected(error: Exception):
        if isinstance(error, HTTPException):  # pragma: no cover - routed above
            raise error
        log.exception("unexpected error")
        return problem(
            500, "internal_error", "the server failed; the request may not have been applied"
        )

    def _init_spec(self, *, extra_plugins=None, **options):
        super()._init_spec(extra_plugins=[*(extra_plugins or ()), ErrorResponses()], **options)

    def _register_responses(self):
        for status in http.HTTPStatus:
            response: dict[str, Any] = {
                "description": ERROR_DESCRIPTIONS.get(status, status.phrase)
            }
            if status >= 400:
                response["schema"] = self.ERROR_SCHEMA
            prepare_response(response, self.spec, PROBLEM_JSON)
            if status in ERROR_HEADERS:
                response["headers"] = ERROR_HEADERS[status]
            self.spec.components.response(status.name, response, lazy=True)

    def _register_pagination_header(self):
        """No pagination here, so no ``PaginationMetadata`` schema in the document."""
