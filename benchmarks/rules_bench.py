"""Rules-core benchmark: prints classifications per second and the time to generate all
leads and all replies, on random 33-card (landlord) and 25-card (farmer) hands.

    python benchmarks/rules_bench.py [--hands N] [--seed S] [--smoke]

Targets on the 2-core reference machine: >= 200,000 classifications/s, all leads of a
33-card hand <= 1 ms median, replies <= 0.2 ms median.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

from common import command_line, parse, spread

from service.rules import DECK, Card, classify, counts_of, legal_moves, legal_plays
from service.rules.errors import InvalidCombination

REPLY_TO = ["7", "99", "JJJ", "45678", "QQKKAA", "777888", "55533", "JJJQQQ4455", "TTTT", "666666"]


T = TypeVar("T")


def timed(fn: Callable[[T], object], arg: T) -> float:
    start = time.perf_counter()
    fn(arg)
    return time.perf_counter() - start


def bench_classify(hands: list[list[Card]], rng: random.Random) -> None:
    """Both the plays a hand really makes (valid) and random subsets (mostly invalid)."""
    legal = [play.counts for hand in hands for play in legal_plays(counts_of(hand))]
    subsets = []
    for hand in hands:
        for _ in range(50):
            subsets.append(counts_of(rng.sample(hand, rng.randint(1, 12))))
    for label, sample in (("legal plays", legal), ("random subsets", subsets)):
        start = time.perf_counter()
        for counts in sample:
            try:
                classify(counts)
            except InvalidCombination:
                pass
        elapsed = time.perf_counter() - start
        print(f"  classify {label:<25} {len(sample) / elapsed:12,.0f} /s  ({len(sample):,} sets)")


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--hands", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parse(parser, hands=20)
    rng = random.Random(args.seed)
    leads = [classify(text) for text in REPLY_TO]
    for size in (33, 25):
        hands = [rng.sample(DECK, size) for _ in range(args.hands)]
        counts = [counts_of(hand) for hand in hands]
        print(f"{size}-card hands ({args.hands}):")
        bench_classify(hands[:200], rng)
        lead_times = [timed(lambda c: list(legal_plays(c)), c) for c in counts]
        n_leads = statistics.mean(len(list(legal_plays(c))) for c in counts[:200])
        spread("  all leads (ranks)", lead_times, extra=f"   ({n_leads:.0f} plays on average)")
        spread(
            "  all leads (with concrete cards)",
            [timed(lambda h: list(legal_moves(h)), h) for h in hands],
        )
        reply_times = [timed(lambda c: list(legal_plays(c, rng.choice(leads))), c) for c in counts]
        spread("  all replies to a play (ranks)", reply_times)
        spread(
            "  all replies (with concrete cards)",
            [timed(lambda h: list(legal_moves(h, rng.choice(leads))), h) for h in hands],
        )


if __name__ == "__main__":
    main()
