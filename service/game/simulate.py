"""Playing hands with policies on the pure engine (no database): for ``ddz simulate``,
the property tests and the benchmarks."""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from ..rules import SEATS, RulesError
from .actions import DECISIONS, command_of
from .bot import BotPolicy
from .commands import Command, CreateMatch, DealHand, TakeSeat
from .decider import decide
from .errors import GameError
from .events import BOT, EVENT_TYPES, PLAYER, Event
from .policies import Policy, RandomPolicy
from .settings import MatchSettings
from .settlement import LANDLORD
from .state import ENDED, State, evolve, initial_state
from .views import seat_view, view

#: The events that are a seat's decision (a turn).
DECISION_EVENTS = tuple(EVENT_TYPES[command.name] for command in DECISIONS)
#: Called before each turn; may return extra commands (a disconnect, a resume) to apply first.
Interrupt = Callable[[State], Sequence[Command]]


@runtime_checkable
class Speaker(Protocol):
    """A player that speaks the API's documents instead of the policies' objects: an engine
    (docs/bot-protocol.md). It is given the seat's JSON view (``view(state, seat)``, what
    ``GET /v1/matches/{id}`` shows that seat, with the actions it is offered) and answers a
    command body (``{"action": ..., ...}``); at the end of the hand it is shown the seat's
    final view."""

    name: str

    def answer(self, document: dict[str, Any]) -> dict[str, Any]:
        """The command body for the seat of ``document``, whose turn it is."""

    def hand_over(self, document: dict[str, Any]) -> None:
        """The hand ``document`` (the seat's view once it has ended) is over."""


#: Who may sit at a seat of a simulated hand.
Player = Policy | Speaker


class Refused(Exception):
    """A :class:`Speaker`'s answer the rules refuse (malformed, or not legal now): the
    speaker's fault, not the simulation's."""

    def __init__(self, speaker: Speaker, seat: int, action: dict[str, Any], error: RulesError):
        super().__init__(f"{speaker.name} at seat {seat} answered {action!r}: {error}")
        self.speaker, self.seat, self.action, self.error = speaker, seat, action, error


def _speak(state: State, seat: int, speaker: Speaker, log: list[Event]) -> State:
    action = speaker.answer(view(state, seat))
    try:
        try:
            command = command_of(action, seat, BOT if state.is_system(seat) else PLAYER)
        except (KeyError, TypeError) as exc:  # no "action", or one that is no name
            raise GameError(f"malformed action: {exc!r}", "invalid_command") from None
        return apply(state, command, log)
    except RulesError as exc:
        raise Refused(speaker, seat, action, exc) from None


def apply(state: State, command: Command, log: list[Event]) -> State:
    for event in decide(state, command):
        state = evolve(state, event)
        log.append(event)
    return state


def dealt(
    table: MatchSettings,
    seed: bytes,
    log: list[Event],
    match_id: str = "simulated",
    players: Sequence[str | None] = (None, None, None, None),
) -> State:
    """A match on ``table`` with its seats taken (``None``: a bot seat) and the hand dealt
    from ``seed``, its events added to ``log``."""
    state = apply(initial_state, CreateMatch(match_id, table), log)
    for seat, player in enumerate(players):
        state = apply(state, TakeSeat(seat, player, bot=player is None), log)
    return apply(state, DealHand(seed), log)


def play_hand(
    table: MatchSettings,
    seed: bytes,
    policies: Sequence[Player],
    *,
    match_id: str = "simulated",
    players: Sequence[str | None] = (None, None, None, None),
    interrupt: Interrupt | None = None,
) -> tuple[list[Event], State]:
    """Plays one hand to its end. A seat with a player id in ``players`` is a player's
    seat (its policy acts as the player, or as the system once it is disconnected);
    ``None`` makes a bot seat. A :class:`Speaker` is shown each seat it plays once the
    hand has ended. Returns the events and the final state."""
    log: list[Event] = []
    state = dealt(table, seed, log, match_id, players)
    # Once per hand: a runtime protocol check walks the class's attributes, and per turn it
    # was a fifth of a simulated turn.
    speakers: list[Speaker | None] = []
    deciders: list[Policy | None] = []
    for acting in policies:
        if isinstance(acting, Speaker):
            speakers.append(acting)
            deciders.append(None)
        else:
            speakers.append(None)
            deciders.append(acting)
    while state.phase != ENDED:
        if interrupt is not None:
            for command in interrupt(state):
                state = apply(state, command, log)
        turn = state.turn
        assert turn is not None  # until the hand ends, a seat is always to act
        speaker = speakers[turn]
        if speaker is not None:
            state = _speak(state, turn, speaker, log)
        else:
            policy = deciders[turn]
            assert policy is not None
            state = apply(state, policy.act(seat_view(state, turn)), log)
    for seat, told in enumerate(speakers):
        if told is not None:
            told.hand_over(view(state, seat))
    return log, state


def hand_seed(seed: str, index: int) -> bytes:
    """The deal seed of hand ``index`` of a simulation run from ``seed``: a fixed function,
    so a run can be repeated hand by hand."""
    return hashlib.sha256(f"ddz-simulate:{seed}:{index}".encode()).digest()


@dataclass
class Tally:
    """Figures over simulated hands."""

    hands: int = 0
    landlord_wins: int = 0
    multiplier_total: Fraction = Fraction(0)
    bombs: int = 0
    reports: int = 0
    first_bid_threes: int = 0
    turns: int = 0
    seconds: float = 0.0

    def add(self, events: Sequence[Event], state: State) -> None:
        result = state.result
        assert result is not None, "a tally adds ended hands"
        self.hands += 1
        factors = result.outcome.factors
        self.landlord_wins += result.outcome.winner == LANDLORD
        self.multiplier_total += result.settlement.multiplier
        self.bombs += factors.bombs
        self.reports += factors.report is not None
        self.first_bid_threes += factors.first_bid_three
        self.turns += sum(isinstance(e, DECISION_EVENTS) for e in events)


def matchup(
    hands: int, seed: str, table: MatchSettings, policies: Callable[[int], Sequence[Policy]]
) -> list[tuple[list[Event], State, Sequence[Policy]]]:
    """Plays ``hands`` hands, hand ``i`` with ``policies(i)`` at the four seats."""
    played: list[tuple[list[Event], State, Sequence[Policy]]] = []
    for i in range(hands):
        seats = policies(i)
        events, state = play_hand(table, hand_seed(seed, i), seats, match_id=f"sim-{seed}-{i}")
        played.append((events, state, seats))
    return played


#: Where the first player sits in each of a deal's two hands of a duplicate match; the
#: second takes the other seats. Each seat is played once by each side.
DUPLICATE_SEATS = ((0, 2), (1, 3))


def seatings(contestants: int) -> tuple[tuple[int, ...], ...]:
    """Who sits where in each hand of a deal, as each seat's contestant (0 is the first):
    so that the luck of the cards cancels out, each contestant plays each seat equally
    often. Two: the duplicate's two hands (:data:`DUPLICATE_SEATS`, partners across the
    table). Four: every seating (24 hands). Three: every seating of each, one taking two
    seats in turn (36 hands)."""
    if contestants == 2:
        return tuple(
            tuple(0 if s in seats else 1 for s in range(SEATS)) for seats in DUPLICATE_SEATS
        )
    if contestants == SEATS:
        return tuple(itertools.permutations(range(SEATS)))
    if contestants == 3:
        return tuple(
            seating
            for twice in range(3)
            for seating in sorted(set(itertools.permutations(sorted([0, 1, 2, twice]))))
        )
    raise ValueError(f"2 to {SEATS} contestants at one table, not {contestants}")


@dataclass(frozen=True)
class DealPlayed:
    """One deal played at every seating (:func:`seatings`): each contestant's points per
    hand (in stakes of the table's unit, from all its seats, exact), and its hands as
    landlord and seat-hands as a farmer, each with the wins."""

    deal: int
    points: tuple[Fraction, ...]
    landlord_hands: tuple[int, ...]
    landlord_wins: tuple[int, ...]
    farmer_seats: tuple[int, ...]
    farmer_wins: tuple[int, ...]


#: Told of each hand a deal has played: the deal's index, the hand's index among its
#: seatings, the seating, the hand's events and its final state.
HandPlayed = Callable[[int, int, tuple[int, ...], list[Event], State], None]


def run_id_of(seed: str) -> str:
    """The matches' ids name the run without its seed: a Speaker is shown its match's id,
    and the seed would give it every deal (hand_seed is no secret), all four hands and the
    bottom."""
    return hashlib.sha256(f"ddz-duplicate-run:{seed}".encode()).hexdigest()[:16]


def play_deal(
    deal: int,
    seed: str,
    table: MatchSettings,
    players: Sequence[Player],
    *,
    on_hand: HandPlayed | None = None,
) -> DealPlayed:
    """Plays deal ``deal`` of the run ``seed`` once at each seating of ``players``. A
    :class:`Speaker` sits as a player (named ``name#seat``: one player per seat), a policy
    as a bot."""
    count = len(players)
    points = [Fraction(0)] * count
    landlord_hands, landlord_wins = [0] * count, [0] * count
    farmer_seats, farmer_wins = [0] * count, [0] * count
    hands = seatings(count)
    run_id = run_id_of(seed)
    for hand, seating in enumerate(hands):
        policies = [players[c] for c in seating]
        events, state = play_hand(
            table,
            hand_seed(seed, deal),
            policies,
            match_id=f"dup-{run_id}-{deal}-{hand}",
            players=[
                f"{p.name}#{s}" if isinstance(p, Speaker) else None for s, p in enumerate(policies)
            ],
        )
        if on_hand is not None:
            on_hand(deal, hand, seating, events, state)
        result = state.result
        assert result is not None and state.landlord is not None
        landlord_won = result.outcome.winner == LANDLORD
        for seat, c in enumerate(seating):
            points[c] += Fraction(result.settlement.net[seat]) / Fraction(table.unit)
            if seat == state.landlord:
                landlord_hands[c] += 1
                landlord_wins[c] += landlord_won
            else:
                farmer_seats[c] += 1
                farmer_wins[c] += not landlord_won
    return DealPlayed(
        deal,
        tuple(p / len(hands) for p in points),
        tuple(landlord_hands),
        tuple(landlord_wins),
        tuple(farmer_seats),
        tuple(farmer_wins),
    )


@dataclass(frozen=True)
class Duplicate:
    """What a duplicate match found: the first player's points per hand (in units of the
    table's stake, from all its seats) against the second, with a 95 % confidence
    interval over the deals (a normal approximation)."""

    deals: int
    hands: int
    mean: float
    low: float
    high: float
    #: Each player's (hands won, hands played) as landlord and as a farmer (each farmer
    #: seat a hand): a rating counts these, not the points.
    landlord: tuple[tuple[int, int], tuple[int, int]]
    farmer: tuple[tuple[int, int], tuple[int, int]]


def interval(per_deal: Sequence[Fraction]) -> tuple[float, float, float]:
    """The mean of the deals' points and its 95 % confidence interval (a normal
    approximation; none with one deal, which has no spread to measure)."""
    if not per_deal:
        return 0.0, 0.0, 0.0
    mean = float(sum(per_deal, Fraction(0)) / len(per_deal))
    spread = (
        statistics.stdev(map(float, per_deal)) / math.sqrt(len(per_deal))
        if len(per_deal) > 1
        else 0.0
    )
    return mean, mean - 1.96 * spread, mean + 1.96 * spread


def duplicate(
    deals: int, seed: str, table: MatchSettings, first: Player, second: Player
) -> Duplicate:
    """Plays each of ``deals`` deals twice, the two players swapping seats
    (:data:`DUPLICATE_SEATS`): the luck of the cards cancels out, what is left is play
    and bidding. The hands are zero-sum at a table without rake, so two equal players
    come out at exactly 0."""
    played = [play_deal(i, seed, table, (first, second)) for i in range(deals)]
    return Duplicate(
        deals,
        deals * len(DUPLICATE_SEATS),
        *interval([d.points[0] for d in played]),
        landlord=_record([(d.landlord_wins, d.landlord_hands) for d in played]),
        farmer=_record([(d.farmer_wins, d.farmer_seats) for d in played]),
    )


def _record(
    deals: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Two players' (won, played) summed over the deals' (wins, hands) per player."""
    first, second = (
        (sum(wins[c] for wins, _ in deals), sum(hands[c] for _, hands in deals)) for c in (0, 1)
    )
    return first, second


def won_share(wins: int, out_of: int) -> str:
    """Hands won of hands played, as a reader wants it."""
    return f"{wins / out_of:.1%} ({wins} of {out_of})" if out_of else "n/a (0 of 0)"


def _random(seed: str, hand: int, seat: int) -> RandomPolicy:
    return RandomPolicy(random.Random(f"{seed}:{hand}:{seat}"))


def win_rates(hands: int, seed: str, table: MatchSettings) -> dict[str, tuple[float, int]]:
    """The bot against the random-legal baseline, as (win rate, hands it is measured on):
    the bot as landlord against random farmers (one bot seat, taken when it wins the
    bidding), bot farmers against a random landlord (three bot seats), and the baseline
    of random landlords against random farmers."""
    bot = BotPolicy()
    baseline = matchup(hands, seed, table, lambda i: [_random(seed, i, s) for s in range(SEATS)])
    one_bot = matchup(
        hands,
        seed,
        table,
        lambda i: [bot if s == i % SEATS else _random(seed, i, s) for s in range(SEATS)],
    )
    three_bots = matchup(
        hands,
        seed,
        table,
        lambda i: [_random(seed, i, s) if s == i % SEATS else bot for s in range(SEATS)],
    )

    def rate(
        played: list[tuple[list[Event], State, Sequence[Policy]]],
        keep: Callable[[State, Sequence[Policy]], bool],
        won: Callable[[State], bool],
    ) -> tuple[float, int]:
        kept = [(state, seats) for _, state, seats in played if keep(state, seats)]
        return (
            sum(won(state) for state, _ in kept) / len(kept) if kept else float("nan"),
            len(kept),
        )

    def bot_landlord(state: State, seats: Sequence[Policy]) -> bool:
        assert state.landlord is not None  # every ended hand had a landlord
        return seats[state.landlord] is bot

    landlord_won = lambda state: state.result.outcome.winner == LANDLORD  # noqa: E731
    farmers_won = lambda state: state.result.outcome.winner != LANDLORD  # noqa: E731
    return {
        "random landlord vs random farmers": rate(baseline, lambda s, p: True, landlord_won),
        "bot landlord vs random farmers": rate(one_bot, bot_landlord, landlord_won),
        "bot farmers vs random landlord": rate(
            three_bots, lambda s, p: not bot_landlord(s, p), farmers_won
        ),
    }
