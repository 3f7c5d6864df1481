"""``Idempotency-Key`` on the requests that create (a match, a table, a seat at a table, a
lobby ticket): a retry of the same request by the same player gets the first answer again,
byte for byte, and creates nothing; the same key with another request is refused (422
``idempotency_key_reused``), and while the first request is under way, or when its outcome
is unknown, 409 ``idempotency_key_in_use`` (see service/store/creations.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import marshmallow as ma
from flask import Response, request

from ..store import DatabaseUnavailable, StoreError, request_hash
from ..store.creations import Answer, CreationKey
from . import encoding
from .auth import player
from .documents import game_error
from .problems import ApiError
from .services import services


def created(operation: str, key: str | None, schema: ma.Schema, create: Callable[[], Any]) -> Any:
    """What ``create()`` makes (201, as ``schema`` dumps it). With a ``key``, once per
    player, ``operation`` (the method and path) and key."""
    if key is None:
        return create()
    # The body as the client sent it (parsed, it holds decimals, which JSON does not hash).
    creation = CreationKey(
        player().player_id, operation, key, request_hash(request.get_json(silent=True))
    )
    keys = services().creation_keys
    try:
        answer = keys.reserve(creation)
    except StoreError as exc:
        raise game_error(exc) from None
    if answer is None:
        try:
            made = create()
        except ApiError:
            keys.release(creation)  # refused: nothing was created
            raise
        except DatabaseUnavailable:
            raise  # created or not, nobody knows: the key stays reserved
        answer = Answer(201, encoding.dumps(schema.dump(made)))
        keys.answer(creation, answer)
    return Response(answer.body, status=answer.status, mimetype="application/json")
