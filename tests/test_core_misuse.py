"""The match core refuses misuse that would otherwise pass silently: a state or a view
built with a field it does not have (or without one it has), a state changed by the
event that follows it, and the views' caches read by several threads at once."""

from __future__ import annotations

import copy
import json
import sys
import threading
from collections import OrderedDict
from dataclasses import fields

import pytest
from event_hands import played_hands

from service.game import SeatView, State, evolve, initial_state, seat_view, view, views
from service.game import state as state_module
from service.game.events import MATCH_EVENTS, Settled
from service.game.state import built
from service.rules import cards


def test_a_state_refuses_a_field_it_does_not_have():
    with pytest.raises(TypeError, match="pases"):
        initial_state.replace(pases=3)
    with pytest.raises(TypeError, match="pases"):
        State(pases=3)  # type: ignore[call-arg]
    assert initial_state.replace(passes=3).passes == 3 and initial_state.passes == 0


def a_view_s_fields() -> dict:
    state = initial_state
    for event in played_hands()[0][:8]:
        state = evolve(state, event)
    return dict(seat_view(state, 0).__dict__)


def test_a_view_is_built_with_each_of_its_fields_and_no_other():
    names = frozenset(field.name for field in fields(SeatView))
    values = a_view_s_fields()
    assert built(SeatView, dict(values), names) == SeatView(**values)
    del values["history"]  # a field with a default: left out, it would read as ()
    with pytest.raises(TypeError, match="missing history"):
        built(SeatView, dict(values), names)
    values["histroy"] = ()
    with pytest.raises(TypeError, match="no field histroy; missing history"):
        built(SeatView, values, names)


def test_no_event_changes_the_state_it_is_given():
    seen = set()
    for events in played_hands():
        state = initial_state
        for event in events:
            before = dict(state.__dict__)
            after = evolve(state, event)
            assert after is not state and after.version == state.version + 1
            assert state.__dict__.keys() == before.keys(), event
            assert all(state.__dict__[name] is value for name, value in before.items()), event
            seen.add(type(event))
            state = after
    assert seen == set(MATCH_EVENTS), "the hands above miss a kind of event"


def test_an_event_that_changes_nothing_still_leaves_its_state_alone(monkeypatch):
    """A handler that reports no change: evolve still makes a new state, at the next version."""
    events = played_hands()[0]
    state = initial_state
    for event in events[:-1]:
        state = evolve(state, event)
    assert isinstance(events[-1], Settled)
    monkeypatch.setitem(state_module._EVOLVE, Settled, lambda state, event: {})
    version = state.version
    after = evolve(state, events[-1])
    assert state.version == version and after.version == version + 1
    assert not state.settled and not after.settled


@pytest.fixture
def tiny_caches(monkeypatch):
    """The views' and the rules' caches forgotten at (nearly) every entry, and threads
    switched as often as the interpreter can: what a race needs to show."""
    monkeypatch.setattr(views, "_INFOS_REMEMBERED", 2)
    monkeypatch.setattr(views, "_HISTORIES_REMEMBERED", 2)
    monkeypatch.setattr(cards, "_COUNTED_REMEMBERED", 2)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_views_made_by_threads_at_once_are_those_made_one_at_a_time(tiny_caches):
    states = []
    for events in played_hands()[:3]:
        state = initial_state
        for event in events:
            state = evolve(state, event)
            if state.match_id is not None:
                states.append(state)

    def looks(state: State) -> tuple:
        return (*(seat_view(state, seat) for seat in range(4)), view(state, views.OPERATOR))

    expected = [looks(state) for state in states]
    failures: list[BaseException] = []

    def look(offset: int) -> None:
        try:
            for i in range(6 * len(states)):
                at = (i * 7 + offset) % len(states)
                assert looks(states[at]) == expected[at]
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=look, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[0]


def test_a_view_s_history_cannot_be_changed_under_the_other_views():
    """Views of a hand share their history's turns: a reader changing one would change
    what every other view shows, so each refuses; a copy is the reader's own."""
    events = next(events for events in played_hands() if sum(e.type == "play" for e in events) > 6)
    state = initial_state
    for event in events:
        state = evolve(state, event)
        if len(state.history) == 6:
            break
    shown = view(state, 0)["history"]
    before = view(state, 2)["history"]
    turn = next(turn for turn in shown if turn["cards"])
    for change in (
        lambda: turn.update(seat=9),
        lambda: turn.__setitem__("cards", []),
        lambda: turn["cards"].append("S3"),
        lambda: turn["cards"].__setitem__(0, "S3"),
        lambda: turn.pop("action"),
    ):
        with pytest.raises(TypeError, match="shared"):
            change()
    assert view(state, 2)["history"] == before
    mine = copy.deepcopy(shown)
    mine[0]["seat"] = 9
    mine[0]["cards"].append("S3")
    assert view(state, 0)["history"] == before
    assert json.loads(json.dumps(shown)) == before


def test_views_build_on_the_history_shown_last_and_keep_a_bounded_number(monkeypatch):
    """A view shows the turns of the last history shown of its hand (the same documents,
    however many turns came since), and what the views keep is bounded by histories, not
    by every turn ever shown: a cache of each turn grew an API process by some 36 MiB
    before it was forgotten all at once."""
    monkeypatch.setattr(views, "_HISTORIES", OrderedDict())
    monkeypatch.setattr(views, "_HISTORIES_REMEMBERED", 8)
    hands = []
    for events in played_hands():
        state, states = initial_state, []
        for event in events:
            state = evolve(state, event)
            if state.history:
                states.append(state)
        if len(state.history) >= 10:
            hands.append(states)
    assert len(hands) >= 3
    early, late = hands[0][3], hands[0][-1]
    shown = view(early, 0)["history"]
    later = view(late, 1)["history"]
    assert len(later) > len(shown) + 3
    assert all(a is b for a, b in zip(shown, later))  # shared, not made again
    assert [(t["seat"], t["action"], len(t["cards"])) for t in later] == [
        (t.seat, "play" if t.cards else "pass", len(t.cards)) for t in late.history
    ]
    for states in hands:
        for state in states:
            view(state, 0)
    assert len(views._HISTORIES) == 8
