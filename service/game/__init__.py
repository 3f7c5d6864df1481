"""One match (one hand) of Shanghai Dou Dizhu as a pure event-sourced decider:
``decide(state, command) -> events``, ``evolve(state, event) -> state``, ``initial_state``.
No I/O: the store and the API stay thin around it."""

from .actions import offered
from .commands import (
    Bid,
    Command,
    CreateMatch,
    DealHand,
    Disconnect,
    Pass,
    Play,
    Report,
    Resume,
    Settle,
    ShowHand,
    TakeSeat,
)
from .decider import can, decide, outcome
from .errors import GameError
from .events import BOT, EVENT_TYPES, PLAYER, Event
from .settings import MatchSettings
from .settlement import Factors, HandOutcome, Settlement, settle
from .state import State, deadline, decision, decision_kept, evolve, initial_state, replay
from .views import OPERATOR, SeatView, seat_view, view, visible

__all__ = [name for name in dir() if not name.startswith("_")]
