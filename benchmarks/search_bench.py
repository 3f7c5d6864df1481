"""What the search's choices are worth, decision by decision, on the true cards.

    python benchmarks/search_bench.py [--hands N] [--ruleset R] [--no-doubling]
                                      [--confidence C] [--budget-ms MS] [--extend-ms MS]
                                      [--endgame CARDS] [--width N]
                                      [--win-weight W] [--seed S] [--smoke]

Plays hands with ``normal`` at every seat. At each play where ``hard`` would search, it
searches (the budget counted in CPU time, so the machine's load does not change the
search); where it leaves the ``normal`` choice, both choices are played out from the
real cards, by ``normal`` at every seat, and the difference in the seat's points is the
choice's gain (and the difference in its wins, -1, 0 or 1: a rating counts those). Far
tighter than a duplicate match (the rest of the hand is the same on both sides), it says
whether the search's departures are right, not what they are worth over a whole match
of ``hard`` against ``normal`` (``ddz simulate --pit``).

It prints the search's speed too: play-outs per searched decision, and per decision that
ran to its budget (the others stopped early, every other candidate having dropped out),
and play-outs per CPU-second of searching, and the percentiles of a searched decision's
CPU time. The options switch the search's ingredients one at a time (the ablation of
docs/bot.md). Run it with ``PYTHONPATH=$(bin/compiled)`` for
the figures of the compiled search, as deployed (the first line says which runs).
"""

from __future__ import annotations

import importlib.machinery
import math
import statistics
import time

from common import command_line, parse, percentiles

from service.game import MatchSettings, decide, evolve, replay, seat_view
from service.game.bot import search
from service.game.bot.levels import NORMAL_STYLE
from service.game.bot.policy import BotPolicy, SeatPlan
from service.game.bot.search import (
    DEFAULT_BUDGET,
    ENDGAME,
    MAX_BUDGET,
    MAX_CANDIDATES,
    WIN_WEIGHT,
    SearchPolicy,
    points,
)
from service.game.simulate import hand_seed, play_hand
from service.game.state import PLAYING
from service.rules import counts_of


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--hands", type=int, default=150)
    parser.add_argument("--ruleset", default=None)
    parser.add_argument("--no-doubling", action="store_true")
    parser.add_argument("--confidence", type=float, default=None)
    parser.add_argument("--budget-ms", type=float, default=DEFAULT_BUDGET * 1000)
    parser.add_argument(
        "--extend-ms",
        type=float,
        default=None if MAX_BUDGET is None else MAX_BUDGET * 1000,
        help="how far an undecided search may go on (0: not at all)",
    )
    parser.add_argument("--endgame", type=int, default=ENDGAME)
    parser.add_argument("--width", type=int, default=MAX_CANDIDATES, help="candidates at most")
    parser.add_argument(
        "--win-weight", type=float, default=WIN_WEIGHT, help="a won hand's worth, in stakes"
    )
    parser.add_argument("--seed", default="search-bench", help="the hands' seed")
    args = parse(parser, hands=2, budget_ms=20, extend_ms=40)
    compiled = search.__file__ is not None and search.__file__.endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES)
    )
    print(f"search: {'compiled (mypyc)' if compiled else 'interpreted'}, from {search.__file__}")
    table = MatchSettings.build(args.ruleset, bombs_double=not args.no_doubling)
    normal = BotPolicy(style=NORMAL_STYLE)
    budget = args.budget_ms / 1000
    hard = SearchPolicy(
        "search-bench",
        budget=budget,
        base=normal,
        clock=time.process_time,
        confidence=args.confidence,
        endgame=args.endgame,
        extend=args.extend_ms / 1000 if args.extend_ms else None,
        width=args.width,
        win_weight=args.win_weight,
    )
    gains: list[float] = []
    # Per departure: +1 where it won a hand the normal choice lost, -1 the other way.
    wins: list[int] = []
    searched = 0
    # Per searched decision: (play-outs, CPU-seconds).
    decisions: list[tuple[int, float]] = []
    started = time.process_time()
    for i in range(args.hands):
        events, _ = play_hand(table, hand_seed(args.seed, i), [normal] * 4)
        state = replay(events[:6])  # created, four seats, dealt
        while state.result is None:
            view = seat_view(state, state.turn)
            if state.phase == PLAYING:
                seat = SeatPlan(view)
                chosen = normal.lead(seat) if view.lead is None else normal.follow(seat)
                candidates = hard.candidates(seat, chosen)
                if len(candidates) > 1 and sum(seat.cards) <= hard.endgame:
                    searched += 1
                    began = time.process_time()
                    pick = hard.search(view, candidates, *hard.deadlines(began))
                    decisions.append((hard.played, time.process_time() - began))
                    if pick != candidates[0]:
                        true = [list(counts_of(h)) for h in state.hands]
                        ours = hard.outcome(view, true, pick)
                        theirs = hard.outcome(view, true, candidates[0])
                        assert ours is not None and theirs is not None  # no deadline
                        gains.append(points(view, *ours) - points(view, *theirs))
                        landlord = view.seat == view.landlord
                        wins.append((ours[0] == landlord) - (theirs[0] == landlord))
            for event in decide(state, normal.act(view)):
                state = evolve(state, event)
    played = [p for p, _ in decisions]
    # Ran to the budget: stopped by the clock (one more round would have overrun it).
    full = [p for p, seconds in decisions if seconds >= 0.8 * budget]
    rate = sum(played) / max(1e-9, sum(seconds for _, seconds in decisions))
    print(
        f"play-outs per searched decision: mean {statistics.fmean(played or [0]):.1f},"
        f" median {statistics.median(played or [0]):.0f};"
        f" per decision that ran to its {args.budget_ms:.0f} ms budget ({len(full)}):"
        f" mean {statistics.fmean(full or [0]):.1f};"
        f" {rate:,.0f} play-outs per CPU-second of search, {rate * budget:.1f} per budget"
    )
    if decisions:
        times = [seconds for _, seconds in decisions]
        print(f"searched decision, CPU: {percentiles(times)} ({len(times)} decisions)")
    n = len(gains)
    mean = statistics.fmean(gains) if gains else 0.0
    error = statistics.stdev(gains) / math.sqrt(n) if n > 1 else 0.0
    print(
        f"{table.ruleset.name}, bombs {'double' if table.ruleset.bombs_double else 'do not double'}"
        f": {args.hands} hands, {searched} searched plays, {n} left the normal choice"
        f" ({sum(g > 0 for g in gains)} gained, {sum(g < 0 for g in gains)} lost)\n"
        f"  gain per departure {mean:+.2f} [{mean - 1.96 * error:+.2f}, {mean + 1.96 * error:+.2f}]"
        f", per hand (all four seats) {sum(gains) / args.hands:+.3f}"
        f" [{(mean - 1.96 * error) * n / args.hands:+.3f}, {(mean + 1.96 * error) * n / args.hands:+.3f}]"
        f"; {time.process_time() - started:.0f} CPU-seconds\n"
        f"  hands won by departing: {sum(w > 0 for w in wins)}, lost: {sum(w < 0 for w in wins)}"
        f" (a hand's seats counted apart; win weight {args.win_weight:g})"
    )


if __name__ == "__main__":
    main()
