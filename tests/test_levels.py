"""The bot levels (service/game/bot/levels.py) and the search of ``hard``
(service/game/bot/search.py): legal to the end of every hand, deterministic from a seed,
blind to the cards its seat cannot see, and a table option."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable

import pytest
from crafted import make_view
from hidden import reshuffled

from service.game import GameError, MatchSettings
from service.game.bot import BotPolicy
from service.game.bot.levels import HARD_VARIANTS, LEVELS, contestant, policy, seat_level
from service.game.bot.search import WIN_WEIGHT, SearchPolicy, sample_hands, worth
from service.game.commands import CreateMatch, DealHand, Disconnect, Play, ShowHand, TakeSeat
from service.game.simulate import apply, dealt, duplicate, play_hand
from service.game.state import BIDDING, ENDED, PLAYING, SHOW_HAND, State, initial_state
from service.game.views import seat_view
from service.rules import counts_of
from service.rules.cards import NUM_RANKS

# Slow: plays many hands to check properties of the engine (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


def seed(label: str, i: int) -> bytes:
    return hashlib.sha256(f"{label}-{i}".encode()).digest()


def searching(samples: int = 12) -> SearchPolicy:
    """``hard`` with a fixed number of deals and no clock, searching every play: its
    decisions depend on the seed and the view alone."""
    return SearchPolicy("test", budget=None, samples=samples, endgame=108)


@pytest.mark.parametrize("ruleset", ["shanghai-platform", "shanghai-local"])
def test_every_level_plays_legal_moves_to_the_end(ruleset):
    """Mixed tables of every level, the search included: ``decide`` refuses any illegal
    command, so each hand reaching its end is the check."""
    table = MatchSettings.build(ruleset)
    levels = {
        "easy": policy("easy", seed="legal"),
        "normal": policy("normal"),
        "hard": searching(3),
    }
    played = Counter()
    for i in range(12):
        seats = [levels[LEVELS[(i + s) % 3]] for s in range(4)]
        events, state = play_hand(table, seed(f"levels-{ruleset}", i), seats)
        assert state.phase == ENDED
        played[state.result.outcome.winner] += 1
    assert sum(played.values()) == 12


def normal_until(label: str, i: int, going_on: Callable[[State], bool]) -> State:
    """A hand dealt from seed ``label``-``i``, normal bots acting while ``going_on``."""
    log: list = []
    table = MatchSettings.build("shanghai-platform")
    state = dealt(table, seed(label, i), log, match_id=label)
    bot = policy("normal")
    while going_on(state):
        state = apply(state, bot.act(seat_view(state, state.turn)), log)
    return state


def mid_hand(i: int, fewest: int) -> State:
    """A hand of normal bots, played until a seat holds ``fewest`` cards or fewer."""
    return normal_until(
        "search",
        i,
        lambda s: s.phase != ENDED and (s.phase != PLAYING or min(map(len, s.hands)) > fewest),
    )


def test_the_search_is_deterministic_from_its_seed_and_blind_to_hidden_cards():
    rng = random.Random(3)
    searched = 0
    for i in range(10):
        for fewest in (10, 6, 3):
            state = mid_hand(i, fewest)
            if state.phase != PLAYING:
                continue
            view = seat_view(state, state.turn)
            hard = searching()
            decision = hard.act(view)
            searched += hard.rounds > 0
            assert searching().act(view) == decision  # the same seed, the same decision
            for _ in range(2):
                other = seat_view(reshuffled(state, state.turn, rng), state.turn)
                assert searching().act(other) == decision
    assert searched >= 10


def at_show_hand(i: int) -> State:
    """A hand of normal bots at its landlord's 摊打 (the first bidder bids 3: 头撂)."""
    return normal_until("show", i, lambda s: s.phase == BIDDING)


def test_the_searched_show_hand_is_deterministic_and_blind_to_hidden_cards():
    """摊打 is searched over deals of the farmers' cards: the farmers' real hands (and
    so the real outcome) do not change it, nor does anything but the view and the seed."""
    rng = random.Random(5)
    searched = 0
    for i in range(6):
        state = at_show_hand(i)
        if state.phase != SHOW_HAND:
            continue
        view = seat_view(state, state.turn)
        hard = searching(8)
        decision = hard.act(view)
        assert isinstance(decision, ShowHand)
        searched += hard.rounds > 0
        assert searching(8).act(view) == decision
        other = seat_view(reshuffled(state, state.turn, rng), state.turn)
        assert searching(8).act(other) == decision
    assert searched >= 4


def test_hard_shows_a_sure_win_and_hides_a_hand_that_showing_would_lose():
    """``normal`` shows both hands (摊打 gains points at their chances). The first wins
    every play-out, shown or not: showing only doubles the win, and ``hard`` shows it.
    The second, shown, loses a quarter of the play-outs it wins hidden (9 of 16 won
    against 13, the farmers playing against its cards): ``hard`` keeps it hidden."""
    normal = policy("normal")
    for deal, shown in ((9, True), (18, False)):
        state = at_show_hand(deal)
        landlord = state.turn
        view = seat_view(state, landlord)
        assert view.phase == SHOW_HAND and view.landlord == landlord
        assert normal.act(view) == ShowHand(landlord, True, "bot")
        assert searching(24).act(view) == ShowHand(landlord, shown, "bot")


def test_sampled_hands_agree_with_everything_the_seat_knows():
    rng = random.Random(9)
    for i in range(6):
        state = mid_hand(i, 12)
        if state.phase != PLAYING:
            continue
        me = state.turn
        view = seat_view(state, me)
        for _ in range(20):
            hands = sample_hands(view, rng)
            assert hands is not None
            assert hands[me] == list(counts_of(state.hands[me]))
            assert [sum(h) for h in hands] == [len(h) for h in state.hands]
            others = [sum(hands[s][r] for s in range(4) if s != me) for r in range(NUM_RANKS)]
            assert tuple(others) == view.unseen


def test_the_table_option_bot_level():
    assert MatchSettings.build().bot_level == "normal"
    assert MatchSettings.build(bot_level="hard").to_json()["bot_level"] == "hard"
    assert MatchSettings.from_json({"ruleset": None, "unit": "1.00"}).bot_level == "normal"
    with pytest.raises(GameError) as refused:
        MatchSettings.build(bot_level="expert")
    assert refused.value.code == "invalid_table"


def test_a_disconnected_player_is_played_at_normal_or_better():
    table = MatchSettings.build(bot_level="easy")
    log: list = []
    state = apply(initial_state, CreateMatch("takeover", table), log)
    state = apply(state, TakeSeat(0, "alice", bot=False), log)
    for s in (1, 2, 3):
        state = apply(state, TakeSeat(s, None, bot=True), log)
    state = apply(state, DealHand(seed("takeover", 0)), log)
    state = apply(state, Disconnect(0, "left"), log)
    assert seat_level(seat_view(state, 0), "easy") == "normal"
    assert seat_level(seat_view(state, 1), "easy") == "easy"
    assert seat_level(seat_view(state, 0), "hard") == "hard"


def test_duplicate_pits_two_levels_on_the_same_deals():
    table = MatchSettings.build("shanghai-platform")
    same = duplicate(6, "dup", table, policy("normal"), policy("normal"))
    # The same player on both sides: every deal gives it back what it took.
    assert same.hands == 12 and same.mean == 0
    easy = duplicate(6, "dup", table, policy("easy", seed="dup"), policy("normal"))
    assert easy.hands == 12 and easy.low <= easy.mean <= easy.high


def test_normal_keeps_a_bomb_that_would_only_double_the_stake():
    """The landlord, 8 cards left, takes the trick with a pair of 2s. Today's bot bombs it
    (the landlord is close to going out); normal, when bombs double, keeps the bomb for
    when it turns the hand, and bombs as before when they do not double."""
    hand = "3457 9JQ TTTT"
    for bombs_double, bombs in ((True, False), (False, True)):
        table = MatchSettings.build("shanghai-platform", bombs_double=bombs_double)
        view = make_view(
            hand.replace(" ", ""), lead="22", lead_seat=0, cards_left=(8, 20, 10, 20), table=table
        )
        assert isinstance(policy("normal").act(view), Play) is bombs
        assert isinstance(BotPolicy().act(view), Play)


def test_pit_plays_the_tables_doubling_asks_for():
    import io

    from service.cli import run_pit

    for doubling, lines in (("yes", ["bombs double"]), ("no", ["bombs do not double"])):
        out = io.StringIO()
        run_pit(2, "ab" * 32, None, ["normal", "normal-thresholds"], 50.0, out, doubling=doubling)
        printed = [line for line in out.getvalue().splitlines() if "shanghai-platform," in line]
        assert [line.split(",")[1].split("  ")[0].strip() for line in printed] == lines


def test_the_variants_of_hard_leave_out_one_ingredient_each():
    """``ddz simulate --pit`` names for the ablation: each is ``hard`` but for what it
    leaves out, and ``hard-before`` is the search as it was (from 70 cards, no
    extension, points alone, 摊打 the bot's)."""
    hard = contestant("hard")
    assert isinstance(hard, SearchPolicy)
    for name in HARD_VARIANTS:
        variant = contestant(name)
        assert isinstance(variant, SearchPolicy)
        differs = [
            what
            for what in ("extend", "endgame", "win_weight", "search_show")
            if getattr(variant, what) != getattr(hard, what)
        ]
        assert len(differs) == (4 if name == "hard-before" else 1)
    before = contestant("hard-before")
    assert isinstance(before, SearchPolicy)
    assert (before.extend, before.endgame, before.win_weight, before.search_show) == (
        None,
        70,
        0,
        False,
    )
    points = contestant("hard-points")
    assert isinstance(points, SearchPolicy) and points.win_weight == 0 < hard.win_weight


def test_hard_prefers_a_likely_win_to_a_long_shot_at_many_bombs():
    """A rating counts wins: as landlord with bombs doubling, a line won 9 times in 10
    without a bomb is worth more to ``hard`` than one won 6 in 10 with three bombs, which
    points alone would prefer (3 × 8 × 0.2 = 4.8 stakes against 3 × 0.8 = 2.4)."""
    landlord = make_view("3", seat=0, landlord=0)

    def expected(win: float, bombs: int, weight: float) -> float:
        return win * worth(landlord, True, bombs, weight) + (1 - win) * worth(
            landlord, False, bombs, weight
        )

    assert expected(0.6, 3, 0.0) > expected(0.9, 0, 0.0)
    assert expected(0.6, 3, WIN_WEIGHT) < expected(0.9, 0, WIN_WEIGHT)
    # A farmer's win and loss weigh a third of the landlord's, as its stake does.
    farmer = make_view("3", seat=2, landlord=0)
    assert worth(farmer, False, 1, WIN_WEIGHT) == 2 + WIN_WEIGHT
    assert worth(farmer, True, 1, WIN_WEIGHT) == -(2 + WIN_WEIGHT)
