"""The player's feed made from a match's events in process (no database): a read from its
cursor's own event makes only that event's items after the cursor, and a match's state
folded by one reader is the next reader's."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime

import service.app.feed
from service.app.feed import PlayerFeed
from service.game import MatchSettings, replay
from service.game.policies import RandomPolicy
from service.game.simulate import play_hand
from service.store.events import StoredEvent
from service.store.feed import FeedEvent

PLAYERS = [str(uuid.UUID(int=seat + 1)) for seat in range(4)]


class NothingStored:
    """The store of a match read from its first event: nothing comes before it."""

    def read(self, match_id: uuid.UUID, version: int) -> list[StoredEvent]:
        return []


def hand() -> list[FeedEvent]:
    """A hand of four players' seats as the feed reads it, each event the last of its
    command (so that every decision is a your_turn)."""
    rng = random.Random(5)
    events, _ = play_hand(
        MatchSettings.build(), rng.randbytes(32), [RandomPolicy(rng)] * 4, players=PLAYERS
    )
    match_id, at = uuid.UUID(int=99), datetime(2026, 12, 2, tzinfo=UTC)
    return [
        FeedEvent(1000 + n, match_id, StoredEvent(n + 1, n, event, at), True, False, None, 1, None)
        for n, event in enumerate(events)
    ]


def test_items_from_an_index_are_the_events_items_past_it_and_no_more_are_made(monkeypatch):
    events = hand()
    feed = PlayerFeed(NothingStored(), None)
    states: dict = {}
    steps = [feed.step_at(fe, states) for fe in events]
    derived: list[int] = []
    offered = service.app.feed.offered
    monkeypatch.setattr(
        service.app.feed,
        "offered",
        lambda state, seat: derived.append(seat) or offered(state, seat),
    )
    two = 0
    for fe, step in zip(events, steps, strict=True):
        for player in PLAYERS:
            whole = feed.items_of(player, fe, step)
            two += len(whole) == 2
            for start in range(len(whole) + 2):
                derived.clear()
                assert feed.items_of(player, fe, step, start) == whole[start:]
                # The actions of a your_turn before ``start`` are not derived.
                assert len(derived) == sum(i["type"] == "your_turn" for i in whole[start:])
    assert two, "no event with two items for a seat (hand_started, then your_turn)"


def test_a_state_folded_by_one_reader_is_the_next_readers(monkeypatch):
    events = hand()
    feed = PlayerFeed(NothingStored(), None)
    first = [feed.step_at(fe, {}) for fe in events]
    assert first[-1] is not None
    assert first[-1].after == replay(fe.stored.event for fe in events)

    def evolve(*_):
        raise AssertionError("folded again")

    monkeypatch.setattr(service.app.feed, "evolve", evolve)
    states: dict = {}
    again = [feed.step_at(fe, states) for fe in events]
    assert all(
        a is not None and b is not None and a.before is b.before and a.after is b.after
        for a, b in zip(first, again, strict=True)
    )
