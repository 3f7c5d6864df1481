"""Rules-core benchmark: prints classifications per second and the time to generate all
leads and all replies, on random 33-card (landlord) and 25-card (farmer) hands.

    python benchmarks/rules_bench.py [--hands N] [--seed S]

Targets on the 2-core reference machine: >= 200,000 classifications/s, all leads of a
33-card hand <= 1 ms median, replies <= 0.2 ms median.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from service.rules import DECK, classify, counts_of, legal_moves, legal_plays
from service.rules.errors import InvalidCombination

REPLY_TO = ["7", "99", "JJJ", "45678", "QQKKAA", "777888", "55533", "JJJQQQ4455", "TTTT", "666666"]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def timed(fn, arg) -> float:
    start = time.perf_counter()
    fn(arg)
    return time.perf_counter() - start


def report(label: str, seconds: list[float], extra: str = "") -> None:
    print(
        f"  {label:<34} median {statistics.median(seconds) * 1e3:7.3f} ms   "
        f"p99 {percentile(seconds, 0.99) * 1e3:7.3f} ms{extra}"
    )


def bench_classify(hands: list, rng: random.Random) -> None:
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    leads = [classify(text) for text in REPLY_TO]
    for size in (33, 25):
        hands = [rng.sample(DECK, size) for _ in range(args.hands)]
        counts = [counts_of(hand) for hand in hands]
        print(f"{size}-card hands ({args.hands}):")
        bench_classify(hands[:200], rng)
        lead_times = [timed(lambda c: list(legal_plays(c)), c) for c in counts]
        n_leads = statistics.mean(len(list(legal_plays(c))) for c in counts[:200])
        report("all leads (ranks)", lead_times, f"   ({n_leads:.0f} plays on average)")
        report(
            "all leads (with concrete cards)",
            [timed(lambda h: list(legal_moves(h)), h) for h in hands],
        )
        reply_times = [timed(lambda c: list(legal_plays(c, rng.choice(leads))), c) for c in counts]
        report("all replies to a play (ranks)", reply_times)
        report(
            "all replies (with concrete cards)",
            [timed(lambda h: list(legal_moves(h, rng.choice(leads))), h) for h in hands],
        )


if __name__ == "__main__":
    main()
