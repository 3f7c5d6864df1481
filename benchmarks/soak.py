"""Whether the service stays flat over an hour: the load model of
benchmarks/load/locustfile.py at a given number of users (70 % of the capacity that
benchmarks/capacity.py found, in the real run) for ``--minutes``, a worker killed once and
an API process restarted once on the way.

    python benchmarks/soak.py --users N [--minutes 60] [--plot docs/soak.svg] [--smoke]

Starts ``ddz serve`` as capacity.py does (``--api`` API processes, ``--workers`` workers in
all, PostgreSQL and Redis of its own), ramps up to ``--users`` over ``--ramp`` seconds and
holds them. A third of the way in it kills a worker (SIGKILL, then starts another, as a
supervisor would: its job in hand is found again by the others); half of the way in it
restarts one API process (SIGTERM: gunicorn starts another; its streams reconnect
elsewhere with ``Last-Event-ID``). It samples every process's memory (PSS) and CPU, and
per ``--window`` seconds the p99 of a decision's acknowledgement and of ``your_turn``'s
delivery, and prints them at each third of the run. At the end, with the users gone and
the hands under way finished: every ended hand settled exactly once, the ledger adding up
to zero (each hand and the whole), no answer 5xx (the API's log) and no failure the
players met, and each group's memory growth over the last two thirds (the target: under 5 %).
Draws memory and the p99s over time into ``--plot`` (SVG).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from common import command_line, parse
from load.run import (
    ACK,
    GROUPS,
    TARGETS,
    TURN,
    Sample,
    Sampler,
    Service,
    Window,
    generator,
    samples,
    service,
    stop,
    stopped_early,
    wait_for,
    window,
)


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--users", type=int, required=False, default=1000)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--ramp", type=float, default=300.0)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--api", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--pace", type=float, default=1.0, help="think times scaled by this")
    parser.add_argument(
        "--plot", default=str(Path(__file__).resolve().parents[1] / "docs/soak.svg")
    )
    parser.add_argument(
        "--census",
        default="",
        help="a folder where each process of the service writes its census (service/census.py)",
    )
    parser.add_argument(
        "--settle", type=float, default=120.0, help="seconds to wait for the last hands to end"
    )
    args = parse(
        parser,
        users=8,
        minutes=0.3,
        ramp=2.0,
        window=3.0,
        processes=1,
        pace=0.1,
        plot="",
        settle=3.0,
    )
    if args.workers < 2:
        parser.error("--workers must be 2 or more: one is killed on the way")
    seconds = args.minutes * 60
    settings = {"DDZ_LOBBY_BOTS_AFTER": "1"} if args.smoke else {}
    folder = Path(tempfile.mkdtemp(prefix="ddz-soak-"))
    if args.smoke and not args.census:
        args.census = str(folder / "census")  # to show that the census is taken and told
    if args.census:
        Path(args.census).mkdir(parents=True, exist_ok=True)
        # Ten in an hour: each holds its process for a moment, which the p99s would see.
        settings |= {"DDZ_CENSUS_DIR": args.census, "DDZ_CENSUS_SECONDS": str(max(5, seconds / 10))}
    try:
        analyse(args, folder, *run(args, folder, seconds, settings))
    except BaseException:
        # An hour's samples are not thrown away with a failed analysis.
        print(f"the run's samples and logs are kept in {folder}", flush=True)
        raise
    shutil.rmtree(folder, ignore_errors=True)


def run(
    args: argparse.Namespace, folder: Path, seconds: float, settings: dict[str, str]
) -> tuple[
    Sampler, list[Sample], list[str], int, float, float, list[tuple[float, str]], str | None
]:
    """The soak itself: what it sampled, the requests, the checks, the answers 5xx, when it
    began and ended, what was done to the service on the way, and what Locust said if it
    stopped early."""
    with service(folder, args.api, args.workers, settings) as running:
        print(
            f"ddz serve: {args.api} API processes, {args.workers} workers; {args.users:,}"
            f" users for {args.minutes:g} minutes (ramp {args.ramp:.0f} s)",
            flush=True,
        )
        load = generator(
            running,
            folder,
            [args.users],
            args.ramp,
            seconds - args.ramp,
            1.0 if args.smoke else 10.0,
            args.processes,
            args.pace,
            every_kind=args.smoke,
        )
        with Sampler(running, interval=min(5.0, args.window / 2)) as sampler:
            sampler.generators = [load.pid]
            began = time.time()
            acts = [
                (began + seconds / 3, "a worker killed", kill_worker),
                (began + seconds / 2, "an API process restarted", restart_api),
            ]
            done: list[tuple[float, str]] = []
            try:
                for at, what, act in acts:
                    time.sleep(max(0.0, at - time.time()))
                    if load.poll() is not None:
                        break
                    act(running)
                    done.append((time.time() - began, what))
                    print(f"{time.time() - began:7.0f} s: {what}", flush=True)
                wait_for(load, max(0.0, began + seconds + 60 - time.time()) + 120)
            finally:
                stop(load)
            ended = time.time()
        settle(running, args.settle)
        found = samples(folder)
        # The run began with its first request (Locust takes a while to start).
        began = found[0].at if found else began
        early = stopped_early(folder, found, seconds)
        if early is not None:
            print(f"Locust stopped early; its log said:\n{early}", flush=True)
        checks = check(running)
        five_hundreds = running.five_hundreds()
    return sampler, found, checks, five_hundreds, began, ended, done, early


def analyse(
    args: argparse.Namespace,
    folder: Path,
    sampler: Sampler,
    found: list[Sample],
    checks: list[str],
    five_hundreds: int,
    began: float,
    ended: float,
    done: list[tuple[float, str]],
    early: str | None,
) -> None:
    """Prints memory (PSS) and the p99s at each third, the growth, the failures and the checks,
    and draws the plot."""
    seconds = args.minutes * 60
    marks = [began + seconds * k / 3 for k in (1, 2, 3)]
    windows = []
    t = began
    while t < ended - 1:
        held = window(found, t, min(t + args.window, ended))
        windows.append((t - began, held))
        t += args.window
    for at in marks:
        pss = sampler.memory(min(at, ended))
        felt = window(found, max(began, at - args.window), at).felt
        print(
            f"at {(at - began) / 60:5.1f} min: PSS "
            + ", ".join(f"{g} {pss[g]:.0f} MiB" for g in GROUPS)
            + "; p99 "
            + ", ".join(
                f"{name} {felt[name][1]:.0f} ms" if name in felt else f"{name} none"
                for name in (ACK, TURN)
            )
        )
    first, last = sampler.memory(marks[0]), sampler.memory(min(marks[2], ended))
    for g in GROUPS:
        growth = (last[g] - first[g]) / first[g] * 100 if first[g] else 0.0
        print(
            f"PSS of {g} over the last two thirds: {first[g]:.0f} -> {last[g]:.0f} MiB ({growth:+.1f} %)"
        )
    # A process started within the window (the worker started after the kill, the API
    # process after the restart, PostgreSQL's new backends) fills its caches there: its
    # warm-up is not growth of the processes that were warm already.
    lived = set(sampler.nearest(marks[0])) & set(sampler.nearest(min(marks[2], ended)))
    first, last = sampler.memory(marks[0], lived), sampler.memory(min(marks[2], ended), lived)
    for g in GROUPS:
        growth = (last[g] - first[g]) / first[g] * 100 if first[g] else 0.0
        print(
            f"PSS of {g}, processes alive all along: {first[g]:.0f} -> {last[g]:.0f} MiB"
            f" ({growth:+.1f} %)"
        )
    start, end = sampler.nearest(marks[0]), sampler.nearest(min(marks[2], ended))
    for pid in sorted(lived, key=lambda pid: (start[pid][0], pid)):
        group, name, _, before = start[pid]
        after = end[pid][3]
        if group in ("api", "worker"):
            print(
                f"  {group} {pid} ({name}): {before / 2**20:.0f} -> {after / 2**20:.0f} MiB"
                f" ({(after - before) / before * 100:+.1f} %)"
            )
    if args.census:
        tell_census(Path(args.census), began + seconds / 3)
    whole = window(found, began, ended)
    print(
        f"requests: {whole.requests:,} ({whole.per_second:.1f}/s); failures the players met: "
        f"{len(whole.failures)}; answers 5xx in the API's log: {five_hundreds}"
    )
    for failure in sorted(set(whole.failures))[:8]:
        print(f"  failure: {failure}")
    for line in checks:
        print(line)
    # A smoke run draws its plot into its scratch folder (to show that it draws).
    drawn = Path(args.plot) if args.plot else folder / "soak.svg"
    plot(drawn, sampler, windows, began, done)
    print(f"plot: {drawn} ({drawn.stat().st_size:,} bytes)")
    if args.smoke and ACK not in whole.felt:
        raise SystemExit("the smoke run made no decision: the load model did not play")
    if early is not None:
        # Its figures are those of a shorter run, or of none: they say nothing of the hour.
        raise SystemExit("FAILED: the load stopped before its end (Locust's words above)")
    if whole.failures or five_hundreds or any(not line.startswith("ok") for line in checks):
        raise SystemExit("FAILED: failures the players met, answers 5xx or a check (above)")


def tell_census(folder: Path, since: float) -> None:
    """Each process's census (service/census.py) from the first taken after ``since`` to its
    last: what grew most, in objects, functions and caches."""
    for path in sorted(folder.glob("census-*.jsonl")):
        taken = [json.loads(line) for line in path.read_text().splitlines()]
        later = [c for c in taken if c["at"] >= since]
        if len(later) < 2:
            continue
        first, last = later[0], later[-1]
        minutes = (last["at"] - first["at"]) / 60
        print(
            f"census of {last['role']} {last['pid']} over {minutes:.0f} min: RSS"
            f" {first['rss_kib'] / 1024:.0f} -> {last['rss_kib'] / 1024:.0f} MiB, tracked"
            f" objects {first['tracked']:,} -> {last['tracked']:,}, blocks"
            f" {first['allocated_blocks']:,} -> {last['allocated_blocks']:,}, C heap in use"
            f" {first['heap'].get('uordblks', 0) / 2**20:.0f} ->"
            f" {last['heap'].get('uordblks', 0) / 2**20:.0f} MiB"
            f", collections by generation {first['collections']} -> {last['collections']}"
            f" (census took {last['seconds']:.2f} s)"
        )
        for part in ("objects", "functions", "caches"):
            grew = {
                name: n - first[part].get(name, 0)
                for name, n in last[part].items()
                if n - first[part].get(name, 0)
            }
            top = sorted(grew.items(), key=lambda item: -abs(item[1]))[:8]
            print(f"  {part}: " + ", ".join(f"{name} {n:+,}" for name, n in top))
        print(f"  recent: {first['recent'][:6]} -> {last['recent'][:6]}")


def kill_worker(running: Service) -> None:
    """SIGKILL to an extra worker, and another in its place (a supervisor's restart)."""
    victim = next(w for w in running.extra if w.poll() is None)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    running.start_worker()


def restart_api(running: Service) -> None:
    """SIGTERM to one API process: gunicorn starts another in its place."""
    os.kill(running.api_workers()[0], signal.SIGTERM)


def settle(running: Service, timeout: float = 120) -> None:
    """Waits for the hands under way to end and be settled (the system plays the seats of
    the people gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = running.sql(
            "SELECT count(*) FROM matches WHERE status = 'playing' OR (status = 'ended' AND NOT settled)"
        )
        if rows[0][0] == 0:
            return
        time.sleep(2)


#: Seconds a hand's settlement may take after its end before the check counts it missing.
SETTLING = 30


def check(running: Service) -> list[str]:
    """Every ended hand settled once, the ledger at zero: each a line, ``ok`` or not."""
    # A hand that ended in the last seconds may be settling as the check reads: the
    # settlement follows the end within a second or two, so only one that ended longer ago
    # than SETTLING and is still not settled is a failure.
    ((ended, unsettled, settling),) = running.sql(
        "SELECT count(*),"
        f" count(*) FILTER (WHERE NOT settled AND updated_at < now() - interval '{SETTLING} s'),"
        f" count(*) FILTER (WHERE NOT settled AND updated_at >= now() - interval '{SETTLING} s')"
        " FROM matches WHERE status = 'ended'"
    )
    ((under_way,),) = running.sql("SELECT count(*) FROM matches WHERE status = 'playing'")
    twice = running.sql(
        "SELECT stream_id FROM events WHERE type = 'settled' GROUP BY 1 HAVING count(*) > 1"
    )
    booked = running.sql(
        "SELECT count(*) FROM matches m WHERE m.settled"
        " AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.match_id = m.match_id)"
    )[0][0]
    ((total,),) = running.sql("SELECT coalesce(sum(amount), 0) FROM ledger_entries")
    unbalanced = running.sql(
        "SELECT match_id FROM ledger_entries WHERE match_id IS NOT NULL"
        " GROUP BY match_id HAVING sum(amount) <> 0"
    )

    def said(ok: bool, what: str) -> str:
        return f"{'ok' if ok else 'FAILED'}: {what}"

    return [
        said(
            unsettled == 0 and booked == 0,
            f"every ended hand settled ({ended:,} ended, {unsettled} not settled,"
            f" {booked} settled without a settlement; {settling} ended in the last"
            f" {SETTLING} s and settling, {under_way} still under way)",
        ),
        said(not twice, f"each hand settled once ({len(twice)} settled twice)"),
        said(
            total == 0 and not unbalanced,
            f"the ledger adds to {total} ({len(unbalanced)} hands not to zero)",
        ),
    ]


def plot(
    path: Path,
    sampler: Sampler,
    windows: list[tuple[float, Window]],
    began: float,
    done: list[tuple[float, str]],
) -> None:
    """Memory (PSS) of each group, and the p99s per window, over time (SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pss: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for at, taken, _ in sampler.samples:
        by_group: dict[str, float] = defaultdict(float)
        for group, _, _, proportional in taken.values():
            by_group[group] += proportional / 2**20
        for g in GROUPS:
            pss[g].append(((at - began) / 60, by_group.get(g, 0.0)))
    figure, (memory, latency) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for g in GROUPS:
        memory.plot([t for t, _ in pss[g]], [m for _, m in pss[g]], label=g)
    memory.set_ylabel("PSS (MiB)")
    memory.legend(loc="upper left", fontsize="small")
    for name in (ACK, TURN):
        points = [(t / 60, held.felt[name][1]) for t, held in windows if name in held.felt]
        latency.plot(
            [t for t, _ in points], [p for _, p in points], marker=".", label=f"p99 {name}"
        )
        latency.axhline(TARGETS[name], linestyle=":", linewidth=0.8)
    latency.set_ylabel("ms")
    latency.set_xlabel("minutes")
    latency.legend(loc="upper left", fontsize="small")
    for at, what in done:
        for axis in (memory, latency):
            axis.axvline(at / 60, color="grey", linewidth=0.8)
        memory.annotate(what, (at / 60, memory.get_ylim()[1]), fontsize="x-small", va="top")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg")
    plt.close(figure)


if __name__ == "__main__":
    main()
