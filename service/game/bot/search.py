"""Search from the seat's own view: :class:`SearchPolicy`, the ``hard`` level.

At each play with a choice (from the first, :data:`ENDGAME`) it weighs a few candidate
plays (the rule-based bot's own choice first) by expected worth. Each round deals the
cards the seat cannot see at random, consistently with everything its view tells (how
many cards each seat holds, the cards played, the landlord's hand after 摊打, the reported
cards it still holds after 报到, each seat's bomb allowance), then plays the hand out
after every candidate (:func:`rollout`, on counts: suits never matter to play) with the
rule-based bot at every seat (:class:`Player`), or a faster greedy policy
(:func:`greedy`). A candidate scores the points the seat wins or loses, each bomb
doubling them when the ruleset says so (a bomb has to win more than the stake it
doubles), and :data:`WIN_WEIGHT` stakes more for a won hand, less for a lost one.
Rounds go on until the time budget is spent (or ``samples`` rounds, for a deterministic
run), a decision still open at its budget going on to :data:`MAX_BUDGET` (where more
deals may change the choice), a candidate clearly worse than the bot's choice dropping
out; a candidate replaces the bot's own choice only when its gain over it, deal by deal,
is two standard errors above zero (three when bombs double). The random dealing comes
from the policy's seed and the public view only, so the same view and seed give the same
decision whatever the hidden cards are.

摊打 is searched the same way (:meth:`SearchPolicy.show_hand`): the hand hidden against
shown, each deal played out from the landlord's lead both ways.
Bidding and 报到 are the rule-based bot's.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TypeVar, cast

from ...rules.cards import NUM_RANKS, SMALL_JOKER, TWO, Card, Counts, counts_of
from ...rules.combinations import PAIR, SINGLE, TRIPLE, Combination, readings
from ...rules.errors import RulesError
from ...rules.moves import legal_plays
from ...rules.report import ReportChoice, report_units
from ...rules.rulesets import Ruleset
from ..commands import SeatCommand, ShowHand
from ..state import PLAYING, SHOW_HAND
from ..views import SeatView
from .planning import subtract
from .policy import BotPolicy, SeatPlan, lead_key, prune

SEATS = 4
#: The default time budget of one decision, in seconds.
DEFAULT_BUDGET = 0.05
#: How far a decision still undecided at its budget (a candidate ahead of the bot's
#: choice but not yet clearly, or with too few deals) may go on, in seconds from its
#: start: the time goes to the decisions where more deals may change the choice.
#: None: no extension.
MAX_BUDGET: float | None = 0.25
#: Candidates weighed per decision, the bot's own choice (and a pass) included.
MAX_CANDIDATES = 4
#: Search only once all hands together hold this many cards or fewer: every play, since
#: the compiled search affords enough play-outs from the first play (108 cards).
ENDGAME = 108
#: How the play-outs play: the greedy policy, or the rule-based bot at every seat.
#: Measured in duplicate against ``normal`` with the true hands in place of sampled
#: ones, searching every play: greedy play-outs lose 2 points per hand, the bot's win 5.
GREEDY_PLAYOUTS, BOT_PLAYOUTS = "greedy", "bot"
#: Leave the bot's choice only when a candidate's mean gain over it is this many standard
#: errors above zero: more when bombs double, since the gains are then heavy-tailed (each
#: bomb doubles them) and a few deals overstate them. Measured on the true hands (each
#: searched choice that left the bot's, played out from the real cards; 150 hands, bombs
#: doubling): with 1 the search lost 3.3 points per hand, with 2 it gained 0.5, with 3
#: and 4 about 2.2.
CONFIDENCE, DOUBLING_CONFIDENCE = 2.0, 3.0
#: What winning the hand is worth beside its points, in stakes (a landlord's three): a
#: rating counts wins, and with bombs doubling the points alone favour a long shot at
#: many bombs over a likely win. Measured on the true cards (docs/bot.md), the weight
#: won more hands at no cost in points.
WIN_WEIGHT = 32.0
#: Fewer deals than this say too little about the spread: the bot's choice stands.
MIN_ROUNDS = 8
_GROUPS = (SINGLE, PAIR, TRIPLE)
#: A choice the search weighs: a play (None: a pass), or whether to show the hand.
_C = TypeVar("_C")
#: What one deal is worth to the seat after a choice (None: out of time).
Evaluate = Callable[[SeatView, list[list[int]], _C, float | None], float | None]


@lru_cache(maxsize=16384)
def _whole(counts: Counts, ruleset: Ruleset) -> Combination | None:
    """The hand as one play (its strongest reading), if it is one."""
    found = readings(counts, ruleset)
    return found[-1] if found else None


@lru_cache(maxsize=4096)
def _group(rank: int, n: int, pair: int | None, ruleset: Ruleset) -> Combination:
    """``n`` cards of ``rank`` (with a pair of ``pair`` for a full house) as a play."""
    counts = [0] * NUM_RANKS
    counts[rank] = n
    if pair is not None:
        counts[pair] = 2
    return readings(tuple(counts), ruleset)[-1]


@dataclass
class Position:
    """A hand in play on counts alone (suits never matter to play): the rollouts' state."""

    hands: list[list[int]]
    sizes: list[int]
    landlord: int
    turn: int
    lead: Combination | None
    lead_seat: int
    passes: int
    bombs: int
    bombs_left: list[int | None]
    locked: frozenset[int]  # the landlord's reported ranks
    ruleset: Ruleset
    turns: int = 0  # plays and passes made in this position so far

    def locks(self, seat: int) -> frozenset[int]:
        return self.locked if seat == self.landlord else frozenset()

    def plays(self, seat: int) -> Iterator[Combination]:
        """The seat's legal plays now (it leads when ``lead`` is None), as the engine's."""
        return legal_plays(
            tuple(self.hands[seat]),
            self.lead,
            ruleset=self.ruleset,
            bombs_left=self.bombs_left[seat],
            locked=self.locks(seat),
        )

    def apply(self, seat: int, play: Combination | None) -> bool:
        """Plays (or passes, ``None``) for ``seat``; True when the seat goes out."""
        self.turns += 1
        if play is None:
            self.passes += 1
            if self.passes == SEATS - 1:
                self.passes, self.lead, self.turn = 0, None, self.lead_seat
            else:
                self.turn = (seat + 1) % SEATS
            return False
        hand = self.hands[seat]
        for r, n in enumerate(play.counts):
            if n:
                hand[r] -= n
        self.sizes[seat] -= play.size
        if play.type.is_bomb:
            self.bombs += 1
            left = self.bombs_left[seat]
            if left is not None:
                self.bombs_left[seat] = left - 1
        self.lead, self.lead_seat, self.passes = play, seat, 0
        self.turn = (seat + 1) % SEATS
        return self.sizes[seat] == 0

    def opponents_min(self, seat: int) -> int:
        if seat == self.landlord:
            return min(self.sizes[s] for s in range(SEATS) if s != seat)
        return self.sizes[self.landlord]


def greedy(position: Position, seat: int) -> Combination | None:
    """The rollouts' fast policy: go out when the hand is one play; lead the lowest group
    (a triple with the lowest pair), keeping bombs; follow an opponent with the first
    reply that beats, bombing only when it is close to going out; let a partner's play
    stand."""
    hand = tuple(position.hands[seat])
    lead = position.lead
    ruleset = position.ruleset
    bombs_left = position.bombs_left[seat]
    locked = position.locks(seat)
    whole = _whole(hand, ruleset)
    can_bomb = bombs_left is None or bombs_left > 0
    if (
        whole is not None
        and (can_bomb if whole.type.is_bomb else not any(hand[r] for r in locked))
        and (lead is None or whole.beats(lead))
    ):
        return whole
    if lead is None:
        return _greedy_lead(hand, locked, ruleset, can_bomb, bombs_left)
    leader = position.lead_seat
    if (leader == position.landlord) == (seat == position.landlord):
        return None  # a partner's play stands
    threat = position.sizes[leader]
    for play in position.plays(seat):
        if play.type.is_bomb:
            return play if threat <= 6 else None
        if play.type in _GROUPS and play.top >= TWO and threat > 10 and seat != position.landlord:
            return None  # a farmer keeps its top cards while the landlord has plenty
        return play
    return None


def _greedy_lead(
    hand: Counts,
    locked: frozenset[int],
    ruleset: Ruleset,
    can_bomb: bool,
    bombs_left: int | None,
) -> Combination:
    pair = next(
        (r for r in range(NUM_RANKS) if hand[r] == 2 and r not in locked),
        None,
    )
    for r in range(NUM_RANKS):
        n = hand[r]
        if n == 0 or r in locked or (n >= 4 and r < SMALL_JOKER):
            continue
        if n == 3:
            return _group(r, 3, pair if pair != r else None, ruleset)
        return _group(r, n, None, ruleset)
    # Only bombs (or reported ranks) left: the smallest legal lead.
    return min(
        legal_plays(hand, None, ruleset=ruleset, bombs_left=bombs_left, locked=locked),
        key=lambda c: (not c.type.is_bomb, c.size, c.top) if can_bomb else (c.size, c.top),
    )


def random_playout(position: Position, rng: random.Random) -> bool:
    """Plays the hand out uniformly at random among the legal plays and the pass (the
    baseline of the engine's speed, and of its agreement with the full engine); True when
    the landlord went out."""
    while True:
        seat = position.turn
        options: list[Combination | None] = list(position.plays(seat))
        if position.lead is not None:
            options.append(None)
        if position.apply(seat, rng.choice(options)):
            return seat == position.landlord


def rollout(
    position: Position,
    player: Player | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[bool, int] | None:
    """Plays the hand out, greedily or with ``player`` at every seat: (the landlord won,
    bombs played in all), or None once ``clock()`` passes ``deadline``."""
    while True:
        if deadline is not None and clock() > deadline:
            return None
        seat = position.turn
        play = greedy(position, seat) if player is None else player.move(position, seat)
        if position.apply(seat, play):
            return seat == position.landlord, position.bombs


@lru_cache(maxsize=65536)
def _cards(counts: Counts) -> tuple[Card, ...]:
    """Cards for counts: suits never matter to the bot's play."""
    return tuple(
        Card(r, "J" if r >= SMALL_JOKER else "S")
        for r in range(NUM_RANKS)
        for _ in range(counts[r])
    )


class _PlayoutView:
    """What the bot's play reads of a seat's view, at one turn of a play-out. A whole
    :class:`SeatView` per turn (its cards, its seat list, the played cards summed over
    every hand) took a third of a play-out's time; the unseen cards and the landlord's
    shown hand are worked out only when the play asks for them."""

    __slots__ = (
        "seat",
        "landlord",
        "table",
        "locked",
        "bombs_left",
        "lead",
        "lead_seat",
        "_hands",
        "_shown",
    )

    def __init__(self, root: SeatView, position: Position, seat: int) -> None:
        self.seat = seat
        self.landlord = position.landlord
        self.table = root.table
        self.locked = position.locks(seat)
        self.bombs_left = position.bombs_left[seat]
        self.lead = position.lead
        self.lead_seat = position.lead_seat if position.lead is not None else None
        self._hands = position.hands
        self._shown = root.landlord_hand is not None

    @property
    def unseen(self) -> Counts:
        """The other seats' cards: in a play-out the bottom is in the landlord's hand."""
        others = [h for s, h in enumerate(self._hands) if s != self.seat]
        return tuple(map(sum, zip(*others)))

    @property
    def landlord_hand(self) -> tuple[Card, ...] | None:
        return _cards(tuple(self._hands[self.landlord])) if self._shown else None


class Player:
    """The rule-based bot as a play-out policy: at each turn, what the seat would see in
    ``position`` (the root view holds what does not change)."""

    def __init__(self, root: SeatView, bot: BotPolicy) -> None:
        self.root = root
        self.bot = bot

    def move(self, position: Position, seat: int) -> Combination | None:
        # The bot's play reads only what _PlayoutView holds (tests/test_playouts.py
        # checks that it plays the same as from the seat's full view).
        view = cast(SeatView, _PlayoutView(self.root, position, seat))
        try:
            chosen = SeatPlan(view, tuple(position.hands[seat]), list(position.sizes))
            if position.lead is None:
                return self.bot.lead(chosen)
            return self.bot.follow(chosen)
        except RulesError:  # never expected; the play-out goes on greedily
            return greedy(position, seat)


def points(view: SeatView, landlord_won: bool, bombs: int) -> float:
    """What the viewing seat wins (or loses, < 0) in stakes, bombs doubling them when the
    ruleset says so (docs/rules.md §5.1-5.2)."""
    me_landlord = view.seat == view.landlord
    share = 3.0 if me_landlord else 1.0
    if landlord_won:
        sign = 1.0 if me_landlord else -1.0
    elif view.report == ReportChoice.PLAY:
        return 0.0  # 报到 then 打: a lost hand costs the landlord nothing
    else:
        sign = -1.0 if me_landlord else 1.0
    factor = 2.0**bombs if view.table.ruleset.bombs_double else 1.0
    return sign * share * factor


def worth(view: SeatView, landlord_won: bool, bombs: int, win_weight: float) -> float:
    """The :func:`points`, and ``win_weight`` stakes more (a landlord's three) for a won
    hand, as many less for a lost one."""
    me_landlord = view.seat == view.landlord
    won = landlord_won == me_landlord
    share = 3.0 if me_landlord else 1.0
    return points(view, landlord_won, bombs) + (win_weight * share if won else -win_weight * share)


def _landlord_known(view: SeatView) -> Counts | None:
    """The landlord's cards a farmer knows it holds: its whole hand after 摊打, else the
    reported cards not played yet."""
    if view.landlord is None or view.seat == view.landlord:
        return None
    if view.landlord_hand is not None:
        return counts_of(view.landlord_hand)
    if not view.reported_cards:
        return None
    known = list(counts_of(view.reported_cards))
    for turn in view.history:
        if turn.seat == view.landlord:
            for card in turn.cards:
                known[card.rank] = max(0, known[card.rank] - 1)
    return tuple(known)


def sample_hands(view: SeatView, rng: random.Random) -> list[list[int]] | None:
    """The hands of every seat, by rank: the viewing seat's own, the others dealt at
    random from the cards it has not seen, consistently with its view. None when the view
    admits no deal (never expected)."""
    me = view.seat
    assert me is not None and view.landlord is not None
    hands: list[list[int]] = [[0] * NUM_RANKS for _ in range(SEATS)]
    hands[me] = list(counts_of(view.hand))
    pool = list(view.unseen)
    need = [info.cards if info is not None else 0 for info in view.seats]
    need[me] = 0
    known = _landlord_known(view)
    if known is not None:
        for r, n in enumerate(known):
            if n > pool[r]:
                return None
            pool[r] -= n
            hands[view.landlord][r] = n
        need[view.landlord] -= sum(known)
    if min(need) < 0 or sum(need) != sum(pool):
        return None
    cards = [r for r in range(NUM_RANKS) for _ in range(pool[r])]
    rng.shuffle(cards)
    at = 0
    for seat in range(SEATS):
        for r in cards[at : at + need[seat]]:
            hands[seat][r] += 1
        at += need[seat]
    return hands


class SearchPolicy:
    """The ``hard`` level: the rule-based bot's play, searched (see the module docstring).
    ``budget``: seconds per decision; ``samples``: at most this many deals per decision
    (with ``budget=None``, exactly this many, so the decision depends on the seed and the
    view alone); ``clock``: what the budget is counted in, wall time by default (a worker's
    turn), or ``time.process_time`` to measure the search apart from the machine's load;
    ``confidence``: standard errors a gain must clear (None: by the ruleset's doubling);
    ``extend``: seconds from the start a decision still undecided at its budget may go on
    (None: none); ``width``: candidates weighed at most; ``win_weight``: what a won hand
    is worth beside its points (:data:`WIN_WEIGHT`); ``search_show``: whether 摊打 is
    searched too (else the bot's)."""

    name = "hard"

    def __init__(
        self,
        seed: str = "",
        *,
        budget: float | None = DEFAULT_BUDGET,
        samples: int = 10_000,
        base: BotPolicy | None = None,
        endgame: int = ENDGAME,
        confidence: float | None = None,
        playouts: str = BOT_PLAYOUTS,
        clock: Callable[[], float] = time.perf_counter,
        extend: float | None = MAX_BUDGET,
        width: int = MAX_CANDIDATES,
        win_weight: float = WIN_WEIGHT,
        search_show: bool = True,
    ) -> None:
        self.seed = seed
        self.search_show = search_show
        self.win_weight = win_weight
        self.width = width
        self.extend = extend
        self.clock = clock
        self.playouts = playouts
        self.endgame = endgame
        self.confidence = confidence
        self.budget = budget
        self.samples = samples
        self.base = base or BotPolicy()
        self.rounds = 0  # the deals weighed at the last searched decision
        self.played = 0  # the play-outs of those deals (every candidate's, counted)

    def act(self, view: SeatView) -> SeatCommand:
        if view.phase == SHOW_HAND and self.search_show:
            return self.show_hand(view)
        if view.phase != PLAYING:
            return self.base.act(view)
        # The budget counts from here: the bot's own choice and the candidates take time too.
        started = self.clock()
        seat = SeatPlan(view)
        chosen = self.base.lead(seat) if view.lead is None else self.base.follow(seat)
        candidates = self.candidates(seat, chosen)
        self.rounds = self.played = 0
        if len(candidates) > 1 and sum(seat.cards) <= self.endgame:
            chosen = self.search(view, candidates, *self.deadlines(started))
        return self.base.command(seat, chosen)

    def show_hand(self, view: SeatView) -> SeatCommand:
        """摊打, searched: the hand stays hidden unless showing it is clearly worth more,
        over deals played out from the landlord's lead both ways. Showing doubles the
        points but lets the farmers play against the landlord's cards, which turns a few
        won hands in a hundred into losses (docs/bot.md): a rating counts wins, and the
        bot's choice by points alone shows nearly every hand when bombs double. A few
        dozen deals cannot tell so rare a loss from chance, so hiding is the choice that
        stands; a hand that wins shown as surely as hidden is shown. Left to the bot when
        报到 comes next, where the reported cards change the play."""
        started = self.clock()
        chosen = self.base.act(view)
        self.rounds = self.played = 0
        if not isinstance(chosen, ShowHand) or report_units(
            counts_of(view.hand), view.table.ruleset
        ):
            return chosen
        show = self.search(
            view, [False, True], *self.deadlines(started), evaluate=self.evaluate_show
        )
        return replace(chosen, value=show)

    def evaluate_show(
        self,
        view: SeatView,
        hands: list[list[int]],
        show: bool,
        deadline: float | None = None,
    ) -> float | None:
        """The worth of one deal played out from the landlord's lead, its hand shown or
        not (None: out of time)."""
        root = replace(view, landlord_hand=view.hand) if show else view
        player = Player(root, self.base) if self.playouts == BOT_PLAYOUTS else None
        outcome = rollout(self.position(view, hands), player, deadline, self.clock)
        if outcome is None:
            return None
        # 摊打 doubles the points (docs/rules.md §5.1), not what the win is worth beside them.
        doubled = points(view, *outcome) if show else 0.0
        return worth(view, *outcome, self.win_weight) + doubled

    def deadlines(self, started: float) -> tuple[float | None, float | None]:
        """The budget's end and the extension's for a decision begun at ``started``."""
        if self.budget is None:
            return None, None
        if self.extend is None:
            return started + self.budget, None
        return started + self.budget, started + max(self.budget, self.extend)

    def candidates(self, seat: SeatPlan, chosen: Combination | None) -> list[Combination | None]:
        """The bot's own choice first; leading, the next plays of its plan; following, a
        pass, the reply that breaks the plan least and the smallest bomb (with doubling
        stakes the bomb is the choice that weighs most)."""
        view = seat.view
        out: list[Combination | None] = [chosen]
        if view.lead is None:
            others = sorted(seat.plan().combos, key=lead_key)
        else:
            out.append(None)
            replies = prune(seat.plays(view.lead), seat.counts)
            base = seat.plan().cost
            normal = [c for c in replies if not c.type.is_bomb]
            normal.sort(key=lambda c: base - seat.plan(subtract(seat.counts, c.counts)).cost)
            normal.reverse()
            bombs = sorted(
                (c for c in replies if c.type.is_bomb),
                key=lambda c: (c.size, c.top),
            )
            others = normal[:1] + bombs[:1] + normal[1:]
        for c in others:
            if len(out) >= self.width:
                break
            if c not in out:
                out.append(c)
        return out

    def search(
        self,
        view: SeatView,
        candidates: Sequence[_C],
        deadline: float | None = None,
        final: float | None = None,
        evaluate: Evaluate[_C] | None = None,
    ) -> _C:
        """The candidate with the clearest gain over the bot's own choice (the first), by
        play-outs of deals sampled from ``view`` until ``deadline`` (or ``final``, when
        the choice is still open then); ``evaluate``: a deal's worth after a candidate
        (by default a play's, :meth:`evaluate`)."""
        worth_of = cast(Evaluate[_C], self.evaluate) if evaluate is None else evaluate
        rng = random.Random(f"{self.seed}:{view.match_id}:{view.version}:{view.seat}")
        confidence = self.confidence
        if confidence is None:
            confidence = DOUBLING_CONFIDENCE if view.table.ruleset.bombs_double else CONFIDENCE
        last = deadline if final is None else final
        # Each candidate's points minus the bot's own choice's, deal by deal: the same
        # deals for every candidate, so the differences are what the choice changes.
        # Per candidate: deals, sum and sum of squares of its gain.
        gains = [[0, 0.0, 0.0] for _ in candidates]
        alive = set(range(1, len(candidates)))
        rounds = self.played = 0
        started = self.clock()
        while rounds < self.samples and alive:
            if deadline is not None and rounds:
                # Stop when one more round (as long as the mean so far) would overrun.
                now = self.clock()
                per_round = (now - started) / rounds
                if now + per_round > deadline:
                    if last is None or now + per_round > last:
                        break
                    if not _open(gains, alive, confidence):
                        break
                    deadline = last  # still open: the decision takes more time
                if rounds == 1 and last is not None and per_round * MIN_ROUNDS > last - started:
                    break  # too few deals would fit to say anything: the bot's choice stands
            hands = sample_hands(view, rng)
            if hands is None:
                break
            weighed = [0, *sorted(alive)]
            results = []
            for i in weighed:
                result = worth_of(view, hands, candidates[i], last)
                if result is None:
                    break  # out of time: this round is left unfinished, and uncounted
                results.append(result)
            self.played += len(results)
            if len(results) < len(weighed):
                break
            rounds += 1
            for i, result in zip(weighed[1:], results[1:]):
                tally = gains[i]
                gain = result - results[0]
                tally[0] += 1
                tally[1] += gain
                tally[2] += gain * gain
                # A candidate clearly no better than the bot's choice gets no more deals:
                # they go to the others.
                if tally[0] >= MIN_ROUNDS // 2 and sum(_mean_and_error(tally)) < 0:
                    alive.discard(i)
        self.rounds = rounds
        best, best_mean = 0, 0.0
        for i in range(1, len(candidates)):
            if gains[i][0] < MIN_ROUNDS:
                continue
            mean, error = _mean_and_error(gains[i])
            # The play-outs are rough: leave the bot's choice only for a clear gain.
            if mean > best_mean and mean > confidence * error:
                best, best_mean = i, mean
        return candidates[best]

    def evaluate(
        self,
        view: SeatView,
        hands: list[list[int]],
        play: Combination | None,
        deadline: float | None = None,
    ) -> float | None:
        """The worth of one deal played out after ``play`` (None: out of time)."""
        outcome = self.outcome(view, hands, play, deadline)
        return None if outcome is None else worth(view, *outcome, self.win_weight)

    def outcome(
        self,
        view: SeatView,
        hands: list[list[int]],
        play: Combination | None,
        deadline: float | None = None,
    ) -> tuple[bool, int] | None:
        """Whether the landlord won one deal played out after ``play``, and its bombs
        (None: out of time)."""
        me = view.seat
        assert me is not None
        position = self.position(view, hands)
        if position.apply(me, play):
            return me == view.landlord, position.bombs
        player = Player(view, self.base) if self.playouts == BOT_PLAYOUTS else None
        return rollout(position, player, deadline, self.clock)

    @staticmethod
    def position(view: SeatView, hands: list[list[int]]) -> Position:
        """The position of ``view`` with these hands (copied), the viewing seat to act."""
        me = view.seat
        assert me is not None and view.landlord is not None
        bombs_left = [info.bombs_left if info is not None else None for info in view.seats]
        bombs_left[me] = view.bombs_left
        return Position(
            hands=[list(h) for h in hands],
            sizes=[sum(h) for h in hands],
            landlord=view.landlord,
            turn=me,
            lead=view.lead,
            lead_seat=view.lead_seat if view.lead_seat is not None else me,
            passes=view.passes,
            bombs=view.bombs,
            bombs_left=bombs_left,
            locked=_landlord_locks(view),
            ruleset=view.table.ruleset,
        )


def _mean_and_error(tally: list[float]) -> tuple[float, float]:
    """The mean gain of a candidate's (deals, sum, sum of squares), and its standard error."""
    n, total, squares = tally
    mean = total / n
    return mean, math.sqrt(max(0.0, squares / n - mean * mean) / max(1.0, n - 1))


def _open(gains: list[list[float]], alive: set[int], confidence: float) -> bool:
    """Whether more deals may still change the choice: a candidate in play has too few
    deals to be chosen, or is ahead of the bot's choice but not yet clearly."""
    for i in alive:
        if gains[i][0] < MIN_ROUNDS:
            return True
        mean, error = _mean_and_error(gains[i])
        if 0 < mean <= confidence * error:
            return True
    return False


def _landlord_locks(view: SeatView) -> frozenset[int]:
    """The landlord's reported ranks (after 报到 then 打), which everyone knows."""
    if view.seat == view.landlord:
        return view.locked
    if view.report == ReportChoice.PLAY:
        return frozenset(card.rank for card in view.reported_cards)
    return frozenset()
