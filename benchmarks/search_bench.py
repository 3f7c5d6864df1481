"""What the search's choices are worth, decision by decision, on the true cards.

    python benchmarks/search_bench.py [--hands N] [--ruleset R] [--no-doubling]
                                      [--confidence C] [--budget-ms MS] [--smoke]

Plays hands with ``normal`` at every seat. At each play where ``hard`` would search, it
searches (the budget counted in CPU time, so the machine's load does not change the
search); where it leaves the ``normal`` choice, both choices are played out from the
real cards, by ``normal`` at every seat, and the difference in the seat's points is the
choice's gain. Far tighter than a duplicate match (the rest of the hand is the same on
both sides), it says whether the search's departures are right, not what they are worth
over a whole match of ``hard`` against ``normal`` (``ddz simulate --pit``).
"""

from __future__ import annotations

import math
import statistics
import time

from common import command_line, parse

from service.game import Table, decide, evolve, replay, seat_view
from service.game.bot.levels import NORMAL_STYLE
from service.game.bot.policy import BotPolicy, SeatPlan
from service.game.bot.search import DEFAULT_BUDGET, SearchPolicy
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
    args = parse(parser, hands=10, budget_ms=20)
    table = Table.build(args.ruleset, bombs_double=not args.no_doubling)
    normal = BotPolicy(style=NORMAL_STYLE)
    budget = args.budget_ms / 1000
    hard = SearchPolicy(
        "search-bench",
        budget=budget,
        base=normal,
        clock=time.process_time,
        confidence=args.confidence,
    )
    gains: list[float] = []
    searched = 0
    started = time.process_time()
    for i in range(args.hands):
        events, _ = play_hand(table, hand_seed("search-bench", i), [normal] * 4)
        state = replay(events[:6])  # created, four seats, dealt
        while state.result is None:
            view = seat_view(state, state.turn)
            if state.phase == PLAYING:
                seat = SeatPlan(view)
                chosen = normal.lead(seat) if view.lead is None else normal.follow(seat)
                candidates = hard.candidates(seat, chosen)
                if len(candidates) > 1 and sum(seat.cards) <= hard.endgame:
                    searched += 1
                    pick = hard.search(view, candidates, time.process_time() + budget)
                    if pick != candidates[0]:
                        true = [list(counts_of(h)) for h in state.hands]
                        ours = hard.evaluate(view, true, pick)
                        theirs = hard.evaluate(view, true, candidates[0])
                        assert ours is not None and theirs is not None  # no deadline
                        gains.append(ours - theirs)
            for event in decide(state, normal.act(view)):
                state = evolve(state, event)
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
        f"; {time.process_time() - started:.0f} CPU-seconds"
    )


if __name__ == "__main__":
    main()
