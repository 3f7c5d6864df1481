"""The contract's documents of several kinds (events, hand record entries, command bodies),
each kind with a schema of its own derived from the game's registries: what the game
writes of every kind, in hands that hold every kind of event, is what its kind's schema
says, as every seat, an onlooker and an operator see it; and no document fits another
kind's schema."""

from __future__ import annotations

import functools

import pytest
from event_hands import played_hands
from jsonschema import Draft202012Validator

from service.api import openapi_document
from service.game import OPERATOR, evolve, initial_state, offered, replay, visible
from service.game.actions import COMMANDS, PLAYER_ACTIONS
from service.game.events import MATCH_EVENTS
from service.game.record import export

VIEWERS = (0, 1, 2, 3, None, OPERATOR)


@functools.cache
def spec() -> dict:
    return openapi_document()


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": f"#/components/schemas/{name}", "components": spec()["components"]}
    )


def kinds_of(union: str) -> dict[str, str]:
    """The kinds of a union schema: each value of its discriminator, with its schema's name."""
    mapping = spec()["components"]["schemas"][union]["discriminator"]["mapping"]
    return {value: ref.rsplit("/", 1)[1] for value, ref in mapping.items()}


def test_each_event_type_has_its_own_kind_of_event_document():
    assert kinds_of("EventDocument") == {cls.type: f"{cls.__name__}Event" for cls in MATCH_EVENTS}


@pytest.mark.slow  # every event of two dozen hands against every kind's schema
@pytest.mark.parametrize("viewer", VIEWERS, ids=str)
def test_every_event_as_a_viewer_sees_it_is_its_kind_s_payload(viewer):
    payloads = {cls.type: validator(f"{cls.__name__}Payload") for cls in MATCH_EVENTS}
    seen = set()
    for events in played_hands():
        for event in events:
            document = visible(event, viewer)
            del document["type"], document["version"]
            errors = list(payloads[event.type].iter_errors(document))
            assert errors == [], (event.type, viewer, errors[0].message)
            seen.add(event.type)
            others = [t for t in payloads if t != event.type]
            assert not any(payloads[t].is_valid(document) for t in others if t in seen), event
    assert seen == set(payloads)


@pytest.mark.slow  # every action of two dozen hands against every kind's schema
def test_every_action_of_a_hand_record_is_its_kind_s_entry():
    entry = validator("ActionEntry")
    assert set(kinds_of("ActionEntry")) == set(COMMANDS)
    for events in played_hands():
        for action in export(events)["actions"]:
            assert entry.is_valid(action), action


def test_every_action_offered_is_a_command_body_of_its_kind_and_of_no_other():
    assert set(kinds_of("CommandRequest")) == {
        "bid",
        "show_hand",
        "report",
        "play",
        "pass",
        "resume",
    }
    body = validator("CommandRequest")
    kinds = {action: validator(name) for action, name in kinds_of("CommandRequest").items()}
    for events in played_hands()[:3]:
        for n in range(1, len(events) + 1):
            state = replay(events[:n])
            if state.turn is None:
                continue
            for action in offered(state, state.turn):
                sent = {"action": action["action"], "expected_version": state.version}
                if "choices" in action:
                    sent["value"] = action["choices"][0]
                elif action["action"] == "play":
                    sent["cards"] = ["S3"]
                assert body.is_valid(sent), sent
                assert [a for a, v in kinds.items() if v.is_valid(sent)] == [action["action"]]


def test_every_action_offered_is_its_kind_of_action_with_its_choices_typed():
    """A view's and a your_turn's ``actions``: each kind its own schema, so that a generated
    client knows a bid's choices are 0-3, 摊打's booleans, 报到's its three words."""
    assert set(kinds_of("Action")) == set(PLAYER_ACTIONS)
    kinds = {action: validator(name) for action, name in kinds_of("Action").items()}
    offered_kinds = set()
    for events in played_hands()[:8]:
        state = initial_state
        for event in events:
            state = evolve(state, event)
            # The seat to act, and those the system plays (offered resume).
            acting = {state.turn, *(i for i, gone in enumerate(state.disconnected) if gone)}
            for seat in acting - {None}:
                for action in offered(state, seat):
                    valid = [a for a, v in kinds.items() if v.is_valid(action)]
                    assert valid == [action["action"]], action
                    offered_kinds.add(action["action"])
    assert offered_kinds == set(PLAYER_ACTIONS)
    items = spec()["components"]["schemas"]["BidAction"]["properties"]["choices"]["items"]
    assert items == {"type": "integer", "enum": [0, 1, 2, 3]}
    assert not kinds["bid"].is_valid({"action": "bid", "choices": [True]})
    assert not kinds["report"].is_valid({"action": "report", "choices": ["fold"]})
    assert not kinds["play"].is_valid({"action": "play", "choices": [1]})
