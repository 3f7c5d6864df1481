"""``ddz arena``: engines (and the house bot's levels) measured against each other on the
pure engine (no server), every deal played at each seating (:func:`~service.game.simulate.
seatings`) so that the luck of the cards cancels out: two contestants in duplicate, three or
four at one table; or a round robin or a gauntlet of duplicate matches over more. Deals
may be played in several processes at once (``jobs``), and a run may stop early by a
stopping rule (:class:`StopRule`).

Each seat an engine plays is its own process: a seat sees only its own view
(docs/bot-protocol.md), and two seats of one engine are two players who share nothing.
An engine's failure names the deal, the hand, the seat and the decision, and the records
of the hands played until then are kept.
"""

from __future__ import annotations

import json
import math
import multiprocessing.util
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..game import Event, MatchSettings, State
from ..game.bot.levels import policy
from ..game.record import export
from ..game.simulate import (
    DealPlayed,
    Player,
    Refused,
    interval,
    play_deal,
    seatings,
    won_share,
)
from .engine import (
    Engine,
    EngineError,
    decide_message,
    hand_over_message,
    new_hand_message,
)

#: How long an engine may think per decision in the arena, unless told otherwise.
DEFAULT_MOVE_MS = 2000
#: The level of the house bot an engine plays when it is given no other contestant.
DEFAULT_LEVEL = "normal"
#: The most contestants at one table (a round robin or a gauntlet takes more).
TABLE = 4
#: A stopping rule decides nothing before this many deals.
MIN_DEALS = 10
#: The SPRT's error rates: deciding for H1 when H0 holds, and for H0 when H1 holds.
SPRT_ALPHA = SPRT_BETA = 0.05
TABLE_MODE, ROUND_ROBIN, GAUNTLET = "table", "round-robin", "gauntlet"


@dataclass(frozen=True)
class Contestant:
    """An engine (its command line) or a level of the house bot."""

    engine: str | None = None
    level: str | None = None

    @property
    def label(self) -> str:
        return f"house bot ({self.level})" if self.engine is None else self.engine


class EngineFailed(Exception):
    """An engine failed at a decision of a simulated hand: the error, the seat and what
    was asked (the phase and the match's version)."""

    def __init__(self, error: EngineError, seat: int, phase: str, version: int):
        super().__init__(str(error))
        self.error, self.seat, self.phase, self.version = error, seat, phase, version


class EnginePlayer:
    """An engine at the seats it plays in a simulated hand (a
    :class:`~service.game.simulate.Speaker`): one engine process per seat, started at its
    first decision and told of each hand it plays (``new_hand``, ``hand_over``)."""

    def __init__(
        self, command: str, *, move_ms: int = DEFAULT_MOVE_MS, options: dict[str, Any] | None = None
    ) -> None:
        self.command = command
        self.move_ms = move_ms
        self.options = options or {}
        self.engines: dict[int, Engine] = {}
        self.playing: set[int] = set()  # the seats in a hand (told new_hand, not hand_over)
        self.name = command
        #: The seat and view of the decision asked last.
        self.asked: tuple[int, dict[str, Any]] | None = None

    def engine(self, seat: int) -> Engine:
        engine = self.engines.get(seat)
        if engine is None:
            engine = self.engines[seat] = Engine(
                self.command, host="ddz arena", options=self.options
            )
        if not engine.running:
            engine.start()
            self.name = engine.name
        return engine

    def answer(self, document: dict[str, Any]) -> dict[str, Any]:
        document = as_the_api_shows(document)
        seat = document["seat"]
        self.asked = (seat, document)
        try:
            engine = self.engine(seat)
            if seat not in self.playing:
                engine.tell(new_hand_message(document))
                self.playing.add(seat)
            return engine.decide(decide_message(document, self.move_ms), self.move_ms / 1000)
        except EngineError as exc:
            raise self.failed(exc) from None

    def failed(self, error: EngineError) -> EngineFailed:
        """The failure at the decision asked last."""
        assert self.asked is not None
        seat, document = self.asked
        self.playing.discard(seat)
        return EngineFailed(error, seat, document["phase"], document["version"])

    def hand_over(self, document: dict[str, Any]) -> None:
        seat = document["seat"]
        if seat in self.playing:
            self.playing.discard(seat)
            self.engines[seat].tell(hand_over_message(as_the_api_shows(document)))

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


def as_the_api_shows(document: dict[str, Any]) -> dict[str, Any]:
    """A seat's view as ``GET /v1/matches/{id}`` has it: the turn's ``deadline`` (here
    none: no clock but the engine's) and each seat's ``bot_account`` (an engine's seat is
    a program's, as a bot account's is on the service; the house bot's is the system's)."""
    seats = [{**seat, "bot_account": seat["player"] is not None} for seat in document["seats"]]
    return {**document, "deadline": None, "seats": seats}


@dataclass(frozen=True)
class Setup:
    """What a process needs to play a run's deals (it goes to each process of ``jobs``)."""

    contestants: tuple[Contestant, ...]
    seed: str
    table: MatchSettings
    move_ms: int = DEFAULT_MOVE_MS
    options: dict[str, Any] = field(default_factory=dict)
    records: bool = False

    def players(self) -> list[Player]:
        """The contestants' players, each engine started (the records name it by its
        hello)."""
        players: list[Player] = []
        for c in self.contestants:
            if c.engine is None:
                players.append(policy(c.level or DEFAULT_LEVEL, seed=f"{self.seed}:house"))
            else:
                engine = EnginePlayer(c.engine, move_ms=self.move_ms, options=self.options)
                engine.engine(0)
                players.append(engine)
        return players


#: A hand's record: its file's name and its document.
Record = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Failure:
    """An engine's failure in a run: where it happened, and what it was."""

    code: str
    message: str
    deal: int
    hand: int
    seat: int
    phase: str
    version: int

    def line(self) -> str:
        return (
            f"{self.code}: {self.message} (deal {self.deal}, hand {self.hand}, seat {self.seat},"
            f" the decision in {self.phase} at version {self.version})"
        )


@dataclass(frozen=True)
class Played:
    """What one deal gave: its figures (None when an engine failed in it), the records of
    its hands played, and the failure."""

    deal: int
    result: DealPlayed | None
    records: list[Record]
    failure: Failure | None = None


def play(setup: Setup, players: Sequence[Player], deal: int) -> Played:
    """Plays the deal at every seating; an engine's failure is caught and told."""
    records: list[Record] = []
    hands = [0]

    def on_hand(
        deal: int, hand: int, seating: tuple[int, ...], events: list[Event], _: State
    ) -> None:
        hands[0] = hand + 1
        if setup.records:
            records.append((f"deal-{deal:05d}-{hand}.json", export(events)))

    try:
        return Played(
            deal, play_deal(deal, setup.seed, setup.table, players, on_hand=on_hand), records
        )
    except Refused as exc:
        assert isinstance(exc.speaker, EnginePlayer)
        illegal = exc.speaker.engines[exc.seat].illegal(exc.action, str(exc.error))
        failed = exc.speaker.failed(illegal)
    except EngineFailed as exc:
        failed = exc
    failure = Failure(
        failed.error.code,
        str(failed.error),
        deal,
        hands[0],
        failed.seat,
        failed.phase,
        failed.version,
    )
    return Played(deal, None, records, failure)


# The processes of ``jobs``: each keeps its players (and their engines) for all its deals.
_PROCESS: tuple[Setup, list[Player]] | None = None


def _start(setup: Setup) -> None:
    global _PROCESS
    players = setup.players()
    _PROCESS = (setup, players)
    # At the process's exit (a pool's worker ends without running atexit).
    multiprocessing.util.Finalize(None, _close, args=(players,), exitpriority=10)


def _play(deal: int) -> Played:
    assert _PROCESS is not None
    return play(_PROCESS[0], _PROCESS[1], deal)


def _close(players: Sequence[Player]) -> None:
    for player in players:
        if isinstance(player, EnginePlayer):
            player.close()


@dataclass(frozen=True)
class StopRule:
    """When a run may stop before its deals: an SPRT on the first contestant's points per
    hand (``sprt``: H0 that they are at most ``m0``, H1 that they are at least ``m1``, by
    the normal approximation of the per-deal points) or a target width of its 95 %
    confidence interval (``width``). Neither decides before :data:`MIN_DEALS` deals."""

    sprt: tuple[float, float] | None = None
    width: float | None = None

    def verdict(self, per_deal: Sequence[Fraction]) -> str | None:
        """Why the run stops now, if it does."""
        n = len(per_deal)
        if n < MIN_DEALS:
            return None
        mean, low, high = interval(per_deal)
        if self.width is not None and high - low <= self.width:
            return f"the 95% interval is {high - low:.2f} wide, within {self.width:g}"
        if self.sprt is not None:
            m0, m1 = self.sprt
            variance = statistics.variance(map(float, per_deal))
            if variance > 0:
                llr = n * (m1 - m0) * (2 * mean - m0 - m1) / (2 * variance)
                if llr >= math.log((1 - SPRT_BETA) / SPRT_ALPHA):
                    return f"SPRT: H1, at least {m1:+g} points per hand (LLR {llr:.2f})"
                if llr <= math.log(SPRT_BETA / (1 - SPRT_ALPHA)):
                    return f"SPRT: H0, at most {m0:+g} points per hand (LLR {llr:.2f})"
        return None


def deals_played(setup: Setup, deals: int, jobs: int, stop: StopRule | None) -> Iterator[Played]:
    """The run's deals played, in order, until ``deals`` or a stop (by ``stop`` on the
    first contestant's points, or an engine's failure); in ``jobs`` processes at once,
    each deal on whichever is free."""
    per_deal: list[Fraction] = []

    def stops(played: Played) -> bool:
        if played.result is None:
            return True
        per_deal.append(played.result.points[0])
        return stop is not None and stop.verdict(per_deal) is not None

    if jobs <= 1:
        players = setup.players()
        try:
            for deal in range(deals):
                played = play(setup, players, deal)
                yield played
                if stops(played):
                    return
        finally:
            _close(players)
        return
    with ProcessPoolExecutor(jobs, initializer=_start, initargs=(setup,)) as pool:
        pending: deque[Future[Played]] = deque()
        following = 0
        try:
            while True:
                while following < deals and len(pending) < 2 * jobs:
                    pending.append(pool.submit(_play, following))
                    following += 1
                if not pending:
                    return
                played = pending.popleft().result()
                yield played
                if stops(played):
                    return
        finally:
            for later in pending:
                later.cancel()


@dataclass
class Standing:
    """One contestant's figures over a run."""

    name: str
    points: tuple[float, float, float] = (0.0, 0.0, 0.0)  # mean, 95 % interval
    landlord_hands: int = 0
    landlord_wins: int = 0
    farmer_seats: int = 0
    farmer_wins: int = 0

    def to_json(self) -> dict[str, Any]:
        mean, low, high = self.points
        return {
            "name": self.name,
            "points": {"mean": mean, "low": low, "high": high},
            "landlord": {"hands": self.landlord_hands, "wins": self.landlord_wins},
            "farmer": {"seats": self.farmer_seats, "wins": self.farmer_wins},
        }

    def rates(self) -> str:
        return (
            f"as landlord won {won_share(self.landlord_wins, self.landlord_hands)},"
            f" as farmer won {won_share(self.farmer_wins, self.farmer_seats)}"
        )


@dataclass
class Run:
    """What a run of contestants found: each one's standing over the deals played."""

    names: list[str]
    deals: int = 0
    hands: int = 0
    standings: list[Standing] = field(default_factory=list)
    stopped: str | None = None
    failure: Failure | None = None
    records: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "contestants": self.names,
            "deals": self.deals,
            "hands": self.hands,
            "stopped": self.stopped,
            "failure": None
            if self.failure is None
            else {k: v for k, v in self.failure.__dict__.items()},
            "records": self.records,
            "results": [s.to_json() for s in self.standings],
        }


def run_table(
    setup: Setup,
    names: list[str],
    deals: int,
    *,
    jobs: int = 1,
    stop: StopRule | None = None,
    records: Path | None = None,
) -> Run:
    """Plays ``deals`` deals of the contestants at one table (or until ``stop``, or an
    engine's failure); writes each hand's record into ``records``."""
    run = Run(names)
    results: list[DealPlayed] = []
    hands_a_deal = len(seatings(len(names)))
    for played in deals_played(setup, deals, jobs, stop):
        if records is not None:
            for name, document in played.records:
                with open(records / name, "w", encoding="utf-8") as f:
                    json.dump(document, f, ensure_ascii=False, indent=1)
        run.records += len(played.records)
        if played.result is None:
            run.failure = played.failure
            break
        results.append(played.result)
    run.deals, run.hands = len(results), len(results) * hands_a_deal
    for c, name in enumerate(names):
        run.standings.append(
            Standing(
                name,
                interval([r.points[c] for r in results]),
                sum(r.landlord_hands[c] for r in results),
                sum(r.landlord_wins[c] for r in results),
                sum(r.farmer_seats[c] for r in results),
                sum(r.farmer_wins[c] for r in results),
            )
        )
    if stop is not None and run.failure is None and run.deals < deals:
        run.stopped = stop.verdict([r.points[0] for r in results])
    return run


def _ci(points: tuple[float, float, float], deals: int) -> str:
    mean, low, high = points
    # One deal has no spread to measure: its interval would read as a certainty.
    interval_ = f"95% CI [{low:+.2f}, {high:+.2f}]" if deals > 1 else "95% CI n/a (1 deal)"
    return f"{mean:+.2f}  {interval_}"


@dataclass
class Arena:
    """What an arena found: one run (a table), or one per pairing (a round robin, a
    gauntlet)."""

    mode: str
    table: MatchSettings
    seed: str
    names: list[str]
    runs: list[Run]
    jobs: int = 1
    seconds: float = 0.0

    @property
    def failure(self) -> Failure | None:
        return next((r.failure for r in self.runs if r.failure is not None), None)

    def lines(self) -> list[str]:
        where = f"{self.table.ruleset.name}, seed {self.seed}"
        if self.mode == TABLE_MODE:
            return self._table_lines(self.runs[0], where)
        lines = [f"{self.mode} of {len(self.names)}: {where}"]
        for run in self.runs:
            first, second = run.standings
            lines.append(
                f"  {first.name} against {second.name}: {_ci(first.points, run.deals)}"
                f"  ({run.deals} deals{'; ' + run.stopped if run.stopped else ''})"
            )
        lines.append("points per hand over its pairings (all its seats, in stakes):")
        for name, mean in self.overall():
            lines.append(f"  {name}: {mean:+.2f}")
        return lines

    def _table_lines(self, run: Run, where: str) -> list[str]:
        standings = run.standings
        if len(standings) == 2:
            first, second = standings
            lines = [
                f"{first.name} against {second.name}: {where}",
                f"{run.deals} deal{'s' * (run.deals != 1)}, each played twice with the seats"
                f" swapped ({run.hands} hands)",
                f"points per hand of {first.name} (all its seats, in stakes): "
                + _ci(first.points, run.deals),
            ]
        else:
            names = [s.name for s in standings]
            lines = [
                f"{', '.join(names[:-1])} and {names[-1]} at one table: {where}",
                f"{run.deals} deal{'s' * (run.deals != 1)}, each played at every seating"
                f" ({run.hands} hands)",
                "points per hand (all its seats, in stakes):",
            ]
            lines += [f"  {s.name}: {_ci(s.points, run.deals)}" for s in standings]
        lines += [f"  {s.name}: {s.rates()}" for s in standings]
        if run.stopped:
            lines.append(f"stopped after {run.deals} deals: {run.stopped}")
        return lines

    def overall(self) -> list[tuple[str, float]]:
        """Each contestant's points per hand over its pairings, the best first."""
        total = {name: [0.0, 0] for name in self.names}
        for run in self.runs:
            for standing in run.standings:
                total[standing.name][0] += standing.points[0] * run.deals
                total[standing.name][1] += run.deals
        return sorted(
            ((name, s / n if n else 0.0) for name, (s, n) in total.items()),
            key=lambda item: -item[1],
        )

    def to_json(self) -> dict[str, Any]:
        hands = sum(r.hands for r in self.runs)
        document: dict[str, Any] = {
            "mode": self.mode,
            "ruleset": self.table.ruleset.name,
            "seed": self.seed,
            "contestants": self.names,
            "runs": [r.to_json() for r in self.runs],
            "jobs": self.jobs,
            "seconds": self.seconds,
            "hands_per_second": hands / self.seconds if self.seconds else None,
        }
        if self.mode != TABLE_MODE:
            document["overall"] = [{"name": n, "points": p} for n, p in self.overall()]
        return document


def names_of(contestants: Sequence[Contestant], options: dict[str, Any]) -> list[str]:
    """Each contestant's name: an engine's from its hello (each engine is started once
    here, so that one that cannot start is told before any play), the house bot's by its
    level; names that repeat get their place, ``name (2)``."""
    names = []
    for contestant in contestants:
        if contestant.engine is None:
            names.append(contestant.label)
            continue
        engine = Engine(contestant.engine, host="ddz arena", options=options)
        try:
            engine.start()
        finally:
            engine.close()
        names.append(engine.name)
    return [f"{name} ({i + 1})" if names.count(name) > 1 else name for i, name in enumerate(names)]


def run(
    contestants: Sequence[Contestant],
    deals: int,
    seed: str,
    table: MatchSettings,
    *,
    mode: str = TABLE_MODE,
    move_ms: int = DEFAULT_MOVE_MS,
    options: dict[str, Any] | None = None,
    records: Path | None = None,
    jobs: int = 1,
    stop: StopRule | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Arena:
    """Plays the contestants: at one table (two to four), or in pairs (a round robin:
    every pair; a gauntlet: the first against each other), each pairing a duplicate match
    on the same deals. Writes each hand's record into ``records`` (a directory that
    exists; a pairing's in a directory of its own). An engine that cannot start raises
    its :class:`~service.app.engine.EngineError`; one that fails in play ends the run,
    told in its :attr:`Arena.failure`."""
    options = options or {}
    names = names_of(contestants, options)
    started = clock()
    if mode == TABLE_MODE:
        pairings = [tuple(range(len(contestants)))]
    elif mode == ROUND_ROBIN:
        pairings = [(a, b) for a in range(len(contestants)) for b in range(a + 1, len(contestants))]
    else:
        pairings = [(0, b) for b in range(1, len(contestants))]
    runs = []
    for pairing in pairings:
        where = records
        if records is not None and mode != TABLE_MODE:
            where = records / "-".join(str(c + 1) for c in pairing)
            where.mkdir(exist_ok=True)
        setup = Setup(
            tuple(contestants[c] for c in pairing),
            seed,
            table,
            move_ms,
            options,
            records is not None,
        )
        played = run_table(
            setup, [names[c] for c in pairing], deals, jobs=jobs, stop=stop, records=where
        )
        runs.append(played)
        if played.failure is not None:
            break
    return Arena(mode, table, seed, names, runs, jobs, clock() - started)
