"""The search's play-out engine (service/game/bot/search.py ``Position``) plays by the
rules of the full engine: from the first play of many random hands (random bids, 摊打 and
报到 included, both rulesets), the two offer the same legal plays at every turn, and the
same random choices end the hand the same way (who goes out, how many bombs). The bot
plays the same in a play-out as from its seat's full view."""

from __future__ import annotations

import random

import pytest

from service.game import MatchSettings, decide, evolve, replay
from service.game.bot import BotPolicy
from service.game.bot.levels import policy
from service.game.bot.policy import SeatPlan
from service.game.bot.search import Player, SearchPolicy
from service.game.commands import CreateMatch, DealHand, Pass, Play, TakeSeat
from service.game.policies import RandomPolicy, acting_party
from service.game.settlement import LANDLORD
from service.game.simulate import apply, hand_seed, play_hand
from service.game.state import ENDED, PLAYING, State, initial_state
from service.game.views import seat_view
from service.rules import counts_of, pick_cards


def first_play(table: MatchSettings, seed: bytes, rng: random.Random) -> State:
    """A hand dealt and bid at random, at its first play (or ended, after 报到 then 不打)."""
    log: list = []
    state = apply(initial_state, CreateMatch("playouts", table), log)
    for seat in range(4):
        state = apply(state, TakeSeat(seat, None, bot=True), log)
    state = apply(state, DealHand(seed), log)
    policy = RandomPolicy(rng)
    while state.phase not in (PLAYING, ENDED):
        state = apply(state, policy.act(seat_view(state, state.turn)), log)
    return state


@pytest.mark.slow
@pytest.mark.parametrize("ruleset", ["shanghai-platform", "shanghai-local"])
def test_the_playout_engine_agrees_with_the_full_engine(ruleset):
    table = MatchSettings.build(ruleset)
    rng = random.Random(ruleset)
    played = locked = limited = 0
    for i in range(150):
        state = first_play(table, hand_seed(f"playouts-{ruleset}", i), rng)
        if state.phase == ENDED:
            continue
        view = seat_view(state, state.turn)
        position = SearchPolicy.position(view, [list(counts_of(h)) for h in state.hands])
        locked += bool(position.locked)
        log: list = []
        while True:
            seat = state.turn
            view = seat_view(state, seat)
            assert position.turn == seat
            assert (position.lead is None) == (view.lead is None)
            options = sorted(view.plays(), key=repr)
            assert sorted(position.plays(seat), key=repr) == options
            limited += any(left is not None for left in position.bombs_left)
            choices = [*options, None] if view.lead is not None else options
            choice = rng.choice(choices)
            by = acting_party(view)
            command = (
                Pass(seat, by)
                if choice is None
                else Play(seat, pick_cards(view.hand, choice.counts), by)
            )
            state = apply(state, command, log)
            out = position.apply(seat, choice)
            assert out == (state.phase == ENDED)
            if out:
                break
        assert state.result is not None
        outcome = state.result.outcome
        assert (outcome.winner == LANDLORD) == (seat == position.landlord)
        assert outcome.factors.bombs == position.bombs
        played += 1
    # Hands played on after 报到 (reported ranks locked) and turns with a bomb limit occur.
    assert played >= 140 and locked >= 1 and limited >= 1000


def test_the_bot_plays_the_same_in_a_playout_as_from_its_full_view():
    """The play-outs give the bot a light view of the position; at every play of hands of
    normal bots (摊打 and 报到 as they come) it chooses what it chooses from the seat's
    full view."""
    normal = policy("normal")
    assert isinstance(normal, BotPolicy)
    compared = 0
    for ruleset in ("shanghai-platform", "shanghai-local"):
        table = MatchSettings.build(ruleset)
        for i in range(8):
            events, _ = play_hand(table, hand_seed(f"light-{ruleset}", i), [normal] * 4)
            state = replay(events[:6])  # created, four seats, dealt
            while state.result is None:
                view = seat_view(state, state.turn)
                if state.phase == PLAYING:
                    seat = SeatPlan(view)
                    full = normal.lead(seat) if view.lead is None else normal.follow(seat)
                    hands = [list(counts_of(h)) for h in state.hands]
                    position = SearchPolicy.position(view, hands)
                    assert Player(view, normal).move(position, state.turn) == full
                    compared += 1
                for event in decide(state, normal.act(view)):
                    state = evolve(state, event)
    assert compared >= 500
