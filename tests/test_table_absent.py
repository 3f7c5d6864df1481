"""A player who did nothing for a whole hand (the system took the seat at a missed
deadline before any decision of the player's, and the player never took it back) leaves
the table with that hand, as a leave during a hand does (docs/tables.md): the seat is freed
when the hand is settled; the disconnect penalty of docs/rules.md §5.6 is the hand's
already, nothing is added. Pure: the table's decider on events."""

from __future__ import annotations

from service.game import BOT, PLAYER, MatchSettings
from service.game.events import BidMade, Disconnected, Passed, Played, Resumed
from service.game.table_decider import (
    CreateTable,
    Join,
    RecordHand,
    StartHand,
    absent_seats,
    decide_all,
)
from service.game.table_play import initial_table

NET = ("1.00", "-1.00", "0.00", "0.00")


def test_a_seat_taken_over_before_any_decision_of_its_player_is_absent():
    events = [
        BidMade(0, 0, PLAYER),
        Disconnected(1, "deadline"),
        BidMade(1, 0, BOT),
        BidMade(2, 3, BOT),
        Played(2, ("3H",), "single", "3", BOT),
        Passed(1, BOT),
    ]
    assert absent_seats(events) == (1,)


def test_a_player_who_decided_once_or_took_the_seat_back_is_present():
    decided_then_late = [BidMade(1, 0, PLAYER), Disconnected(1, "deadline"), Passed(1, BOT)]
    assert absent_seats(decided_then_late) == ()
    took_it_back = [Disconnected(1, "deadline"), Passed(1, BOT), Resumed(1)]
    assert absent_seats(took_it_back) == ()
    # A leave is a leave already (the seat is leaving), and a bot's seat is nobody's.
    assert absent_seats([Disconnected(3, "left"), Passed(3, BOT), Passed(0, BOT)]) == ()


def test_the_absent_players_seat_is_freed_with_the_hand_and_the_present_stays():
    commands = [
        CreateTable("t", MatchSettings.build(), bots_after=None),
        Join("gone"),
        Join("here"),
        Join("third"),
        Join("fourth"),
        StartHand("m"),
    ]
    _, playing = decide_all(initial_table, commands)
    events, after = decide_all(playing, [RecordHand("m", NET, absent=(0,))])
    assert [e.type for e in events] == ["seat_freed", "hand_settled"]
    assert (events[0].seat, events[0].player, events[0].number) == (0, "gone", 1)
    assert after.seats[0] is None
    assert [s.player for s in after.seats[1:]] == ["here", "third", "fourth"]
    # The hand's net still counts on the scoreboard of the player who was gone.
    assert after.scoreboard["gone"] == 1
