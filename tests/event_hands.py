"""Hands that hold every kind of a match's events, for the tests that must see each."""

from __future__ import annotations

import functools
import random

from service.game import Bid, Disconnect, MatchSettings, Resume, SeatView, Settle, State, decide
from service.game.commands import Command, SeatCommand
from service.game.events import Event
from service.game.policies import RandomPolicy, acting_party
from service.game.settlement import MAX_BID
from service.game.simulate import play_hand
from service.game.state import BIDDING
from service.rules import RULESETS, counts_of, deal, report_units


class Reporter(RandomPolicy):
    """Random play, but a seat that could report (报到) as landlord bids 3."""

    def act(self, view: SeatView) -> SeatCommand:
        if (
            view.phase == BIDDING
            and view.seat is not None
            and MAX_BID in view.bid_choices()
            and report_units(counts_of(view.hand), view.table.ruleset)
        ):
            return Bid(view.seat, MAX_BID, acting_party(view))
        return super().act(view)


def reportable_seed(rng: random.Random, table: MatchSettings) -> bytes:
    while True:
        seed = rng.randbytes(32)
        if any(report_units(counts_of(hand), table.ruleset) for hand in deal(seed).hands):
            return seed


@functools.cache
def played_hands() -> list[list[Event]]:
    """Hands of every kind of event: random play on each ruleset (bids of 3, 摊打 and 报到
    among them), the seats players who leave and come back now and then, each hand settled."""
    hands = []
    rng = random.Random(11)
    for number in range(24):
        table = MatchSettings.build(sorted(RULESETS)[number % len(RULESETS)])
        seed = reportable_seed(rng, table) if number % 3 == 0 else rng.randbytes(32)

        def interrupt(state: State) -> list[Command]:
            seat = rng.randrange(4)
            if rng.random() < 0.9:
                return []
            return [Resume(seat) if state.disconnected[seat] else Disconnect(seat, "left")]

        events, final = play_hand(
            table,
            seed,
            [Reporter(rng)] * 4,
            players=("a", "b", "c", "d"),
            interrupt=interrupt,
        )
        hands.append([*events, *decide(final, Settle())])
    return hands
