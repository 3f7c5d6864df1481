"""Properties over many simulated hands (random and bot play, both rulesets, with players
dropping and coming back): replay rebuilds the state, the 108 cards are conserved at every
step, every settlement is zero-sum, and every exported hand record verifies."""

import json
import random
from collections import Counter
from decimal import Decimal

import pytest

from service.game import (
    OPERATOR,
    Disconnect,
    MatchSettings,
    Resume,
    evolve,
    initial_state,
    replay,
    visible,
)
from service.game.bot import BotPolicy
from service.game.events import HandDealt, LandlordChosen, Played
from service.game.policies import RandomPolicy
from service.game.record import export, verify
from service.game.settlement import HandResult
from service.game.simulate import play_hand
from service.rules import DECK

# Slow: plays many hands to check properties of the engine (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

HANDS = 1000
BOT_EVERY = 5  # one hand in five has bots at some seats


def dropping_players(rng: random.Random):
    """Before some turns, the seat to act drops (deadline or leave) or a dropped seat resumes."""

    def interrupt(state):
        if state.phase not in ("bidding", "show_hand", "report", "playing") or rng.random() > 0.03:
            return []
        seat = state.turn
        if state.seats[seat].bot:
            return []
        if state.disconnected[seat]:
            return [Resume(seat)]
        return [Disconnect(seat, rng.choice(["deadline", "left"]))]

    return interrupt


def simulated_hands():
    rng = random.Random(20261130)
    for i in range(HANDS):
        table = MatchSettings.build(
            ruleset=("shanghai-platform", "shanghai-local")[i % 2],
            unit=rng.choice(["1.00", "0.50", "2.00"]),
            cap=rng.choice([None, None, "10.00", "37.50"]),
            rake=rng.choice(["0", "0.05", "0.10"]),
        )
        policies = [RandomPolicy(rng) for _ in range(4)]
        if i % BOT_EVERY == 0:
            policies[rng.randrange(4)] = BotPolicy()
            policies[rng.randrange(4)] = BotPolicy()
        players = [f"player-{i}-{s}" if rng.random() < 0.7 else None for s in range(4)]
        events, state = play_hand(
            table,
            rng.randbytes(32),
            policies,
            match_id=f"m{i}",
            players=players,
            interrupt=dropping_players(rng),
        )
        yield events, state


@pytest.fixture(scope="module")
def hands():
    return list(simulated_hands())


def test_enough_hands_of_every_kind(hands):
    assert len(hands) >= 1000
    results = [state.result.to_json() for _, state in hands]
    assert {r["winner"] for r in results} == {"landlord", "farmers"}
    assert any(r["first_disconnect"] is not None for r in results)
    assert any(r["factors"]["bombs"] for r in results)


def test_a_hand_result_reads_back_to_the_same_json_byte_for_byte(hands):
    """The hand_ended event stores the result's JSON, and records and answers show it:
    read back, it writes the same bytes (key order, amounts, the multiplier's fraction)."""
    for events, state in hands:
        ended = next(e for e in events if e.type == "hand_ended")
        stored = json.dumps(ended.payload()["result"], ensure_ascii=False)
        assert json.dumps(state.result.to_json(), ensure_ascii=False) == stored
        assert (
            json.dumps(HandResult.from_json(json.loads(stored)).to_json(), ensure_ascii=False)
            == stored
        )


def test_replay_rebuilds_the_same_state(hands):
    for events, state in hands:
        assert replay(events) == state


def test_the_108_cards_are_conserved_at_every_step(hands):
    for events, _ in hands:
        state = initial_state
        played: list = []
        for event in events:
            state = evolve(state, event)
            if isinstance(event, Played):
                played.extend(event.cards)
            if state.hands[0]:
                in_hands = [c for hand in state.hands for c in hand]
                bottom = [] if state.landlord is not None else list(state.bottom)
                assert Counter(in_hands + bottom + played) == Counter(DECK)


def test_every_settlement_is_zero_sum_to_the_cent(hands):
    for _, state in hands:
        settlement = state.result.to_json()["settlement"]
        net = [Decimal(x) for x in settlement["net"]]
        assert sum(net) + Decimal(settlement["house"]) == 0
        for key in ("gross", "after_cap", "rake", "penalty", "net"):
            assert all(Decimal(x).as_tuple().exponent == -2 for x in settlement[key])
        cap = state.table.cap
        if cap is not None:
            assert sum(Decimal(x) for x in settlement["after_cap"] if Decimal(x) > 0) <= cap


def test_only_the_first_disconnect_pays_the_penalty(hands):
    for _, state in hands:
        penalty = [Decimal(x) for x in state.result.to_json()["settlement"]["penalty"]]
        first = state.result.to_json()["first_disconnect"]
        assert [seat for seat, p in enumerate(penalty) if p] == ([] if first is None else [first])


def test_every_exported_record_verifies(hands):
    for events, state in hands:
        assert verify(export(events)) == state


def test_no_seat_sees_another_seats_dealt_or_bottom_cards(hands):
    for events, state in hands[:200]:
        dealt = next(e for e in events if isinstance(e, HandDealt))
        for seat in range(4):
            for event in events:
                shown = visible(event, seat)
                if isinstance(event, HandDealt):
                    assert shown["hand"] == [c.code for c in dealt.hands[seat]]
                    assert "hands" not in shown and "seed" not in shown and "bottom" not in shown
                if isinstance(event, LandlordChosen) and seat != event.seat:
                    assert shown["bottom"] is None
        assert visible(dealt, OPERATOR)["seed"] == state.seed
