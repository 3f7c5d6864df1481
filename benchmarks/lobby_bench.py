"""Lobby benchmark: the matcher's time from a group's fourth ticket to all four seated,
with many tickets waiting over several settings.

    python benchmarks/lobby_bench.py [--waiting 400] [--settings 10] [--groups 200]

Uses a fresh database on --admin-url (dropped at the end). First ``--waiting`` tickets
wait, each under a stake of its own and allowing no bots, so that none is ever seated and
the matcher passes over all of them every time. Then, ``--groups`` times, four players of one of ``--settings`` settings post a ticket each; after the
fourth commits, one matcher pass runs (as the job a new ticket wakes would, in this
process, without the queue's own delay) and the time from the fourth ticket's commit to
the seating's commit is recorded. Target: p50 <= 100 ms.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.worker_bench import fresh_database, percentile  # noqa: E402
from service.app.commands import Commands  # noqa: E402
from service.app.tables import Tables  # noqa: E402
from service.game import Table  # noqa: E402
from service.store import EventStore, Players, open_pool  # noqa: E402
from service.store.tables import TableStore  # noqa: E402


def run(waiting: int, settings: int, groups: int, admin_url: str) -> None:
    name, url = fresh_database(admin_url)
    pool = open_pool(url, 4, "lobby-bench")
    try:
        store = EventStore(pool)
        tables = Tables(store, TableStore(store), Commands(store))
        players = Players(pool)
        kinds = [Table.build(unit=f"{n + 1}.00").to_json() for n in range(settings)]
        # Waiting tickets that the matcher reads on every pass but cannot seat: each alone
        # under a stake of its own, and allowing no bots.
        for n in range(waiting):
            player, _ = players.create(f"w{n}")
            lone = Table.build(unit=f"{1000 + n}.00").to_json()
            tables.table_store.create_ticket(player, lone, False)
        latencies = []
        for g in range(groups):
            kind = kinds[g % settings]
            for seat in range(4):
                player, _ = players.create(f"g{g}s{seat}")
                tables.table_store.create_ticket(player, kind, False)
            fourth = time.perf_counter()
            made = tables.match_tickets(bots_after=3600, next_hand_seconds=5)
            latencies.append(time.perf_counter() - fourth)
            assert made == 1, made
        ms = [x * 1000 for x in latencies]
        print(
            f"fourth ticket to four seated: {groups} groups over {settings} settings, with"
            f" {waiting} other tickets waiting: p50 {percentile(ms, 0.5):.1f} ms,"
            f" p99 {percentile(ms, 0.99):.1f} ms, max {max(ms):.1f} ms"
        )
    finally:
        pool.close()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=400)
    parser.add_argument("--settings", type=int, default=10)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    run(args.waiting, args.settings, args.groups, args.admin_url)


if __name__ == "__main__":
    main()
