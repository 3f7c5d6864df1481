"""Every player decision is known to every place that must know it: the action mapping,
the hand record (both ways), the actions offered to a seat, the decider, ``evolve``, the
system's players, the simulator and the API's schema."""

from __future__ import annotations

import random
from dataclasses import fields

import pytest

from service.api import schemas
from service.game import MatchSettings, commands, decider
from service.game.actions import (
    CANDIDATES,
    COMMANDS,
    DECISIONS,
    PLAYER_ACTIONS,
    action_of,
    command_of,
    command_of_event,
    offered,
)
from service.game.bot import BotPolicy
from service.game.commands import Command
from service.game.events import BOT, EVENT_TYPES
from service.game.policies import RandomPolicy
from service.game.simulate import DECISION_EVENTS, play_hand
from service.game.state import _EVOLVE, evolve, initial_state
from service.rules import RULESETS, parse_cards


def test_every_command_a_seat_decides_by_is_a_decision():
    # A command with a ``by`` field is decided by a seat's player or the bot for it.
    every = [
        c
        for c in vars(commands).values()
        if isinstance(c, type) and issubclass(c, Command) and c is not Command
    ]
    decided = {c for c in every if "by" in {f.name for f in fields(c)}}
    assert decided == set(DECISIONS)


SAMPLES = {
    "bid": {"value": 2},
    "show_hand": {"value": True},
    "report": {"value": "play"},
    "play": {"cards": ["S3", "H3"]},
    "pass": {},
}


@pytest.mark.parametrize("cls", DECISIONS, ids=lambda c: c.name)
def test_a_decision_is_known_everywhere(cls):
    assert COMMANDS[cls.name] is cls and cls.name in PLAYER_ACTIONS
    assert cls in CANDIDATES, "the actions offered to a seat do not ask the decider about it"
    assert cls in decider._DECIDE and cls in decider._VERIFY
    # An offered action, a command body and a hand record's entry of its own, in the contract.
    for kinds in (schemas.Action, schemas.CommandRequestSchema, schemas.ActionEntry):
        own = kinds.type_schemas[cls.name]
        assert own.fields["action"].validate.choices == [cls.name]
    # The record's action entry and the command, both ways; the event it causes names it.
    entry = {"seat": 1, "action": cls.name, **SAMPLES[cls.name], "by": "bot"}
    command = command_of(entry, 1, "bot")
    assert type(command) is cls and action_of(command) == entry
    event_cls = EVENT_TYPES[cls.name]
    event_fields = {f.name for f in fields(event_cls)}
    assert {f.name for f in fields(cls)} <= event_fields
    if cls.name == "play":
        assert command.cards == parse_cards(["S3", "H3"])
    event = event_cls(**{f.name: getattr(command, f.name, None) for f in fields(event_cls)})
    assert command_of_event(event) == command


def played(policy, ruleset: str, hands: int = 30):
    """The decisions offered to the system's seats, and those taken, over ``hands`` hands
    that ``policy`` plays at all four seats."""
    rng = random.Random(1)
    offered_names: set[str] = set()
    taken: set[str] = set()
    for _ in range(hands):
        events, _ = play_hand(
            MatchSettings.build(ruleset=ruleset), rng.randbytes(32), [policy(rng)] * 4
        )
        state = initial_state
        for event in events:
            if state.awaits_decision():
                offered_names |= {a["action"] for a in offered(state, state.turn, BOT)}
            state = evolve(state, event)
            taken.add(event.type)
    return offered_names, taken


@pytest.mark.parametrize("ruleset", sorted(RULESETS))
def test_every_decision_is_offered_taken_by_the_system_and_evolved(ruleset):
    """A decision the views never offer, that no system player takes (the random policy or
    the bot) or that ``evolve`` or the simulator's turn count does not know, fails here."""
    names = {cls.name for cls in DECISIONS}
    offered_names, taken = set(), set()
    for policy in (RandomPolicy, lambda rng: BotPolicy()):
        more_offered, more_taken = played(policy, ruleset)
        offered_names |= more_offered
        taken |= more_taken
    assert names <= offered_names
    assert names <= taken
    for cls in DECISIONS:
        assert EVENT_TYPES[cls.name] in _EVOLVE
        assert EVENT_TYPES[cls.name] in DECISION_EVENTS
