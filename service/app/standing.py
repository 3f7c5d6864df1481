"""A player's standing, set by an operator (docs/operations.md, "Players"): suspended or
banned, every token of theirs is refused with a problem that says so, their waiting lobby
tickets are cancelled and the system takes over each seat they hold in a hand under way
(系统代打, as when a player leaves: the first seat to leave a hand pays its penalty). A
person's bot accounts are suspended, banned and reinstated with them."""

from __future__ import annotations

import logging
import uuid

from psycopg_pool import ConnectionPool

from ..game import Disconnect, GameError, State
from ..game.commands import Command
from ..store import reports
from ..store.players import Players
from .commands import CommandRequest, Commands

log = logging.getLogger(__name__)


def set_standing(
    pool: ConnectionPool,
    players: Players,
    commands: Commands,
    player_id: uuid.UUID,
    standing: str,
) -> list[uuid.UUID] | None:
    """Sets the player's standing (and their bot accounts') and, unless ``active``, hands
    their seats to the system; the matches where it took a seat over. None when there is
    no such player."""
    changed = players.set_standing(player_id, standing)
    if changed is None:
        return None
    if standing == "active":
        return []
    taken = []
    seats = [found for player in changed for found in reports.playing_seats(pool, player)]
    for match_id, seat in seats:

        def leave(state: State, seat: int = seat) -> Command:
            if state.disconnected[seat]:
                raise GameError("the system plays the seat already", "already_disconnected")
            return Disconnect(seat, "left")

        try:
            commands.execute(CommandRequest(match_id, leave))
        except GameError as exc:
            log.info("standing: match %s seat %s not taken over: %s", match_id, seat, exc.code)
            continue
        taken.append(match_id)
    return taken
