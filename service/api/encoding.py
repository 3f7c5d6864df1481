"""The JSON the API writes, by orjson (in Rust), and the JSON it reads. The command
answer is the hot path: with the standard library, calling back into Python for every
timestamp and id cost a tenth of a command's CPU.

A body must be I-JSON (RFC 7493), read by :func:`parse_json` (:data:`I_JSON_RULES`, as
the contract's 400 and the page of problems say them): no name twice in an object (a
proxy that keeps the first and a service that keeps the last would read two requests in
one), numbers that an IEEE double holds (no integer past ±(2**53 - 1), as Python's own
limit on long integers made a 500 of a 5,000-digit one), no ``NaN`` or ``Infinity`` (not
JSON at all), and strings that are Unicode text (no unpaired UTF-16 surrogate, which
nothing can store or encode)."""

from __future__ import annotations

import json
import re
from typing import Any, cast

import orjson
from flask import Flask, Response
from flask.json.provider import DefaultJSONProvider


def json_response(document: dict[str, Any]) -> Response:
    """The hot paths' answer: plain JSON of a document already in its schema's shape (the
    contract tests hold it to the schema), which costs a tenth of a schema dump."""
    return Response(dumps(document), status=200, mimetype="application/json")


def dumps(document: Any) -> bytes:
    """Compact UTF-8 JSON; datetimes in ISO 8601 (RFC 3339), UUIDs as strings, and what
    orjson does not know (decimals, say) as Flask would write it."""
    return orjson.dumps(
        document, default=DefaultJSONProvider.default, option=orjson.OPT_NON_STR_KEYS
    )


class JsonProvider(DefaultJSONProvider):
    """Flask's JSON (``jsonify``, and so every flask-smorest answer) written by :func:`dumps`."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return dumps(obj).decode()

    def response(self, *args: Any, **kwargs: Any) -> Response:
        app = cast(Flask, self._app)  # this provider serves a Flask app, not a bare sansio one
        return app.response_class(
            dumps(self._prepare_response_obj(args, kwargs)), mimetype=self.mimetype
        )


#: The largest integer I-JSON allows: an IEEE double holds it exactly.
LARGEST_INTEGER = 2**53 - 1
#: What I-JSON refuses of what JSON allows, as the contract and the page of problems say it.
I_JSON_RULES = (
    "I-JSON (RFC 7493): no name twice in one object, no integer beyond ±(2^53 − 1)"
    f" ({LARGEST_INTEGER}), no number too large for a double (`1e400`), no `NaN` or"
    " `Infinity`, and no string holding an unpaired UTF-16 surrogate (an escape such as"
    " `\\ud800` alone)"
)


class NotIJson(ValueError):
    """A body that JSON reads but I-JSON refuses (see the module's text)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise NotIJson(f"the name {json.dumps(name)} appears twice in one object")
        found[name] = value
    return found


def _integer(text: str) -> int:
    # Its length first: Python refuses to convert over 4,300 digits, and takes time near it.
    if len(text) > 17 or abs(value := int(text)) > LARGEST_INTEGER:
        raise NotIJson(f"the integer {text[:20]}{'…' if len(text) > 20 else ''} is too large")
    return value


def _number(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise NotIJson(f"the number {text[:20]}{'…' if len(text) > 20 else ''} is too large")
    return value


def _constant(name: str) -> Any:
    raise NotIJson(f"{name} is not a JSON number")


#: A ``\u`` escape of a UTF-16 surrogate: only a body with one can hold a string that
#: is not Unicode text (an unpaired surrogate, which nothing can store or encode).
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def parse_json(body: bytes) -> Any:
    """The body's JSON value, when the body is I-JSON: else :class:`NotIJson`, or the
    ``JSONDecodeError`` that webargs answers."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        # As webargs says it of a body it reads itself.
        raise json.JSONDecodeError(
            f"Bytes decoding error : {exc.reason}", doc=repr(exc.object), pos=exc.start
        ) from exc
    value = json.loads(
        text,
        object_pairs_hook=_object,
        parse_int=_integer,
        parse_float=_number,
        parse_constant=_constant,
    )
    if SURROGATE_ESCAPE.search(body):
        _check_strings(value)
    return value


def _check_strings(value: Any) -> None:
    """Raises unless every string in ``value`` (names included) is Unicode text."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise NotIJson("a string holds an unpaired UTF-16 surrogate") from None
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
