"""The JSON the API writes, by orjson (in Rust). The command answer is the hot path: with
the standard library, calling back into Python for every timestamp and id cost a tenth of
a command's CPU."""

from __future__ import annotations

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
