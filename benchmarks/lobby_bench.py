"""Lobby benchmark: the matcher's time from a group's fourth ticket to all four seated,
with many tickets waiting over several settings.

    python benchmarks/lobby_bench.py [--waiting 400] [--settings 10] [--groups 200] [--smoke]

Uses a fresh database on --admin-url (dropped at the end). First ``--waiting`` tickets
wait, each under a stake of its own and allowing no bots, so that none is ever seated and
the matcher passes over all of them every time. Then, ``--groups`` times, four players of
one of ``--settings`` settings post a ticket each; after the
fourth commits, one matcher pass runs (as the job a new ticket wakes would, in this
process, without the queue's own delay) and the time from the fourth ticket's commit to
the seating's commit is recorded. Target: p50 <= 100 ms.
"""

from __future__ import annotations

import time

from common import command_line, parse, percentile, scratch_database

from service.app.commands import Commands
from service.app.tables import Tables
from service.game import MatchSettings
from service.store import EventStore, Players, open_pool
from service.store.tables import TableStore


def run(waiting: int, settings: int, groups: int, admin_url: str) -> None:
    with scratch_database(admin_url) as (_, url), open_pool(url, 4, "lobby-bench") as pool:
        store = EventStore(pool)
        tables = Tables(store, TableStore(store), Commands(store))
        players = Players(pool)
        kinds = [MatchSettings.build(unit=f"{n + 1}.00").to_json() for n in range(settings)]
        # Waiting tickets that the matcher reads on every pass but cannot seat: each alone
        # under a stake of its own, and allowing no bots.
        for n in range(waiting):
            player, _ = players.create(f"w{n}")
            lone = MatchSettings.build(unit=f"{1000 + n}.00").to_json()
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


def main() -> None:
    parser = command_line(__doc__, postgres=True)
    parser.add_argument("--waiting", type=int, default=400)
    parser.add_argument("--settings", type=int, default=10)
    parser.add_argument("--groups", type=int, default=200)
    args = parse(parser, waiting=10, settings=2, groups=4)
    run(args.waiting, args.settings, args.groups, args.admin_url)


if __name__ == "__main__":
    main()
