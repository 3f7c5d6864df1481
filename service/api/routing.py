"""How a request reaches a handler, so that none is misread or refused in words that do not
say why: ids in the path are UUIDs, and bodies are JSON sent as JSON.

- :class:`IdConverter` (the ``uuid`` converter) takes any path segment and refuses one that
  is not a UUID with a 404 saying so (``malformed_id``); Werkzeug's converter would not
  match it at all, leaving a 404 that cannot tell "no such match" from "not an id".
- :class:`Blueprint` parses JSON bodies with :class:`JsonBodies`: a body is read only when
  its Content-Type is ``application/json`` (the only media type the contract names), and
  any other body is a 415. webargs would ignore it instead, and an optional body ignored
  is a request answered with its defaults: ``curl -d '{"unit": "5.00"}'`` (sent as a form)
  created a match at the default stake.
"""

from __future__ import annotations

import uuid

from flask_smorest import Blueprint as SmorestBlueprint
from webargs import core
from webargs.flaskparser import FlaskParser
from werkzeug.exceptions import NotFound
from werkzeug.routing import Rule as WerkzeugRule
from werkzeug.routing import UUIDConverter

from .problems import ApiError

JSON = "application/json"


class MalformedId(NotFound):
    """A path segment where an id belongs that is not a UUID (its description is the detail)."""

    problem_code = "malformed_id"


class IdConverter(UUIDConverter):
    regex = "[^/]+"
    #: The path variable (``match_id``), set by :class:`Rule`, for the 404's detail.
    variable = "id"

    def to_python(self, value: str) -> uuid.UUID:
        try:
            return uuid.UUID(value)
        except ValueError:
            # Not a ValidationError (which means "try the next rule"): routing stops here and
            # Flask answers the exception.
            raise MalformedId(
                f"the {self.variable.replace('_', ' ')} in the path is not a UUID"
            ) from None


class Rule(WerkzeugRule):
    """Tells each :class:`IdConverter` the name of the variable it converts."""

    def get_converter(self, variable_name, converter_name, args, kwargs):
        converter = super().get_converter(variable_name, converter_name, args, kwargs)
        if isinstance(converter, IdConverter):
            converter.variable = variable_name
        return converter


class JsonBodies(FlaskParser):
    def _raw_load_json(self, req):
        # A body sent without a length (chunked) is known to be empty only once read.
        if not req.content_length and not req.get_data(cache=True):
            return core.missing
        # Only application/json: a +json type (merge-patch+json, problem+json ...) names a
        # format with meanings of its own, which a command is not; and JSON is UTF-8.
        if req.mimetype != JSON or req.mimetype_params.get("charset", "utf-8").lower() != "utf-8":
            raise ApiError(
                415,
                "unsupported_media_type",
                f"the body must be JSON in UTF-8, sent with Content-Type: {JSON}"
                f" (it came as {req.content_type or 'no type'})",
            )
        return core.parse_json(req.get_data(cache=True))


class Blueprint(SmorestBlueprint):
    ARGUMENTS_PARSER = JsonBodies()
