"""Playing hands with policies on the pure engine (no database): for ``ddz simulate``,
the property tests and the benchmarks."""

from __future__ import annotations

from typing import Callable, Sequence

from .commands import Command, CreateMatch, Deal, TakeSeat
from .decider import decide
from .events import Event
from .policies import Policy
from .state import ENDED, State, evolve, initial_state
from .table import Table
from .views import seat_view

#: Called before each turn; may return extra commands (a disconnect, a resume) to apply first.
Interrupt = Callable[[State], Sequence[Command]]


def apply(state: State, command: Command, log: list[Event]) -> State:
    for event in decide(state, command):
        state = evolve(state, event)
        log.append(event)
    return state


def play_hand(
    table: Table,
    seed: bytes,
    policies: Sequence[Policy],
    *,
    match_id: str = "simulated",
    players: Sequence[str | None] = (None, None, None, None),
    interrupt: Interrupt | None = None,
) -> tuple[list[Event], State]:
    """Plays one hand to its end. A seat with a player id in ``players`` is a player's
    seat (its policy acts as the player, or as the system once it is disconnected);
    ``None`` makes a bot seat. Returns the events and the final state."""
    log: list[Event] = []
    state = apply(initial_state, CreateMatch(match_id, table), log)
    for seat, player in enumerate(players):
        state = apply(state, TakeSeat(seat, player, bot=player is None), log)
    state = apply(state, Deal(seed), log)
    while state.phase != ENDED:
        if interrupt is not None:
            for command in interrupt(state):
                state = apply(state, command, log)
        seat = state.turn
        state = apply(state, policies[seat].act(seat_view(state, seat)), log)
    return log, state
