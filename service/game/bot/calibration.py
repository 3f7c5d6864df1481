"""What bidding, 头撂 and 摊打 are worth to the bot, measured: ``ddz simulate --calibrate``.

Hands are played with one policy at every seat. At one bidding decision of each hand
(the first bidder's every other hand, so that 头撂 is measured often), the hand is played
on once after each bid open to the seat, and each bid's points for that seat, less those
of passing, are its gain. Every 摊打 decision met on the way is played on both ways (the
gain of showing), and every 报到 decision on the policy's own line each of its three
ways. Each gain is filed by the seat's estimated chance p of winning as landlord
(:func:`~.evaluation.landlord_chance`, as the bidding and 摊打 reckon it) in bands of
:data:`BAND`; the gains by band, made to rise with p (a stronger hand is never worth less
to bid: pool-adjacent-violators, weighted by the hands in each band), are what
:mod:`.calibrated` holds and the ``normal`` level decides by (:mod:`.evaluation`).

The measured policy's own later decisions stand in the play-outs: the gains are what a
choice is worth given how this bot (and its like at the other seats) goes on to play.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from ...rules import ReportChoice
from ..commands import Bid, Report, ShowHand
from ..decider import applied
from ..policies import Policy, acting_party
from ..settings import MatchSettings
from ..simulate import dealt
from ..state import BIDDING, ENDED, REPORT, SHOW_HAND, State
from ..views import SeatView, seat_view
from .evaluation import BAND, BANDS, SHOW, band_of, bid_chance, bid_key, show_chance


@dataclass
class Measured:
    """Gains of one choice over its alternative, by band of p: hands, sum."""

    hands: list[int] = field(default_factory=lambda: [0] * BANDS)
    sums: list[float] = field(default_factory=lambda: [0.0] * BANDS)

    def add(self, chance: float, gain: float) -> None:
        band = band_of(chance)
        self.hands[band] += 1
        self.sums[band] += gain

    def raw(self) -> list[float | None]:
        return [s / n if n else None for s, n in zip(self.sums, self.hands)]

    def monotone(self) -> tuple[float, ...]:
        """The gain by band, rising with p (pool-adjacent-violators); a band without hands
        takes its nearest neighbour's."""
        blocks: list[list[float]] = []  # [first band, last band, hands, sum]
        for band, (n, s) in enumerate(zip(self.hands, self.sums)):
            if not n:
                continue
            blocks.append([band, band, n, s])
            while len(blocks) > 1 and blocks[-2][3] / blocks[-2][2] > blocks[-1][3] / blocks[-1][2]:
                last = blocks.pop()
                blocks[-1][1] = last[1]
                blocks[-1][2] += last[2]
                blocks[-1][3] += last[3]
        if not blocks:
            return (0.0,) * BANDS
        out: list[float] = []
        for band in range(BANDS):
            block = next((b for b in blocks if b[1] >= band), blocks[-1])
            out.append(round(block[3] / block[2], 2))
        return tuple(out)


def _points(state: State, seat: int, table: MatchSettings) -> float:
    assert state.result is not None
    return float(state.result.settlement.net[seat] / table.unit)


@dataclass
class Calibration:
    """Measures gains over hands (see the module docstring)."""

    table: MatchSettings
    policy: Policy
    measured: dict[str, Measured] = field(default_factory=dict)
    reports: dict[str, list[float]] = field(default_factory=dict)

    def _file(self, key: str, chance: float, gain: float) -> None:
        self.measured.setdefault(key, Measured()).add(chance, gain)

    def finish(self, state: State, branch: bool = True, reports: bool = True) -> State:
        """Plays the hand out by the policy, measuring the 摊打 decisions met on the way
        when ``branch``, and the 报到 decisions when ``reports`` too."""
        while state.phase != ENDED:
            assert state.turn is not None
            view = seat_view(state, state.turn)
            if branch and state.phase == SHOW_HAND:
                self.show(state, view)
            elif branch and reports and state.phase == REPORT:
                self.report(state, view)
            state = applied(state, self.policy.act(view))
        return state

    def show(self, state: State, view: SeatView) -> None:
        seat, by = state.turn, acting_party(view)
        assert seat is not None
        shown, hidden = (
            _points(
                self.finish(applied(state, ShowHand(seat, choice, by)), False), seat, self.table
            )
            for choice in (True, False)
        )
        self._file(SHOW, show_chance(view), shown - hidden)

    def report(self, state: State, view: SeatView) -> None:
        seat, by = state.turn, acting_party(view)
        assert seat is not None
        scores = {
            choice.value: _points(
                self.finish(applied(state, Report(seat, choice, by)), False), seat, self.table
            )
            for choice in ReportChoice
        }
        chosen = self.policy.act(view)
        assert isinstance(chosen, Report)
        for choice, score in scores.items():
            self.reports.setdefault(choice, []).append(score)
        self.reports.setdefault("chosen", []).append(scores[ReportChoice(chosen.value).value])
        self.reports.setdefault("best", []).append(max(scores.values()))

    def bid(self, state: State, view: SeatView) -> None:
        seat, by = state.turn, acting_party(view)
        assert seat is not None
        first = seat == state.marked_seat
        # A 报到 is measured on the policy's own line only: passing and a bid of 1 often
        # lead to the same landlord and the same 报到, which would be counted twice. (A
        # 摊打 follows only the first bidder's 3, met on one line.)
        own = self.policy.act(view)
        assert isinstance(own, Bid)

        def line(value: int) -> State:
            return self.finish(applied(state, Bid(seat, value, by)), reports=value == own.value)

        passed = _points(line(0), seat, self.table)
        for value in view.bid_choices():
            if value:
                after = line(value)
                gain = _points(after, seat, self.table) - passed
                self._file(bid_key(value, first), bid_chance(view, value), gain)

    def hand(self, seed: bytes, rng: random.Random, match_id: str) -> None:
        state = dealt(self.table, seed, [], match_id)
        # The bidding decision to measure: the first bidder's, or a later one.
        at = 0 if rng.random() < 0.5 else rng.randint(1, 3)
        turn = 0
        while state.phase == BIDDING:
            assert state.turn is not None
            view = seat_view(state, state.turn)
            if turn == at:
                self.bid(state, view)
                break
            state = applied(state, self.policy.act(view))
            turn += 1
        else:  # the bidding ended before the chosen turn: measure 摊打 and 报到 only
            self.finish(state)


def calibrate(
    hands: int,
    seed: str,
    table: MatchSettings,
    policy: Policy,
    hand_seed: Callable[[str, int], bytes],
) -> Calibration:
    calibration = Calibration(table, policy)
    rng = random.Random(f"ddz-calibrate:{seed}")
    for i in range(hands):
        calibration.hand(hand_seed(seed, i), rng, f"calibrate-{i}")
    return calibration


def markdown(name: str, calibration: Calibration) -> list[str]:
    """The raw and monotone gains of each choice by band, as a table of docs/bot.md."""
    lines = [f"{name}: gain in points per hand (hands) by estimated chance p, raw → monotone", ""]
    keys = sorted(calibration.measured)
    lines.append("| p | " + " | ".join(keys) + " |")
    lines.append("|---" * (len(keys) + 1) + "|")
    columns = [
        (m.hands, m.raw(), m.monotone()) for m in (calibration.measured[key] for key in keys)
    ]
    for band in range(BANDS):
        cells = [
            "" if raw[band] is None else f"{raw[band]:+.1f} ({hands[band]}) → {smooth[band]:+.1f}"
            for hands, raw, smooth in columns
        ]
        if any(cells):
            lines.append(f"| {band * BAND:.2f} | " + " | ".join(cells) + " |")
    if calibration.reports:
        parts = [
            f"{choice} {statistics.fmean(v):+.2f}"
            for choice, v in sorted(calibration.reports.items())
        ]
        n = len(calibration.reports["chosen"])
        lines.append("")
        lines.append(f"报到 ({n} decisions), mean points per choice: " + ", ".join(parts))
    return lines


def module_source(tables: dict[tuple[str, bool], Calibration], command: str) -> str:
    """The source of :mod:`.calibrated` for these measurements."""
    lines = [
        "# ruff: noqa: E501",
        '"""Gains of bidding and 摊打 by band of the estimated chance p (generated by',
        f'``{command}``; see calibration.py)."""',
        "",
        "#: (ruleset, bombs double) -> choice -> the gain in points per hand by band of p.",
        "# fmt: off",
        "GAINS: dict[tuple[str, bool], dict[str, tuple[float, ...]]] = {",
    ]
    for key, found in sorted(tables.items()):
        lines.append(f'    ("{key[0]}", {key[1]}): {{')
        for choice, m in sorted(found.measured.items()):
            lines.append(f'        "{choice}": {m.monotone()!r},')
        lines.append("    },")
    lines += ["}", "# fmt: on"]
    return "\n".join(lines) + "\n"
