"""The failover drill of tests/ha_drill.py, run several times: for each way of losing
the PostgreSQL primary (SIGKILL of its postmaster; a cut of its network), the time from
the loss to the first command answered 200, and until every match then in play moved a
round on; the same after the Redis master is killed; and the commands answered 200
missing from the store, the 5xx answers and the 503s with Retry-After. The goals: the
first command answered within 30 s of losing PostgreSQL, every match moving within
10 s of losing Redis; nothing lost, no 5xx.

    .venv/bin/python benchmarks/failover_drill.py [--runs 5] [--kinds kill,cut]
                                                  [--clients 4] [--smoke]

Needs Debian's patroni, etcd-server and redis-sentinel (.ci/run installs them); each run
starts its own etcd, Patroni cluster, Redis and sentinels and ``ddz serve`` on free ports,
and removes them at the end. Run it under ``nice -n 10`` on a shared machine.
"""

from __future__ import annotations

import statistics
import sys

from common import ROOT, command_line, parse

# The drill itself, shared with the suite rather than copied.
sys.path.insert(0, str(ROOT / "tests"))
from ha_drill import KINDS, Figures, drill  # type: ignore[import-not-found]  # noqa: E402


def summary(values: list[float | None]) -> str:
    """The median, least and most of a figure over the runs (a run where it never came
    to pass is counted as such)."""
    known = [v for v in values if v is not None]
    if len(known) < len(values):
        return f"never, in {len(values) - len(known)} of {len(values)} runs"
    return (
        f"median {statistics.median(known):.1f} s, min {min(known):.1f} s, "
        f"max {max(known):.1f} s ({', '.join(f'{v:.1f}' for v in known)})"
    )


def main() -> int:
    parser = command_line(__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--play-seconds", type=float, default=8.0)
    args = parse(parser, runs=1, kinds="kill", clients=2, play_seconds=2.0)
    failed = False
    for kind in args.kinds.split(","):
        runs: list[Figures] = []
        for n in range(args.runs):
            figures = drill(kind, clients=args.clients, play_seconds=args.play_seconds)
            print(f"run {n + 1}: {figures.line()}", flush=True)
            runs.append(figures)
            failed |= bool(figures.lost or figures.errors or figures.unsettled or figures.failures)
        for index, what in enumerate(("PostgreSQL primary", "Redis master")):
            print(
                f"{kind}, {what} lost, first command answered: "
                + summary([r.losses[index].first_answer for r in runs])
            )
            print(
                f"{kind}, {what} lost, every match a round further: "
                + summary([r.losses[index].moved for r in runs])
            )
        print(
            f"{kind}: {sum(r.acknowledged for r in runs)} commands answered 200, "
            f"{sum(len(r.lost) for r in runs)} missing from the store; "
            f"{sum(r.hands for r in runs)} hands, {sum(len(r.unsettled) for r in runs)} not "
            f"settled once; {sum(len(r.errors) for r in runs)} 5xx; "
            f"{sum(r.answered_503 for r in runs)} 503 with Retry-After; "
            f"{statistics.median(r.seconds for r in runs):.0f} s a run"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
