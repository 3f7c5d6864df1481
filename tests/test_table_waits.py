"""What a table waits for between hands, and when (docs/tables.md): the rest after a hand is
counted from its settlement whatever happens at the table meanwhile; an empty seat goes to
the lobby, then to bots, else the table closes. And a seat's decision that another seat's
disconnect leaves as it was. Pure: the deciders on events, the times given."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from service.game import (
    Bid,
    CreateMatch,
    DealHand,
    Disconnect,
    Event,
    GameError,
    MatchSettings,
    Resume,
    State,
    TakeSeat,
    decide,
    decision,
    decision_kept,
    initial_state,
    replay,
)
from service.game.events import DEFAULT_CLOSE_SECONDS
from service.game.table_decider import (
    CloseTable,
    CreateTable,
    FillWithBots,
    Join,
    Leave,
    RecordHand,
    StartHand,
    decide_all,
)
from service.game.table_play import BOTS, CLOSE, DEAL, due_at, initial_table, replay_table

NET = ("2.00", "-1.00", "-1.00", "0.00")
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_rest_after_a_hand_holds_through_a_leave_and_bots_taking_the_seat():
    # The traced table: a lobby table of two people and two bots (bots_after 0), a rest of
    # 3 s; hand 1 is settled at 38.481 s and a player leaves at 38.626.
    _, playing = decide_all(
        initial_table,
        [
            CreateTable("t", MatchSettings.build(), bots_after=0, next_hand_seconds=3),
            Join("first"),
            Join("second"),
            FillWithBots(),
            StartHand("m1"),
        ],
    )
    _, settled = decide_all(playing, [RecordHand("m1", NET)])
    settled_at = at(38.481)
    assert due_at(settled, settled_at, settled_at) == (DEAL, at(41.481))
    _, one_left = decide_all(settled, [Leave("first")])
    # Bots are due, not at once (as before: 0.09 s later, and the deal with them), but
    # once the rest is over.
    assert due_at(one_left, at(38.626), settled_at) == (BOTS, at(41.481))
    # The second player leaves 1.1 s after the settlement: still between hands, at once.
    events, both_left = decide_all(one_left, [Leave("second")])
    assert [(e.type, e.at_hand_end) for e in events] == [("player_left", False)]
    assert due_at(both_left, at(39.581), settled_at) is None  # bots alone deal nothing
    # Had the second stayed: bots once the rest is over, and the deal with them at once.
    _, filled = decide_all(one_left, [FillWithBots()])
    assert due_at(filled, at(41.5), settled_at) == (DEAL, at(41.5))
    # A table's first hand waits for no rest.
    _, first = decide_all(
        initial_table, [CreateTable("u", MatchSettings.build()), *map(Join, "abcd")]
    )
    assert due_at(first, at(1), None) == (DEAL, at(1))


def test_a_table_of_people_only_that_lost_one_closes_after_its_wait_and_a_new_one_never():
    create = CreateTable("t", MatchSettings.build(), next_hand_seconds=5, close_after=60)
    _, fresh = decide_all(initial_table, [create, Join("host")])
    assert due_at(fresh, at(0), None) is None  # a creator waiting for friends
    _, playing = decide_all(fresh, [*map(Join, "abc"), StartHand("m1")])
    _, settled = decide_all(playing, [RecordHand("m1", NET)])
    _, short = decide_all(settled, [Leave("a")])
    # After its last change, never before its rest is over.
    assert due_at(short, at(102), at(100)) == (CLOSE, at(162))
    events, closed = decide_all(short, [CloseTable()])
    (event,) = events
    assert (event.type, event.hands, event.players) == ("table_closed", 1, ("host", None, "b", "c"))
    assert closed.seats == (None,) * 4 and due_at(closed, at(162), at(100)) is None
    for command in (Join("late"), StartHand("m2"), FillWithBots(), CloseTable()):
        with pytest.raises(GameError) as refused:
            decide_all(closed, [command])
        assert refused.value.code == "table_closed", command


def test_a_leave_during_a_hand_frees_the_seat_with_its_settlement_and_the_nets_stay_its():
    _, playing = decide_all(
        initial_table,
        [CreateTable("t", MatchSettings.build()), *map(Join, "abcd"), StartHand("m1")],
    )
    (left,), leaving = decide_all(playing, [Leave("b")])
    assert (left.type, left.at_hand_end, left.number) == ("player_left", True, 1)
    assert leaving.seats[1] is not None and leaving.seats[1].leaving
    events, after = decide_all(leaving, [RecordHand("m1", NET)])
    assert [(e.type, e.seat, e.player, e.number) for e in events[:1]] == [("seat_freed", 1, "b", 1)]
    assert events[1].type == "hand_settled" and after.seats[1] is None
    assert after.scoreboard == {p: Decimal(n) for p, n in zip("abcd", NET, strict=True)}


def test_old_table_events_are_brought_up_to_date_as_they_are_read():
    created = Event.from_payload(
        "table_created",
        1,
        {
            "table_id": "t",
            "table": MatchSettings.build().to_json(),
            "private": False,
            "invite": None,
            "bots_after": None,
            "next_hand_seconds": 5,
        },
    )
    left = Event.from_payload("player_left", 1, {"seat": 2, "player": "p", "at_hand_end": True})
    assert (left.type, left.number) == ("player_left", None)  # type: ignore[attr-defined]
    # A table made before closing existed closes as the others do.
    assert replay_table([created]).close_after == DEFAULT_CLOSE_SECONDS


def bidding(*players: str | None) -> State:
    """A match dealt to these players (None: a bot), in bidding."""
    state = initial_state
    commands = [CreateMatch("m", MatchSettings.build())]
    commands += [TakeSeat(seat, p, bot=p is None) for seat, p in enumerate(players)]
    for command in [*commands, DealHand(bytes(32))]:
        state = replay(decide(state, command), state)
    return state


def test_another_seats_disconnect_leaves_a_decision_as_it_was_its_own_does_not():
    state = bidding("a", "b", "c", "d")
    turn = state.turn
    assert decision(state) == (turn, "bidding")
    other = (turn + 1) % 4
    left = decide(state, Disconnect(other, "left"))
    assert decision_kept(state, left)
    back = decide(replay(left, state), Resume(other))
    assert decision_kept(state, [*left, *back])
    # The seat's own disconnect takes the decision away, and a bid gives the next seat one.
    assert not decision_kept(state, decide(state, Disconnect(turn, "deadline")))
    assert not decision_kept(state, decide(state, Bid(turn, 0)))
