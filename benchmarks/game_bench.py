"""Decider benchmark: prints the time to rebuild a finished hand from its events, the time
of ``decide`` per command, simulated turns per second with the random-legal policy, and
the bot policy's time per decision.

    python benchmarks/game_bench.py [--hands N]

Targets on the 2-core reference machine: rebuild <= 1 ms median, decide <= 100 us median,
>= 20,000 random-legal turns/s on one core (move generation and bidding included), bot
<= 5 ms median per decision.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from service.game import Table, decide, evolve, replay, seat_view
from service.game.bot import BotPolicy
from service.game.policies import RandomPolicy
from service.game.simulate import DECISION_EVENTS, play_hand


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def line(label: str, values: list[float], unit: str = "ms", scale: float = 1e3) -> None:
    print(
        f"{label:<40} median {statistics.median(values) * scale:8.3f} {unit}   "
        f"p99 {percentile(values, 0.99) * scale:8.3f} {unit}   ({len(values):,} samples)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    table = Table.build()

    # Random-legal play, one core: every turn is view + policy (move generation) + decide + evolve.
    seeds = [rng.randbytes(32) for _ in range(args.hands)]
    turns = 0
    started = time.perf_counter()
    finished = []
    for seed in seeds:
        events, state = play_hand(table, seed, [RandomPolicy(rng)] * 4)
        turns += sum(isinstance(e, DECISION_EVENTS) for e in events)
        finished.append(events)
    elapsed = time.perf_counter() - started
    print(
        f"{'random-legal turns per second':<40} {turns / elapsed:12,.0f}   ({turns:,} turns, {args.hands} hands)"
    )

    rebuild = []
    for events in finished:
        start = time.perf_counter()
        replay(events)
        rebuild.append(time.perf_counter() - start)
    line(f"rebuild a finished hand ({statistics.mean(map(len, finished)):.0f} events)", rebuild)

    # decide() alone, on the commands of those hands, each against the state before it.
    decide_times = []
    policy = RandomPolicy(rng)
    for seed in seeds[:100]:
        events, _ = play_hand(table, seed, [policy] * 4)
        state = replay(events[:6])  # created, four seats, dealt
        while state.result is None:
            command = policy.act(seat_view(state, state.turn))
            start = time.perf_counter()
            produced = decide(state, command)
            decide_times.append(time.perf_counter() - start)
            for event in produced:
                state = evolve(state, event)
    line("decide per command", decide_times, "us", 1e6)

    bot = BotPolicy()
    bot_times = []
    for seed in seeds[: max(20, args.hands // 10)]:
        events, _ = play_hand(table, seed, [bot] * 4)
        state = replay(events[:6])
        while state.result is None:
            view = seat_view(state, state.turn)
            start = time.perf_counter()
            command = bot.act(view)
            bot_times.append(time.perf_counter() - start)
            for event in decide(state, command):
                state = evolve(state, event)
    line("bot decision", bot_times)


if __name__ == "__main__":
    main()
