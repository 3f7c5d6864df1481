"""Errors as RFC 9457 problem details (``application/problem+json``), each with the stable
machine-readable ``code`` the decider or the API gives it."""

from __future__ import annotations

import http
import logging

import marshmallow as ma
from apispec import BasePlugin
from flask import Response
from flask_smorest import Api as SmorestApi
from flask_smorest.utils import prepare_response
from werkzeug.exceptions import HTTPException

from . import encoding

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"


class ProblemSchema(ma.Schema):
    """What :func:`problem` answers: every member but ``errors`` is always there."""

    type = ma.fields.String(required=True, metadata={"description": "A URI naming the kind of problem"})
    title = ma.fields.String(required=True, metadata={"description": "The HTTP status phrase"})
    status = ma.fields.Integer(required=True, metadata={"description": "The HTTP status code"})
    detail = ma.fields.String(required=True, metadata={"description": "What went wrong, for people"})
    code = ma.fields.String(required=True, metadata={"description": "What went wrong, for programs (stable)"})
    errors = ma.fields.Dict(
        metadata={"description": "Where the request does not match its schema: by location (json, query, headers), then field"}
    )


class ApiError(Exception):
    """An error the API answers with a problem body."""

    def __init__(self, status: int, code: str, detail: str, headers: dict | None = None):
        super().__init__(detail)
        self.status, self.code, self.detail, self.headers = status, code, detail, headers or {}


def problem(status: int, code: str, detail: str, errors: dict | None = None, headers: dict | None = None) -> Response:
    body = {
        "type": f"https://ddz.example/problems/{code}",
        "title": http.HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = errors
    response = Response(encoding.dumps(body), status=status, mimetype=PROBLEM_JSON)
    response.headers.update(headers or {})
    return response


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
    400: "The body is not JSON, or a header is malformed",
    401: "No bearer token, or one that belongs to no one",
    403: "The token may not do this (a player's or the operator's is needed, or a seat at the match)",
    404: "No such resource (or a path parameter that is not a UUID)",
    409: "The match is not at `expected_version`, or someone else acted first",
    413: "The body is larger than the server accepts",
    422: "The request does not match its schema (see `errors`), or the rules refuse it (see `code`)",
    429: "Too many requests from this token or address (`rate_limited`; `detail` says which limit); retry after `Retry-After` seconds",
    500: "The server failed; the request may not have been applied",
    503: "PostgreSQL or Redis does not answer",
}
#: Headers that come with some error responses.
ERROR_HEADERS = {
    401: {
        "WWW-Authenticate": {
            "description": "The challenge: `Bearer realm=\"ddz\"`",
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
    parameter does not match its converter (no route); 400, 413 and 422 for a body that is
    not JSON, too large or invalid; 401 where a token is required; 429 on the rate-limited
    ones (those under ``/v1/``). flask-smorest adds 422
    for invalid parameters; the handlers' own errors come from their ``@bp.doc``.

    Responses are then referred to by name, so that only the ones used are in
    ``components/responses``, and listed in status order."""

    def operation_helper(self, path=None, operations=None, **kwargs):
        for operation in (operations or {}).values():
            responses = operation.setdefault("responses", {})
            statuses = {500}
            if "{" in (path or ""):
                statuses.add(404)
            if "requestBody" in operation:
                statuses |= {400, 413, 422}
            if operation.get("security"):
                statuses.add(401)
            if (path or "").startswith("/v1/"):
                statuses.add(429)
            for status in statuses:
                responses.setdefault(str(status), http.HTTPStatus(status).name)
            for status, response in responses.items():
                if isinstance(response, dict) and set(response) == {"$ref"} and response["$ref"].startswith(_RESPONSE_REF):
                    responses[status] = response["$ref"][len(_RESPONSE_REF):]
            operation["responses"] = dict(sorted(responses.items(), key=lambda item: str(item[0])))


class Api(SmorestApi):
    """flask-smorest's Api, answering every error as a problem and documenting it so."""

    ERROR_SCHEMA = ProblemSchema

    def _register_error_handlers(self):
        self._app.register_error_handler(HTTPException, self.handle_http_exception)
        self._app.register_error_handler(ApiError, lambda e: problem(e.status, e.code, e.detail, headers=e.headers))
        self._app.register_error_handler(RecursionError, self._handle_too_deep)
        self._app.register_error_handler(Exception, self._handle_unexpected)

    #: No ``default`` response: each operation lists the statuses it answers, so that a
    #: status it does not list is a contract violation rather than "some error".
    DEFAULT_ERROR_RESPONSE_NAME = None

    def handle_http_exception(self, error: HTTPException):
        data = getattr(error, "data", None) or {}
        errors = data.get("errors") or data.get("messages")
        status = error.code or 500
        code = _HTTP_CODES.get(status, "error")
        detail = data.get("message") or error.description or http.HTTPStatus(status).phrase
        if errors:
            detail = "the request does not match the schema; see errors"
        # The exception's own headers (``Allow`` of a 405, as RFC 9110 requires), but not its
        # HTML content type.
        headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
        headers.update(data.get("headers") or {})
        return problem(status, code, detail, errors=errors, headers=headers)

    @staticmethod
    def _handle_too_deep(error: RecursionError):
        # Python's JSON parser recurses per nesting level; the parsers above it only
        # catch decode errors, so a body nested thousands deep arrives here.
        return problem(400, "invalid_json", "the JSON body is nested too deeply")

    @staticmethod
    def _handle_unexpected(error: Exception):
        if isinstance(error, HTTPException):  # pragma: no cover - routed above
            raise error
        log.exception("unexpected error")
        return problem(500, "internal_error", "the server failed; the request may not have been applied")

    def _init_spec(self, *, extra_plugins=None, **options):
        super()._init_spec(extra_plugins=[*(extra_plugins or ()), ErrorResponses()], **options)

    def _register_responses(self):
        for status in http.HTTPStatus:
            response = {"description": ERROR_DESCRIPTIONS.get(status, status.phrase)}
            if status >= 400:
                response["schema"] = self.ERROR_SCHEMA
            prepare_response(response, self.spec, PROBLEM_JSON)
            if status in ERROR_HEADERS:
                response["headers"] = ERROR_HEADERS[status]
            self.spec.components.response(status.name, response, lazy=True)

    def _register_pagination_header(self):
        """No pagination here, so no ``PaginationMetadata`` schema in the document."""
