"""What the tests of "a seat never sees hidden cards" share: a state with the cards one
seat cannot see dealt differently among the other seats."""

from __future__ import annotations

import random

from service.game.state import State


def reshuffled(state: State, viewer: int, rng: random.Random) -> State:
    """The cards ``viewer`` cannot see, dealt at random among the other seats (each keeps
    its count; the landlord's hand after 摊打 or 报到, partly shown, stays as it is)."""
    shown = state.landlord if state.show_hand or state.reported_cards else None
    hidden = [s for s in range(4) if s not in (viewer, shown)]
    pool = [card for s in hidden for card in state.hands[s]]
    rng.shuffle(pool)
    hands = list(state.hands)
    for s in hidden:
        hands[s], pool = tuple(pool[: len(hands[s])]), pool[len(hands[s]) :]
    return state.replace(hands=tuple(hands))
