"""The policy: :class:`BotPolicy`, which turns a seat's view into a command, and the
knobs of its play (:class:`Style`).

* **Lead** the weakest play of the plan (long plays a little earlier, bombs last); cash
  the plays nobody can beat first when only one weak play would be left; help a partner
  farmer holding one or two cards with a single or a pair; while an opponent holds
  n ≤ 5 cards, avoid leading plays of n cards.
* **Follow** an opponent with the reply that lowers the plan's cost the most, i.e. the
  cheapest play that beats without breaking the plan, or pass when every reply would
  break it, unless the opponent is about to go out. Bombs are kept for when they
  matter: the opponent is close to going out (or, for farmers, the landlord takes the
  trick with a strong play while its hand shrinks), or a bomb leaves a hand we can play
  out. A farmer does not overtake a partner farmer who is winning the trick, unless
  that lets it go out at once, or the landlord, close to going out, still acts in this
  trick and could beat the partner while we hold a play it cannot beat.
* **Bid, 摊打, 报到** as :mod:`.evaluation` estimates.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...rules import Combination, legal_plays
from ...rules.cards import COPIES, NUM_RANKS, Counts, counts_of
from ...rules.combinations import FULL_HOUSE, JOKER_BOMB, PAIR, SEQUENCE_TYPES, SINGLE
from ...rules.errors import RulesError
from ...rules.moves import pick_cards, verify_play
from ..actions import by_default
from ..commands import Bid, Pass, Play, Report, SeatCommand, ShowHand
from ..policies import acting_party
from ..state import BIDDING, PLAYING, REPORT, SHOW_HAND
from ..views import SeatView
from . import evaluation
from .planning import Plan, plan, rank_value, subtract


def lead_key(c: Combination) -> float:
    """Which play of the plan to lead first: low plays first, long ones a little earlier."""
    value = c.top if c.type in SEQUENCE_TYPES else rank_value(c.top)
    return value - 0.3 * (c.size - 1)


def _strength(c: Combination) -> float:
    """How hard a play is to beat, from 0 to 1."""
    if c.type in SEQUENCE_TYPES:
        return c.top / 14.0
    return rank_value(c.top) / 17.0


def _bomb_key(c: Combination) -> tuple[int, int]:
    return (99, 99) if c.type is JOKER_BOMB else (c.size, c.top)


class SeatPlan:
    """What one decision needs to know about the table, from the seat's view."""

    def __init__(
        self, view: SeatView, counts: Counts | None = None, cards: list[int] | None = None
    ):
        """``counts`` (the hand by rank) and ``cards`` (each seat's card count), when
        given, spare working them out from the view: the search's play-outs build a seat
        plan at every turn."""
        # The bot plays for a seat, and play begins once there is a landlord.
        assert view.seat is not None and view.landlord is not None
        self.view = view
        self.me = view.seat
        self.landlord = view.landlord
        self.is_landlord = self.me == self.landlord
        if cards is None:
            cards = [info.cards if info is not None else 0 for info in view.seats]
        self.cards = cards
        others = [s for s in range(len(cards)) if s != self.me]
        self.opponents = others if self.is_landlord else [self.landlord]
        self.partners = [] if self.is_landlord else [s for s in others if s != self.landlord]
        self.ruleset = view.table.ruleset
        self.locked = view.locked
        self.bombs_left = view.bombs_left
        self.counts = counts_of(view.hand) if counts is None else counts
        self.size = sum(self.counts)
        self.min_opponent = min(self.cards[s] for s in self.opponents)
        self.max_opponent = max(self.cards[s] for s in self.opponents)

    def plan(self, counts: Counts | None = None) -> Plan:
        return plan(
            self.counts if counts is None else counts,
            self.bombs_left,
            self.locked,
            self.ruleset.joker_bomb,
        )

    def plays(self, lead: Combination | None) -> list[Combination]:
        return list(
            legal_plays(
                self.counts,
                lead,
                ruleset=self.ruleset,
                bombs_left=self.bombs_left,
                locked=self.locked,
            )
        )

    def opponent_pool(self, count_cards: bool = False) -> Counts:
        """Cards an opponent may hold: the landlord's hand when shown (摊打) and we are a
        farmer, else every card we do not hold (``count_cards``: and have not seen played)."""
        view = self.view
        if not self.is_landlord and view.landlord_hand is not None:
            return counts_of(view.landlord_hand)
        if count_cards:
            return view.unseen
        return tuple(COPIES[r] - self.counts[r] for r in range(NUM_RANKS))

    def safe(self, combo: Combination, pool: Counts) -> bool:
        """Whether no opponent can beat the play without a bomb."""
        if combo.type.is_bomb:
            return True
        if combo.size > self.max_opponent:
            return True
        for _ in legal_plays(pool, combo, ruleset=self.ruleset, bombs_left=0):
            return False
        return True


@dataclass(frozen=True)
class Style:
    """The knobs of the play (card counts are the opponents' cards left)."""

    #: Follow an opponent when the best reply lowers the plan's cost by at least this.
    farmer_threshold: float = 0.3
    landlord_threshold: float = 0.0
    #: Prefer stronger replies (harder to beat) by this much per unit of strength.
    farmer_block: float = 0.0
    landlord_block: float = 0.3
    #: Reply with the best non-bomb play whatever it breaks, when the landlord holds at
    #: most this many cards (as a farmer) / the trick's leader does (as landlord).
    farmer_urgent: int = 8
    landlord_urgent: int = 6
    #: Bomb when the trick's leader holds at most this many cards (as landlord), or the
    #: landlord does (as farmer)…
    farmer_bomb: int = 8
    #: …or at most this many, when it takes the trick with a strong play (a bomb, a play
    #: of five cards or more, or one of at least ``strong_play`` strength, see _strength).
    farmer_bomb_on_strong: int = 20
    strong_play: float = 0.8
    landlord_bomb: int = 5
    #: Take over a partner's trick (with a play the landlord cannot beat) when the
    #: landlord holds at most this many cards.
    farmer_reinforce: int = 6
    #: When leading, avoid plays of n cards while an opponent holds n ≤ this many cards.
    lead_danger: int = 5
    #: Count cards: an opponent may hold only the cards not yet played (the view's
    #: ``unseen``), not every card we do not hold.
    count_cards: bool = False
    #: When bombs double the stake, a bomb that does not win the hand at once is played
    #: only while the opponent holds at most this many cards (None: the thresholds above).
    stake_bomb: int | None = None
    #: (bid, estimated chance of winning as landlord it takes), highest bid first.
    bid_thresholds: tuple[tuple[int, float], ...] = evaluation.BID_THRESHOLDS
    #: 摊打 when the estimated chance of winning as landlord reaches this.
    show_threshold: float = evaluation.SHOW_HAND_THRESHOLD
    #: Bid and 摊打 by the gains measured for the table (calibrated.py), where measured,
    #: instead of by the thresholds above.
    by_points: bool = False


class BotPolicy:
    """A deterministic rule-based policy (see the module docstring); sees only its view."""

    name = "bot"

    def __init__(self, rng: random.Random | None = None, style: Style | None = None):
        self.rng = rng  # unused: the bot is deterministic
        self.style = style or Style()

    # -- the protocol ----------------------------------------------------------------

    def act(self, view: SeatView) -> SeatCommand:
        seat, by = view.seat, acting_party(view)
        assert seat is not None  # a policy acts for the seat whose turn it is
        style = self.style
        if view.phase == BIDDING:
            if style.by_points:
                return Bid(seat, evaluation.bid_by_points(view, style.bid_thresholds), by)
            return Bid(seat, evaluation.bid(view, style.bid_thresholds), by)
        if view.phase == SHOW_HAND:
            if style.by_points:
                return ShowHand(seat, evaluation.show_by_points(view, style.show_threshold), by)
            return ShowHand(seat, evaluation.show_hand(view, style.show_threshold), by)
        if view.phase == REPORT:
            return Report(seat, evaluation.report(view), by)
        if view.phase != PLAYING:
            return by_default(view.phase, seat, by)
        return self.play(view)

    # -- playing ------------------------------------------------------------------------

    def play(self, view: SeatView) -> SeatCommand:
        seat = SeatPlan(view)
        try:
            combo = self.lead(seat) if view.lead is None else self.follow(seat)
        except RulesError:  # never expected; fall back to any legal play
            combo = None if view.lead is not None else next(iter(seat.plays(None)))
        return self.command(seat, combo)

    def command(self, seat: SeatPlan, combo: Combination | None) -> SeatCommand:
        view = seat.view
        by = acting_party(view)
        if combo is None:
            if view.lead is None:  # the leader may not pass
                combo = min(seat.plays(None), key=lead_key)
            else:
                return Pass(seat.me, by)
        cards = pick_cards(view.hand, combo.counts)
        try:
            verify_play(
                view.hand,
                cards,
                view.lead,
                ruleset=seat.ruleset,
                bombs_left=seat.bombs_left,
                locked=seat.locked,
            )
        except RulesError:
            fallback = seat.plays(view.lead)
            if view.lead is not None:
                return Pass(seat.me, by)
            cards = pick_cards(view.hand, min(fallback, key=lead_key).counts)
        return Play(seat.me, cards, by)

    def lead(self, seat: SeatPlan) -> Combination:
        p = seat.plan()
        combos = list(p.combos)
        if len(combos) == 1:
            return combos[0]
        others = sorted(p.others, key=lead_key)
        bombs = sorted(p.bombs, key=_bomb_key)
        if not others:
            return bombs[0]
        pool = seat.opponent_pool(self.style.count_cards)
        safe = [c for c in others if seat.safe(c, pool)] if len(others) <= 4 else []
        if safe and len(others) - len(safe) <= 1:
            # Only one weak play would be left: cash the sure plays first.
            weak = [c for c in others if c not in safe]
            if not weak:
                return others[0]
            return max(safe, key=lead_key)
        # Help a partner farmer who is about to go out.
        if seat.partners and seat.cards[seat.landlord] > 2:
            short = min(seat.cards[s] for s in seat.partners)
            if short == 1:
                singles = [c for c in others if c.type is SINGLE]
                if singles:
                    return singles[0]
            elif short == 2:
                pairs = [c for c in others if c.type is PAIR]
                if pairs:
                    return pairs[0]
        # An opponent holding n ≤ 5 cards goes out by beating a lead of n cards: lead
        # other sizes while we can.
        danger = {seat.cards[s] for s in seat.opponents if seat.cards[s] <= self.style.lead_danger}
        if danger:
            keep = [c for c in others if c.size not in danger]
            if keep:
                return keep[0]
            if bombs:
                return bombs[0]
            return max(others, key=lead_key)  # lead the strongest of what is left
        return others[0]

    def follow(self, seat: SeatPlan) -> Combination | None:
        view = seat.view
        style = self.style
        lead = view.lead
        assert lead is not None and view.lead_seat is not None  # following: there is a lead
        candidates = seat.plays(lead)
        if not candidates:
            return None
        for c in candidates:
            if c.size == seat.size:
                return c  # go out now
        if view.lead_seat in seat.partners:
            return self.support(seat, candidates)
        leader_cards = seat.cards[view.lead_seat]
        if seat.is_landlord:
            urgent = leader_cards <= style.landlord_urgent or seat.min_opponent <= 3
            critical = leader_cards <= style.landlord_bomb or seat.min_opponent <= 2
            threshold = style.landlord_threshold
        else:
            landlord_cards = seat.min_opponent
            urgent = landlord_cards <= style.farmer_urgent
            # The landlord is close to going out, or takes the trick with a strong play
            # (a bomb, or a play we cannot hope to top otherwise) while its hand shrinks.
            critical = landlord_cards <= style.farmer_bomb or (
                landlord_cards <= style.farmer_bomb_on_strong
                and (lead.type.is_bomb or _strength(lead) >= style.strong_play or lead.size >= 5)
            )
            threshold = style.farmer_threshold
        # The opponent could go out next: it holds three cards or fewer (so no bomb either).
        if seat.is_landlord:
            must_stop = leader_cards <= 3 or seat.min_opponent <= 2
        else:
            must_stop = seat.min_opponent <= 3
        base = seat.plan()
        normal = [c for c in candidates if not c.type.is_bomb]
        bombs = [c for c in candidates if c.type.is_bomb]
        if must_stop:
            # A reply it cannot beat, else a bomb (it holds none), else the best we have.
            pool = seat.opponent_pool(self.style.count_cards)
            safe = [c for c in normal if seat.safe(c, pool)]
            if safe:
                return self.cheapest(seat, safe, base)[0]
            if bombs:
                return self.best_bomb(seat, bombs, base)[0]
        block = style.landlord_block if seat.is_landlord else style.farmer_block
        best, best_value = self.cheapest(seat, normal, base, block)
        if best_value is not None and (urgent or best_value >= threshold):  # a reply exists
            return best
        if not bombs:
            return None
        chosen, after = self.best_bomb(seat, bombs, base)
        rest = after.others
        wins = len(rest) <= 1 or (seat.is_landlord and len(rest) <= len(after.bombs) + 1)
        if wins:
            return chosen
        if style.stake_bomb is not None and seat.ruleset.bombs_double:
            # Every bomb doubles what the hand is worth, to both sides: it has to turn
            # the hand, not merely take a trick.
            critical = (leader_cards if seat.is_landlord else seat.min_opponent) <= style.stake_bomb
        return chosen if critical else None

    def best_bomb(
        self, seat: SeatPlan, bombs: list[Combination], base: Plan
    ) -> tuple[Combination, Plan]:
        """The bomb that hurts the plan least (ties: the smallest), with the plan after it."""
        chosen, chosen_value, chosen_plan = None, 0.0, base
        for c in bombs:
            after = seat.plan(subtract(seat.counts, c.counts))
            value = base.cost - after.cost
            if (
                chosen is None
                or value > chosen_value + 1e-9
                or (abs(value - chosen_value) <= 1e-9 and _bomb_key(c) < _bomb_key(chosen))
            ):
                chosen, chosen_value, chosen_plan = c, value, after
        assert chosen is not None, "best_bomb needs at least one bomb"
        return chosen, chosen_plan

    def cheapest(
        self, seat: SeatPlan, candidates: list[Combination], base: Plan, block: float = 0.0
    ) -> tuple[Combination | None, float | None]:
        """The reply that lowers the plan's cost the most (ties: the weakest), and by how
        much; ``block`` favours strong replies (harder to beat) by that much per unit of
        strength."""
        best, best_score, best_value = None, None, None
        for c in prune(candidates, seat.counts):
            value = base.cost - seat.plan(subtract(seat.counts, c.counts)).cost
            score = value + block * _strength(c) if block else value
            if best_score is None or score > best_score + 1e-9:
                best, best_score, best_value = c, score, value
        return best, best_value

    def support(self, seat: SeatPlan, candidates: list[Combination]) -> Combination | None:
        """A partner farmer is winning the trick: pass, unless the landlord, about to go
        out, still acts in this trick and could beat the partner's play while we hold a
        play that it cannot beat (then take over with the cheapest such play)."""
        view = seat.view
        landlord = seat.landlord
        if seat.cards[landlord] > self.style.farmer_reinforce:
            return None
        n = len(seat.cards)
        assert view.lead is not None and view.lead_seat is not None  # the partner's play
        if (landlord - seat.me) % n >= (view.lead_seat - seat.me) % n:
            return None  # the landlord has passed this trick already
        pool = seat.opponent_pool(self.style.count_cards)
        if view.lead.type.is_bomb or seat.safe(view.lead, pool):
            return None
        safe = [c for c in candidates if not c.type.is_bomb and seat.safe(c, pool)]
        if safe:
            best, _ = self.cheapest(seat, safe, seat.plan())
            return best
        return None


def prune(candidates: list[Combination], counts: Counts) -> list[Combination]:
    """Replies worth weighing: full houses only with the two cheapest pairs for each
    triple (a pair held exactly twice first, then the lowest)."""
    out = []
    pairs_for: dict[int, list[Combination]] = {}
    for c in candidates:
        if c.type is FULL_HOUSE:
            pairs_for.setdefault(c.top, []).append(c)
        else:
            out.append(c)
    for t, houses in pairs_for.items():

        def key(c: Combination, t: int = t) -> tuple[int, int]:
            q = next(r for r, n in enumerate(c.counts) if n == 2 and r != t)
            return (counts[q] != 2, q)

        out += sorted(houses, key=key)[:2]
    return out
