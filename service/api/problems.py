"""Errors as RFC 9457 problem details (``application/problem+json``), each with the stable
machine-readable ``code`` the decider or the API gives it."""

from __future__ import annotations

import http
import logging

import marshmallow as ma
from flask import Response, json
from flask_smorest import Api as SmorestApi
from flask_smorest.utils import prepare_response
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"


class ProblemSchema(ma.Schema):
    type = ma.fields.String(metadata={"description": "A URI naming the kind of problem"})
    title = ma.fields.String(metadata={"description": "The HTTP status phrase"})
    status = ma.fields.Integer(metadata={"description": "The HTTP status code"})
    detail = ma.fields.String(metadata={"description": "What went wrong, for people"})
    code = ma.fields.String(metadata={"description": "What went wrong, for programs (stable)"})
    errors = ma.fields.Dict(metadata={"description": "Field by field, for invalid requests"})


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
    response = Response(json.dumps(body), status=status, mimetype=PROBLEM_JSON)
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


class Api(SmorestApi):
    """flask-smorest's Api, answering every error as a problem and documenting it so."""

    ERROR_SCHEMA = ProblemSchema

    def _register_error_handlers(self):
        self._app.register_error_handler(HTTPException, self.handle_http_exception)
        self._app.register_error_handler(ApiError, lambda e: problem(e.status, e.code, e.detail, headers=e.headers))
        self._app.register_error_handler(Exception, self._handle_unexpected)

    def handle_http_exception(self, error: HTTPException):
        data = getattr(error, "data", None) or {}
        errors = data.get("errors") or data.get("messages")
        status = error.code or 500
        code = _HTTP_CODES.get(status, "error")
        detail = data.get("message") or error.description or http.HTTPStatus(status).phrase
        if errors:
            detail = "the request does not match the schema; see errors"
        return problem(status, code, detail, errors=errors, headers=data.get("headers"))

    @staticmethod
    def _handle_unexpected(error: Exception):
        if isinstance(error, HTTPException):  # pragma: no cover - routed above
            raise error
        log.exception("unexpected error")
        return problem(500, "internal_error", "the server failed; the request may not have been applied")

    def _register_responses(self):
        for status in http.HTTPStatus:
            response = {"description": status.phrase}
            if status >= 400:
                response["schema"] = self.ERROR_SCHEMA
            prepare_response(response, self.spec, PROBLEM_JSON)
            self.spec.components.response(status.name, response, lazy=True)
        response = {"description": "An error, as a problem", "schema": self.ERROR_SCHEMA}
        prepare_response(response, self.spec, PROBLEM_JSON)
        self.spec.components.response("DEFAULT_ERROR", response, lazy=True)
