"""The bot policy (service/game/bot/): always legal, sees only its view, plays sensibly,
beats the random baseline, and decides fast."""

from __future__ import annotations

import hashlib
import inspect
import random
from dataclasses import fields

import pytest
from crafted import first_bid_view, make_view

from service.game.bot import BotPolicy, plan
from service.game.commands import Bid, CreateMatch, DealHand, Pass, Play, Report, ShowHand, TakeSeat
from service.game.events import PLAYER
from service.game.policies import RandomPolicy, acting_party
from service.game.settings import MatchSettings
from service.game.simulate import apply, play_hand
from service.game.state import BIDDING, ENDED, REPORT, SHOW_HAND, initial_state
from service.game.views import SeatView, seat_view
from service.rules import (
    RULESETS,
    classify,
    counts_of,
    parse_ranks,
    rank_index,
    report_units,
    verify_play,
)
from service.rules.cards import COPIES

RULESET_NAMES = sorted(RULESETS)


def seed(label: str, i: int) -> bytes:
    return hashlib.sha256(f"{label}-{i}".encode()).digest()


def played_ranks(command) -> str:
    assert isinstance(command, Play)
    return classify(counts_of(command.cards)).ranks


# --- legality --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("ruleset", RULESET_NAMES)
def test_four_bots_always_play_legally(ruleset):
    """decide() refuses an illegal command with a GameError: finishing every hand proves
    every bid, 摊打, 报到, play and pass of the bot was legal."""
    table = MatchSettings.build(ruleset)
    bot = BotPolicy()
    winners = set()
    for i in range(200):
        _, state = play_hand(table, seed("legal", i), [bot] * 4)
        assert state.phase == ENDED
        winners.add(state.winner)
    assert winners == {"landlord", "farmers"}


@pytest.mark.slow  # plays many hands
@pytest.mark.parametrize("ruleset", RULESET_NAMES)
def test_bots_play_legally_among_random_players_and_for_player_seats(ruleset):
    """Bots next to random policies reach odd positions; player seats make the bot act
    ``by`` the player (its acting party); no bomb doubling changes the 报到 sums."""
    table = MatchSettings.build(ruleset, bombs_double=False)
    for i in range(100):
        rng = random.Random(i)
        policies = [BotPolicy() if (s + i) % 2 else RandomPolicy(rng) for s in range(4)]
        players = ("p0", None, "p2", None)
        log, state = play_hand(table, seed("mixed", i), policies, players=players)
        assert state.phase == ENDED
        for event in log:
            by = getattr(event, "by", None)
            if by is not None:
                assert (by == PLAYER) == (players[event.seat] is not None)


def test_plan_splits_the_hand_into_legal_plays():
    pool = [r for r in range(15) for _ in range(COPIES[r])]
    rng = random.Random(3)
    for _ in range(300):
        ruleset = RULESETS[rng.choice(RULESET_NAMES)]
        held = rng.sample(pool, rng.choice([1, 4, 9, 17, 25, 33]))
        counts = tuple(held.count(r) for r in range(15))
        bomb_cap = rng.choice([None, 0, 1, 2])
        locked = frozenset()
        if rng.random() < 0.3:
            locked, bomb_cap = (
                frozenset(r for unit in report_units(counts, ruleset) for r in unit),
                None,
            )
        p = plan(counts, bomb_cap, locked, ruleset.joker_bomb)
        total = [0] * 15
        for combo in p.combos:
            verify_play(counts, combo.counts, ruleset=ruleset, bombs_left=bomb_cap, locked=locked)
            total = [a + b for a, b in zip(total, combo.counts)]
        assert tuple(total) == counts


@pytest.mark.parametrize(
    "hand, plays",
    [
        ("34567", ["34567"]),
        ("3456789TJQKA", ["3456789TJQKA"]),
        ("3334445566", ["3334445566"]),
        ("33355", ["33355"]),
        ("3335577", ["33355", "77"]),
        ("33445566", ["33445566"]),
        ("4444K", ["4444", "K"]),
        ("3456777789", ["3456789", "777"]),
    ],
)
def test_plan_uses_few_plays(hand, plays):
    assert sorted(c.ranks for c in plan(parse_ranks(hand)).combos) == sorted(plays)


# --- what the bot sees ----------------------------------------------------------------


def test_the_bot_reads_only_its_seat_view():
    assert list(inspect.signature(BotPolicy.act).parameters) == ["self", "view"]
    names = {f.name for f in fields(SeatView)}
    # The seat's own hand; the bottom (its own, as landlord); the landlord's hand only after
    # 摊打; the reported cards and the play on the table, which everyone sees.
    card_fields = {"hand", "bottom", "landlord_hand", "reported_cards", "lead_cards", "marked_card"}
    assert "hands" not in names
    assert {n for n in names if "hand" in n or "card" in n or n == "bottom"} <= card_fields | {
        "show_hand"
    }


def test_hidden_cards_do_not_change_the_decision():
    """At every turn of a few hands, deal the cards the acting seat cannot see differently
    among the other seats (same counts): its view, and so the bot's decision, stay the same."""
    table = MatchSettings.build("shanghai-platform")
    bot = BotPolicy()
    rng = random.Random(11)
    checked = 0
    for i in range(6):
        log: list = []
        state = apply(initial_state, CreateMatch("hidden", table), log)
        for s in range(4):
            state = apply(state, TakeSeat(s, None, bot=True), log)
        state = apply(state, DealHand(seed("hidden", i)), log)
        while state.phase != ENDED:
            me = state.turn
            visible_landlord = state.landlord is not None and (state.show_hand or state.locked)
            hidden = [
                s for s in range(4) if s != me and not (visible_landlord and s == state.landlord)
            ]
            pool = [card for s in hidden for card in state.hands[s]]
            rng.shuffle(pool)
            hands = list(state.hands)
            at = 0
            for s in hidden:
                n = len(state.hands[s])
                hands[s], at = tuple(pool[at : at + n]), at + n
            other = state.replace(hands=tuple(hands))
            view, other_view = seat_view(state, me), seat_view(other, me)
            assert view == other_view
            command = bot.act(view)
            assert BotPolicy().act(other_view) == command
            checked += 1
            state = apply(state, command, log)
    assert checked > 200


# --- sensible play ---------------------------------------------------------------------


def test_farmer_does_not_overtake_a_partner_who_is_winning():
    hand = "37Q99KKK"
    # Seat 1 (a farmer, like us) leads a 5; the landlord (seat 0, 20 cards) acts after us.
    partner = make_view(hand, seat=2, landlord=0, lead="5", lead_seat=1)
    assert isinstance(BotPolicy().act(partner), Pass)
    # The same 5 from the landlord is beaten, with the cheapest single of the plan.
    landlord = make_view(hand, seat=2, landlord=0, lead="5", lead_seat=0)
    assert played_ranks(BotPolicy().act(landlord)) == "7"


def test_farmer_goes_out_over_a_partner():
    view = make_view("KK", seat=2, landlord=0, lead="99", lead_seat=1)
    assert played_ranks(BotPolicy().act(view)) == "KK"


def test_keeps_a_bomb_instead_of_bombing_a_low_single_early():
    hand = "3344556688883"  # only the bomb (or breaking it) beats a 7
    early = make_view(hand, seat=1, landlord=0, cards_left=(30, 13, 25, 25), lead="7", lead_seat=0)
    assert isinstance(BotPolicy().act(early), Pass)
    # When the landlord is about to go out, the bomb goes.
    late = make_view(hand, seat=1, landlord=0, cards_left=(2, 13, 25, 25), lead="7", lead_seat=0)
    assert played_ranks(BotPolicy().act(late)) == "8888"


def test_landlord_does_not_lead_a_single_to_a_farmer_with_one_card():
    view = make_view("3577999", seat=0, landlord=0, cards_left=(7, 1, 20, 20))
    command = BotPolicy().act(view)
    assert len(command.cards) != 1
    # With no farmer close to going out, the weakest play of the plan leads.
    relaxed = make_view("3577999", seat=0, landlord=0, cards_left=(7, 20, 20, 20))
    assert played_ranks(BotPolicy().act(relaxed)) == "3"


def test_leads_the_whole_hand_when_it_is_one_play():
    view = make_view("3334445566", seat=0, landlord=0)
    assert played_ranks(BotPolicy().act(view)) == "3334445566"


def test_bids_by_hand_strength():
    strong = first_bid_view("3333444455556666BR22AAKKQ")
    weak = first_bid_view("3456789TJQKA23579J468TQKA")
    assert BotPolicy().act(strong) == Bid(0, 3, acting_party(strong))
    assert BotPolicy().act(weak) == Bid(0, 0, acting_party(weak))
    # Only bids above the highest so far are legal.
    outbid = make_view(
        "3456789TJQKA23579J468TQKA",
        seat=1,
        phase=BIDDING,
        bids=(2, None, None, None),
        bid=None,
        landlord=None,
    )
    assert BotPolicy().act(outbid).value in (0, 3)


def test_show_hand_only_with_an_overwhelming_hand():
    kwargs = dict(
        seat=0, landlord=0, phase=SHOW_HAND, bids=(3, None, None, None), bid=3, first_bid_three=True
    )
    overwhelming = make_view("333344445555666677778888BBRR22AAA", **kwargs)
    ordinary = make_view("33445566778899TTJJQQKKAA2BR34567", **kwargs)
    assert BotPolicy().act(overwhelming) == ShowHand(0, True, acting_party(overwhelming))
    assert BotPolicy().act(ordinary) == ShowHand(0, False, acting_party(ordinary))


def test_report_weighs_the_sure_win_against_playing_on():
    hand = "77777777" + "333344445566889TJQKA2"  # one unit: the eight 7s
    kwargs = dict(seat=0, landlord=0, phase=REPORT, bids=(1, 0, 0, 0), bid=1)
    # Bombs double: playing on doubles the stake, every bomb doubles it again, and a lost
    # hand costs nothing, so it beats the sure 3 × N.
    view = make_view(hand, **kwargs)
    assert BotPolicy().act(view) == Report(0, "play", acting_party(view))
    # Two units (the 7s and the four jokers) and no bomb doubling: playing on can win at
    # most 2 × 3 stakes, 不打 wins 3 × 2 for sure.
    two_units = "77777777BBRR" + "33334445566889TJQKA"
    table = MatchSettings.build("shanghai-platform", bombs_double=False)
    view = make_view(two_units, table=table, **kwargs)
    assert BotPolicy().act(view) == Report(0, "no_play", acting_party(view))


def test_plays_the_reported_bomb_whole():
    """After 报到 then 打, the reported rank leaves the hand only as its whole bomb."""
    view = make_view(
        "777777734",
        seat=0,
        landlord=0,
        cards_left=(9, 20, 20, 20),
        locked=frozenset({rank_index("7")}),
        lead="K",
        lead_seat=1,
    )
    command = BotPolicy().act(view)
    assert isinstance(command, Pass) or played_ranks(command) == "7777777"
    view = make_view(
        "777777734",
        seat=0,
        landlord=0,
        cards_left=(9, 1, 20, 20),
        locked=frozenset({rank_index("7")}),
        lead="K",
        lead_seat=1,
    )
    assert played_ranks(BotPolicy().act(view)) == "7777777"


# --- against the random baseline -------------------------------------------------------


class ByRole:
    """Random bidding (so that every configuration gets the same landlords), then the
    landlord's or the farmers' policy."""

    name = "by-role"

    def __init__(self, landlord, farmers, bidder):
        self.landlord, self.farmers, self.bidder = landlord, farmers, bidder

    def act(self, view):
        if view.phase == BIDDING:
            return self.bidder.act(view)
        return (self.landlord if view.seat == view.landlord else self.farmers).act(view)


def landlord_win_rate(
    ruleset: str, landlord_bot: bool, farmers_bot: bool, hands: int = 300
) -> float:
    table = MatchSettings.build(ruleset)
    bot = BotPolicy()
    wins = 0
    for i in range(hands):
        bidder = RandomPolicy(random.Random(i))
        player = RandomPolicy(random.Random(10_000 + i))
        policy = ByRole(bot if landlord_bot else player, bot if farmers_bot else player, bidder)
        _, state = play_hand(table, seed("baseline", i), [policy] * 4)
        wins += state.winner == "landlord"
    return wins / hands


@pytest.mark.slow
@pytest.mark.parametrize("ruleset", RULESET_NAMES)
def test_bot_beats_the_random_baseline(ruleset):
    random_landlord = landlord_win_rate(ruleset, False, False)  # about 0.28
    bot_landlord = landlord_win_rate(ruleset, True, False)  # about 1.0
    bot_farmers = 1 - landlord_win_rate(ruleset, False, True)  # about 0.99
    random_farmers = 1 - random_landlord  # about 0.72
    assert bot_landlord >= 0.7 and bot_landlord >= random_landlord + 0.3
    assert bot_farmers >= 0.9 and bot_farmers >= random_farmers + 0.15
