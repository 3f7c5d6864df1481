"""Every player decision is known to every place that must know it: the action mapping,
the hand record (both ways), the actions offered to a seat, the decider and the API's schema."""

from __future__ import annotations

from dataclasses import fields

import pytest

from service.api import schemas
from service.game import commands, decider
from service.game.actions import (
    CANDIDATES,
    COMMANDS,
    DECISIONS,
    PLAYER_ACTIONS,
    action_of,
    command_of,
    command_of_event,
)
from service.game.commands import Command
from service.game.events import EVENT_TYPES
from service.rules import parse_cards


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
    for schema in (schemas.CommandRequestSchema(), schemas.Action()):
        assert cls.name in schema.fields["action"].validate.choices
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
