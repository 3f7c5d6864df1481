"""How many players this machine carries: the load model of benchmarks/load/locustfile.py
(people, watchers, bot accounts on the ladder, an operator; docs/scaling.md, "A day at
the tables") against ``ddz serve`` as deployed, step after step of more players, with the
generator beside it on the same machine.

    python benchmarks/capacity.py [--steps 500,1000,2000,...] [--ramp S] [--hold S]
                                  [--api N] [--workers N] [--processes N]
                                  [--profile S] [--smoke]

Starts ``ddz serve`` with ``--api`` API processes (one per core by default, as
service/gunicorn_conf.py sizes them) on a PostgreSQL and a Redis of its own (embedded:
a server shared with other work holds the players' streams back), and ``--workers``
workers in all; then Locust in ``--processes`` processes ramps up to each step's users
over ``--ramp`` seconds and holds them ``--hold`` seconds, one step after the other in one
run: a step's users stay for the next, as a day's players would (stopped at each step's
end, they left hundreds of hands to the system, whose bots the next step measured). Over
each hold it prints what the people feel (the p50 and p99 of a decision's acknowledgement
and of ``your_turn``'s delivery, the locustfile's ``SLO`` requests), the requests per
second, every failure, and the CPU of each group of processes in cores (the API
processes, the workers, PostgreSQL, Redis, and the generator itself; measured from each
process's CPU time, nothing estimated or subtracted) beside the machine's whole (which
counts other work on it too). Then: the most users that met the targets (p99 of a
decision's acknowledgement <= 200 ms, of ``your_turn`` <= 300 ms, no failure), the knee
(the last step whose p99s stayed within twice those of the first step), and what saturated
first (the first group to reach 90 % of the cores it can use: one per process for the
single-threaded API processes and workers, the machine's for PostgreSQL, Redis and the
generator).

With ``--profile S``, py-spy reads every API process and worker for ``S`` seconds in the
middle of each hold, and the step's report adds where their time went (each group's
busiest functions of the project's own code, as shares of its busy samples). py-spy's
own CPU is the machine's, not the groups'.

Users are people (90 %), bot accounts (5 %) and watchers (5 %), and one operator.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import command_line, parse
from load.run import (
    ACK,
    GROUPS,
    TARGETS,
    TURN,
    Sampler,
    Service,
    Window,
    generator,
    profile,
    samples,
    service,
    stop,
    stopped_early,
    wait_for,
    window,
)

#: A group reaches saturation at this share of the cores it can use.
SATURATED = 0.9


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--steps", default="500,1000,2000,3000,4000,5000,6000")
    parser.add_argument("--ramp", type=float, default=120.0)
    parser.add_argument("--hold", type=float, default=300.0)
    parser.add_argument("--api", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--pace", type=float, default=1.0, help="think times scaled by this")
    parser.add_argument("--profile", type=float, default=0.0, help="seconds of py-spy a hold")
    args = parse(parser, steps="8", ramp=2.0, hold=10.0, processes=1, pace=0.1, profile=3.0)
    steps = [int(s) for s in args.steps.split(",")]
    cores = os.cpu_count() or 1
    # The smoke run's bots come at once, so that hands are dealt within its seconds.
    settings = {"DDZ_LOBBY_BOTS_AFTER": "1"} if args.smoke else {}
    results: list[tuple[int, Window, dict[str, float], dict[int, float], float]] = []
    with tempfile.TemporaryDirectory(prefix="ddz-cap-") as scratch:
        folder = Path(scratch)
        with service(folder, args.api, args.workers, settings) as running:
            print(
                f"ddz serve: {args.api} API processes, {args.workers} workers, embedded "
                f"PostgreSQL and Redis; Locust in {args.processes} processes; {cores} cores",
                flush=True,
            )
            with Sampler(running) as sampler:
                # One run of the generator climbs every step: a step's users stay for the
                # next (see the locustfile's Day).
                load = generator(
                    running,
                    folder,
                    steps,
                    args.ramp,
                    args.hold,
                    5.0,
                    args.processes,
                    args.pace,
                    every_kind=args.smoke,
                )
                sampler.generators = [load.pid]
                profiled: dict[int, dict[str, list[tuple[str, float]]]] = {}
                spying = threading.Thread(
                    target=spy, args=(running, folder, steps, args, profiled), daemon=True
                )
                if args.profile:
                    spying.start()
                planned = len(steps) * (args.ramp + args.hold)
                try:
                    wait_for(load, planned + 180)
                finally:
                    stop(load)
                if args.profile:
                    spying.join()
                made = samples(folder)
                early = stopped_early(folder, made, planned)
                if early is not None:
                    print(f"Locust stopped early; its log said:\n{early}", flush=True)
                # The run began with its first request (Locust takes a while to start).
                began = made[0].at if made else time.time()
                # Over the whole run: a smoke run, far below any capacity, meets no failure.
                decided = sum(1 for s in made if s.name == ACK)
                failed = [f"{s.kind} {s.name}: {s.failure}" for s in made if s.failure]
                for number, users in enumerate(steps):
                    start = began + hold_starts(number, args)
                    end = start + args.hold
                    held = window(made, start, end)
                    groups, processes, machine = sampler.cpu(start, end)
                    results.append((users, held, groups, processes, machine))
                    report(users, held, groups, processes, machine, cores)
                    for group, ranked in sorted(profiled.get(users, {}).items()):
                        print(
                            f"        profile, {group}: "
                            + "; ".join(f"{share:.1%} {name}" for name, share in ranked[:8]),
                            flush=True,
                        )
            five_hundreds = running.five_hundreds()
    print(f"answers 5xx in the API's log: {five_hundreds}")
    summary(results, cores, args.api, args.workers)
    if args.smoke and not decided:
        sys.exit("the smoke run made no decision: the load model did not play")
    if args.smoke and (failed or five_hundreds):
        sys.exit(
            f"the smoke run met {len(failed)} failures and {five_hundreds} answers 5xx: "
            + "; ".join(sorted(set(failed))[:5])
        )


def hold_starts(number: int, args: argparse.Namespace) -> float:
    """Seconds from the run's start to the hold of its step ``number`` (from 0)."""
    return float(number * (args.ramp + args.hold) + args.ramp)


def spy(
    running: Service,
    folder: Path,
    steps: list[int],
    args: argparse.Namespace,
    profiled: dict[int, dict[str, list[tuple[str, float]]]],
) -> None:
    """The profile of the middle of each step's hold, into ``profiled`` by its users."""
    began = time.monotonic()
    for number, users in enumerate(steps):
        middle = hold_starts(number, args) + (args.hold - args.profile) / 2
        time.sleep(max(0.0, began + middle - time.monotonic()))
        step = folder / f"profile-{users}"
        step.mkdir()
        profiled[users] = profile(running, step, args.profile)


def report(
    users: int,
    held: Window,
    groups: dict[str, float],
    processes: dict[int, float],
    machine: float,
    cores: int,
) -> None:
    felt = " ".join(
        f"{name} p50 {held.felt[name][0]:.0f} p99 {held.felt[name][1]:.0f} ms"
        f" ({held.felt[name][2]:,})"
        if name in held.felt
        else f"{name}: none"
        for name in (ACK, TURN)
    )
    print(
        f"{users:>6} users: {held.per_second:7.1f} requests/s, {len(held.failures)} failures;"
        f" {felt}; {'meets' if held.meets() else 'misses'} the targets",
        flush=True,
    )
    print(
        "        CPU (cores): "
        + ", ".join(f"{g} {groups[g]:.2f}" for g in GROUPS)
        + f"; machine {machine:.2f} of {cores} (everything on it)",
        flush=True,
    )
    busiest = sorted(processes.items(), key=lambda p: -p[1])[:4]
    print("        busiest processes: " + ", ".join(f"{pid} {c:.2f}" for pid, c in busiest))
    for failure in sorted(set(held.failures))[:5]:
        print(f"        failure: {failure}")


def summary(
    results: list[tuple[int, Window, dict[str, float], dict[int, float], float]],
    cores: int,
    api: int,
    workers: int,
) -> None:
    met = [users for users, held, *_ in results if held.meets()]
    print(
        "capacity: "
        + (f"{max(met):,} users met the targets" if met else "no step met the targets")
        + f" (p99 of {ACK} <= {TARGETS[ACK]:.0f} ms, of {TURN} <= {TARGETS[TURN]:.0f} ms,"
        " no failure)"
    )
    first = results[0][1].felt
    knee = results[0][0]
    for users, held, *_ in results:
        if all(
            name in held.felt and held.felt[name][1] <= 2 * max(first.get(name, (0, 1, 0))[1], 1)
            for name in (ACK, TURN)
        ):
            knee = users
        else:
            break
    print(f"knee: {knee:,} users (the last step whose p99s stayed within twice the first's)")
    limits = {"api": api, "workers": workers, "postgres": cores, "redis": 1, "generator": cores}
    for users, _, groups, _, machine in results:
        full = [
            g for g in GROUPS if not math.isnan(groups[g]) and groups[g] >= SATURATED * limits[g]
        ]
        if machine >= SATURATED * cores:
            full.append("the machine")
        if full:
            print(f"saturated first: {', '.join(full)} at {users:,} users")
            break
    else:
        print("saturated first: nothing reached 90 % of its cores")


if __name__ == "__main__":
    main()
