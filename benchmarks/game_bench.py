"""Decider benchmark: prints the time to rebuild a finished hand from its events, the time
of ``decide`` per command, simulated turns per second with the random-legal policy (on
the full engine, and on the search's play-out engine from the first play), the turns per
second of the search's play-outs, and the time per decision of the bot levels.

    python benchmarks/game_bench.py [--hands N] [--smoke]

Turns per second are given per CPU-second too: on a shared machine the wall clock counts
the other processes' time. The peer engine (noword/rlcard) is measured by
benchmarks/rlcard_bench.py. The first line says whether the rules' hot modules run
compiled, as the deployment runs them: run it with the interpreter of
``bin/compiled-venv`` for those figures, with ``.venv``'s for the interpreted sources.

Targets on the 2-core reference machine: rebuild <= 1 ms median, decide <= 100 us median,
the full engine's random-legal turns (move generation and bidding included) >= 3x the
peer's turns per CPU-second and the play-out engine >= 3x the peer's play turns
(rlcard_bench.py, run alternately with this; measured 3.5-3.6x and 18x compiled, 2.9x and
11x interpreted, see docs/bot.md), bot <= 5 ms median per decision, hard within 300 ms at p99
(its budget, extended to 250 ms for an undecided choice).
"""

from __future__ import annotations

import importlib.machinery
import random
import statistics
import time
from dataclasses import replace

from common import command_line, parse, percentiles, spread

from service.game import MatchSettings, decide, evolve, replay, seat_view
from service.game.bot import BotPolicy
from service.game.bot.levels import policy as level_policy
from service.game.bot.search import (
    DEFAULT_BUDGET,
    MAX_BUDGET,
    Player,
    SearchPolicy,
    random_playout,
    rollout,
    sample_hands,
)
from service.game.commands import ShowHand
from service.game.events import Event, Passed, Played
from service.game.policies import Policy, RandomPolicy
from service.game.simulate import DECISION_EVENTS, apply, dealt, play_hand
from service.game.state import BIDDING, PLAYING, SHOW_HAND, State
from service.rules import counts_of, moves

#: Deals whose 摊打 the benchmark times (one decision each), and the deals of the hidden
#: cards each is played out on, hidden and shown.
SHOW_HAND_DEALS, SHOW_HAND_WORLDS = 40, 16


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--hands", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parse(parser, hands=2)
    rng = random.Random(args.seed)
    table = MatchSettings.build()
    compiled = moves.__file__ is not None and moves.__file__.endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES)
    )
    print(f"rules: {'compiled (mypyc)' if compiled else 'interpreted'}, from {moves.__file__}")

    # Random-legal play, one core: every turn is view + policy (move generation) + decide + evolve.
    seeds = [rng.randbytes(32) for _ in range(args.hands)]
    turns = 0
    started, cpu = time.perf_counter(), time.process_time()
    finished = []
    for seed in seeds:
        events, state = play_hand(table, seed, [RandomPolicy(rng)] * 4)
        turns += sum(isinstance(e, DECISION_EVENTS) for e in events)
        finished.append(events)
    rate(
        "random-legal turns per second",
        turns,
        time.perf_counter() - started,
        time.process_time() - cpu,
        f"{args.hands} hands",
    )

    # The same random-legal play on the search's play-out engine (service/game/bot/search.py
    # Position: counts, the seats' bomb limits and reported ranks; tests/test_playouts.py
    # checks it against the full engine), from the first play of those hands: the engine
    # the search affords its play-outs with. rlcard_bench.py prints the peer's play turns.
    starts = []
    for events in finished:
        first = next((i for i, e in enumerate(events) if isinstance(e, (Played, Passed))), None)
        if first is not None:
            state = replay(events[:first])
            hands = [list(counts_of(h)) for h in state.hands]
            starts.append(SearchPolicy.position(seat_view(state, state.turn), hands))
    turns = 0
    started, cpu = time.perf_counter(), time.process_time()
    for position in starts:
        random_playout(position, rng)
        turns += position.turns
    rate(
        "random-legal play turns/s (play-outs)",
        turns,
        time.perf_counter() - started,
        time.process_time() - cpu,
        f"{len(starts)} hands from their first play",
    )

    rebuild = []
    for events in finished:
        start = time.perf_counter()
        replay(events)
        rebuild.append(time.perf_counter() - start)
    spread(f"rebuild a finished hand ({statistics.mean(map(len, finished)):.0f} events)", rebuild)

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
    spread("decide per command", decide_times, "us", 1e6)

    bot = BotPolicy()
    spread("bot decision", decision_times(bot, table, seeds[: max(20, args.hands // 10)]))

    # The search's play-outs: hidden hands sampled from a seat's view, played out greedily
    # on counts (the engine of the hard level).
    positions = []
    search = SearchPolicy("bench", budget=None, samples=1)
    for seed in seeds[:50]:
        events, _ = play_hand(table, seed, [bot] * 4)
        state = replay(events[:6])
        while state.result is None:
            if state.phase == PLAYING and len(state.history) % 7 == 0:
                positions.append(seat_view(state, state.turn))
            for event in decide(state, bot.act(seat_view(state, state.turn))):
                state = evolve(state, event)
    normal = level_policy("normal")
    assert isinstance(normal, BotPolicy)
    for players, what in ((False, "greedy"), (True, "the normal bot")):
        played = 0
        started, cpu = time.perf_counter(), time.process_time()
        for round_ in range(max(1, args.hands // 50) if not players else 1):
            for view in positions:
                sampled = sample_hands(view, random.Random(round_))
                assert sampled is not None
                position = search.position(view, sampled)
                rollout(position, Player(view, normal) if players else None)
                played += position.turns
        rate(
            "play-out turns per second (search)",
            played,
            time.perf_counter() - started,
            time.process_time() - cpu,
            f"{what}, on counts",
        )

    for level in ("normal", "hard"):
        times = decision_times(level_policy(level, seed="bench"), table, seeds[:6])
        label = f"{level} decision"
        if level == "hard":
            label += f" ({DEFAULT_BUDGET * 1e3:.0f} ms budget, to {(MAX_BUDGET or 0) * 1e3:.0f})"
        spread(label, times, extra="; " + percentiles(times))
        if level == "hard":
            # The decisions the search weighed (the others: forced, or not played).
            searched = [t for t in times if t >= 0.01]
            if searched:
                spread("  searched (10 ms or more)", searched, extra="; " + percentiles(searched))

    # 摊打 comes once a hand, to the landlord after 头撂, and its search plays whole hands
    # out: its own line, its budget and times in CPU time (apart from the machine's load).
    # And what showing costs: deals of the hidden cards played out from the landlord's
    # lead, by normal at every seat, with the hand hidden and shown.
    hard = level_policy("hard", seed="bench", clock=time.process_time)
    assert isinstance(hard, SearchPolicy)
    normal = level_policy("normal")
    assert isinstance(normal, BotPolicy)
    times, playouts, shown, normal_shows = [], [], 0, 0
    won = {False: 0, True: 0}
    for seed in seeds[:SHOW_HAND_DEALS]:
        showing = at_show_hand(table, seed, normal)
        if showing is None:
            continue
        view = seat_view(showing, showing.turn)
        cpu = time.process_time()
        command = hard.act(view)
        times.append(time.process_time() - cpu)
        playouts.append(hard.played)
        shown += isinstance(command, ShowHand) and command.value
        by_normal = normal.act(view)
        normal_shows += isinstance(by_normal, ShowHand) and by_normal.value
        for _ in range(SHOW_HAND_WORLDS):
            world = sample_hands(view, rng)
            assert world is not None
            for show in (False, True):
                root = replace(view, landlord_hand=view.hand) if show else view
                outcome = rollout(SearchPolicy.position(view, world), Player(root, normal))
                won[show] += outcome is not None and outcome[0]
    if times:
        spread(
            "hard 摊打 decision (CPU)",
            times,
            extra=f"; {percentiles(times)}; play-outs median {statistics.median(playouts):.0f}"
            f"; shown in {shown} of {len(times)} (normal: {normal_shows})",
        )
        print(
            f"  the landlord won {won[False]:,} of {len(times) * SHOW_HAND_WORLDS:,} deals played out hidden,"
            f" {won[True]:,} shown (normal at every seat)"
        )


def at_show_hand(table: MatchSettings, seed: bytes, bidder: Policy) -> State | None:
    """The hand dealt from ``seed`` at its landlord's 摊打 (after 头撂), ``bidder`` bidding
    at every seat; None when the bidding led elsewhere."""
    log: list[Event] = []
    state = dealt(table, seed, log)
    while state.phase == BIDDING:
        state = apply(state, bidder.act(seat_view(state, state.turn)), log)
    return state if state.phase == SHOW_HAND else None


def decision_times(policy: Policy, table: MatchSettings, seeds: list[bytes]) -> list[float]:
    """The policy's time for each decision of hands it plays at all four seats, dealt
    from these seeds."""
    bot = BotPolicy()
    times = []
    for seed in seeds:
        events, _ = play_hand(table, seed, [bot] * 4)
        state = replay(events[:6])
        while state.result is None:
            view = seat_view(state, state.turn)
            start = time.perf_counter()
            command = policy.act(view)
            times.append(time.perf_counter() - start)
            for event in decide(state, command):
                state = evolve(state, event)
    return times


def rate(label: str, turns: int, wall: float, cpu: float, what: str) -> None:
    print(
        f"{label:<40} {turns / wall:12,.0f}   per CPU-second {turns / cpu:10,.0f}"
        f"   ({turns:,} turns, {what})"
    )


if __name__ == "__main__":
    main()
