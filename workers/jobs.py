"""The jobs RQ runs."""

from __future__ import annotations

import logging
import uuid

from service.game import GameError, seat_view
from service.game.bot import BotPolicy
from service.store import MatchNotFound, VersionConflict

from .context import context
from .dispatch import after_append, system_to_act

log = logging.getLogger(__name__)
POLICY = BotPolicy()


def bot_turn(match_id: str, version: int) -> str:
    """Plays the turn of the seat the system plays, if the match is still at ``version``:
    the policy sees only that seat's view, and the command goes through the same path as a
    player's, at the expected version. A conflict means someone acted first: nothing to do."""
    ctx = context()
    key = uuid.UUID(match_id)
    try:
        state = ctx.store.load(key).state
    except MatchNotFound:
        return "no such match"
    if state.version != version or not system_to_act(state):
        return "stale"
    command = POLICY.act(seat_view(state, state.turn))
    try:
        outcome = ctx.store.execute(key, lambda _: command, expected_version=version)
    except VersionConflict:
        return "someone acted first"
    except GameError as exc:  # the bot returned an illegal command: a bug worth a loud log
        log.error("bot command refused at match %s version %s: %s %s", match_id, version, exc.code, exc)
        raise
    after_append(ctx.redis, match_id, outcome.state)
    return f"played {command.name} at version {outcome.state.version}"
