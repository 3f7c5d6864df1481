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
- A body must be I-JSON (RFC 7493), read by :func:`.encoding.parse_json` (its rules
  there). Each refusal is 400 ``invalid_json``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import marshmallow as ma
from flask_smorest import Blueprint as SmorestBlueprint
from marshmallow.utils import set_value
from marshmallow_oneofschema.one_of_schema import OneOfSchema
from webargs import core
from webargs.flaskparser import FlaskParser
from werkzeug.exceptions import NotFound
from werkzeug.routing import Rule as WerkzeugRule
from werkzeug.routing import UUIDConverter

from .encoding import NotIJson, parse_json
from .problems import ApiError

JSON = "application/json"


class MalformedId(NotFound):
    """A path segment where an id belongs that is not a UUID (its description is the detail)."""

    problem_code = "malformed_id"


#: A UUID as the contract writes one (``format: uuid``): Python's own reading also takes
#: braces, a ``urn:uuid:`` prefix, underscores and other scripts' digits.
UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I | re.A)


class IdConverter(UUIDConverter):
    regex = "[^/]+"
    #: The path variable (``match_id``), set by :class:`Rule`, for the 404's detail.
    variable = "id"

    def to_python(self, value: str) -> uuid.UUID:
        if UUID_TEXT.fullmatch(value) is None:
            # Not a ValidationError (which means "try the next rule"): routing stops here and
            # Flask answers the exception.
            raise MalformedId(f"the {self.variable.replace('_', ' ')} in the path is not a UUID")
        return uuid.UUID(value)


class Rule(WerkzeugRule):
    """Tells each :class:`IdConverter` the name of the variable it converts."""

    def get_converter(self, variable_name, converter_name, args, kwargs):
        converter = super().get_converter(variable_name, converter_name, args, kwargs)
        if isinstance(converter, IdConverter):
            converter.variable = variable_name
        return converter


class JsonBodies(FlaskParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Each schema's compiled loader (None: marshmallow loads it alone).
        self._compiled: dict[ma.Schema, Loader | None] = {}

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
        try:
            return parse_json(req.get_data(cache=True))
        except NotIJson as exc:
            raise ApiError(
                400, "invalid_json", f"the body is not I-JSON (RFC 7493): {exc}"
            ) from None

    def _process_location_data(self, location_data, schema, req, location, unknown, validators):
        # Valid data is loaded by the schema's compiled loader; what it does not take (an
        # error, or data of a shape it was not made for) by marshmallow, as before:
        # marshmallow's machinery around the fields was half of what parsing a command cost.
        if location_data is not core.missing and not validators:
            if schema not in self._compiled:
                self._compiled[schema] = compiled(schema)
            load = self._compiled[schema]
            if load is not None:
                if unknown == core._UNKNOWN_DEFAULT_PARAM:
                    unknown = (
                        self.unknown
                        if self.unknown != core._UNKNOWN_DEFAULT_PARAM
                        else self.DEFAULT_UNKNOWN_BY_LOCATION.get(location)
                    )
                loaded = load(
                    self.pre_load(location_data, schema=schema, req=req, location=location), unknown
                )
                if loaded is not None:
                    return loaded
        return super()._process_location_data(
            location_data, schema, req, location, unknown, validators
        )


#: A compiled loader: the data loaded (as the schema's ``load`` would), or None where the
#: schema's own ``load`` must decide (an invalid value, or data of a shape not compiled).
Loader = Callable[[Any, str | None], dict[str, Any] | None]


def compiled(schema: ma.Schema) -> Loader | None:
    """A loader for the data ``schema`` accepts that does what its ``load`` does, without
    marshmallow's generic machinery around each field (its error store, partial loading,
    hooks): each field's own ``deserialize`` (its type, ``required``, ``allow_none``, its
    validators and default), then the unknown names as ``unknown`` says. Only for a schema
    with no hooks (``pre_load``, ``validates`` ...), not ``many``, not ``partial``; a
    ``Kinds`` schema (a ``oneOf``) by its kinds'. None when ``schema`` is not of those:
    marshmallow loads it alone. The loader leaves to ``load`` all that is not valid, so
    that errors are marshmallow's, word for word."""
    if isinstance(schema, OneOfSchema):
        return _compiled_kinds(schema)
    if any(schema._hooks.values()) or schema.many or schema.partial:
        return None
    fields = [
        (field.data_key if field.data_key is not None else name, field.attribute or name, field)
        for name, field in schema.load_fields.items()
    ]
    names = frozenset(key for key, _, _ in fields)
    make = schema.dict_class
    default_unknown = schema.unknown

    def load(data: Any, unknown: str | None) -> dict[str, Any] | None:
        if not isinstance(data, Mapping):
            return None
        unknown = default_unknown if unknown is None else unknown
        if unknown != ma.EXCLUDE and not (isinstance(data, dict) and names.issuperset(data)):
            return None  # names the fields do not have: refused or kept, by marshmallow
        loaded = make()
        try:
            for key, attribute, field in fields:
                value = field.deserialize(data.get(key, core.missing), key, data)
                if value is not core.missing:
                    set_value(loaded, attribute, value)
        except ma.ValidationError:
            return None
        return loaded

    return load


def _compiled_kinds(schema: OneOfSchema) -> Loader | None:
    """A ``Kinds`` schema's loader: its kinds' compiled loaders, by the kind's name."""
    if schema.many or schema.partial or getattr(schema, "type_field_remove", True):
        return None
    kinds = {}
    for name, kind in schema.type_schemas.items():
        loader = compiled(kind) if isinstance(kind, ma.Schema) else None
        if loader is None:
            return None
        kinds[name] = loader
    key, default_unknown = schema.type_field, schema.unknown

    def load(data: Any, unknown: str | None) -> dict[str, Any] | None:
        if not isinstance(data, dict):
            return None
        name = data.get(key)
        kind = kinds.get(name) if isinstance(name, str) else None
        # OneOfSchema loads a kind with its own ``unknown`` when none is given.
        return None if kind is None else kind(data, unknown or default_unknown)

    return load


class Blueprint(SmorestBlueprint):
    ARGUMENTS_PARSER = JsonBodies()
