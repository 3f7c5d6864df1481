"""Whether the feed's reads slow with history: the reads every stream depends on, timed
as the number of hands played grows.

    python benchmarks/history_bench.py [--sizes 1000,5000,20000,50000] [--tables 8]
                                       [--seed-seconds 60] [--reads 50] [--smoke]

Plays real hands first, as ``table_bench.py`` does (``--tables`` tables of one player and
three system bots, the workers as processes, for ``--seed-seconds``), on a scratch
database. Then, for each size, copies those hands set-wise (their matches, events and
tables' hands, each copy under a new match id, its events older than every real one)
until the database holds that many matches, and times, ``--reads`` times after a few to
warm up, the feed's reads from a cursor just behind the newest real event: every event
(``Feed.read_all``: what each API process reads at each notification) with 5 and 80 new
events, one seated player's own (``Feed.read``: a poll's, and a stream's catching up)
with 5 and 80, and its table's (``Feed.read_table``: a watcher's) with 80: most of the 80
are other tables' events, which a player's or a table's read scans past. It prints each
read's median and p95 in ms at each size: flat, when nothing slows with history.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from functools import partial

import psycopg
from common import (
    command_line,
    parse,
    percentile,
    redis_server,
    scratch_database,
    start_workers,
    terminate,
)
from psycopg_pool import ConnectionPool
from table_bench import player

from service.api import create_app
from service.config import Config
from service.store.feed import Feed

#: One more copy of every real hand (and of no copy): a new match id for each, its events
#: with a transaction id older than every real event's (behind any cursor the reads use).
COPY = """
CREATE TEMP TABLE copy_of AS SELECT match_id AS real, gen_random_uuid() AS new
    FROM table_hands WHERE match_id IN (SELECT match_id FROM real_hands);
CREATE TEMP TABLE copied_matches AS
    SELECT m.* FROM matches m JOIN copy_of c ON c.real = m.match_id;
UPDATE copied_matches m SET match_id = c.new FROM copy_of c WHERE m.match_id = c.real;
INSERT INTO matches SELECT * FROM copied_matches;
INSERT INTO events (stream_id, version, type, schema_version, payload, recorded_at,
                    command_id, xid)
    SELECT c.new, e.version, e.type, e.schema_version, e.payload, e.recorded_at,
           e.command_id, '3'::xid8
    FROM events e JOIN copy_of c ON c.real = e.stream_id;
INSERT INTO table_hands (match_id, table_id, number)
    SELECT c.new, h.table_id, h.number + (SELECT max(number) FROM table_hands)
    FROM table_hands h JOIN copy_of c ON c.real = h.match_id;
DROP TABLE copy_of, copied_matches;
"""


def seed(url: str, redis_url: str, tables: int, seconds: float, workers: int) -> None:
    """Real hands: ``tables`` tables of one player and three bots, for ``seconds``."""
    env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url}
    app = create_app(Config(database_url=url, redis_url=redis_url, rate_limits=False))
    done = threading.Event()
    procs = start_workers(workers, env)
    hands: list[int] = []
    try:
        threads = [
            threading.Thread(target=player, args=(app, done, [], hands), daemon=True)
            for _ in range(tables)
        ]
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        done.set()
        for thread in threads:
            thread.join(timeout=10)
    finally:
        done.set()
        terminate(procs, timeout=15)
        app.extensions["ddz"].close()
    print(f"seeded: {len(hands)} hands settled at {tables} tables in {seconds:.0f} s", flush=True)


def timed(read: Callable[[], object], count: int) -> tuple[float, float]:
    """Median and p95 (ms) of ``count`` reads after five to warm up (and to have psycopg
    prepare the statement, as a long-lived process does)."""
    for _ in range(5):
        read()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        read()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), percentile(times, 0.95)


def run(
    sizes: list[int], tables: int, seconds: float, workers: int, reads: int, admin_url: str
) -> None:
    with scratch_database(admin_url) as (_, url), redis_server() as redis_url:
        seed(url, redis_url, tables, seconds, workers)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE real_hands AS SELECT match_id FROM table_hands")
            cursors = {
                n: conn.execute(
                    "SELECT xid::text::bigint, position FROM events"
                    " ORDER BY xid DESC, position DESC OFFSET %s LIMIT 1",
                    (n - 1,),
                ).fetchone()
                for n in (5, 80)
            }
            seated = conn.execute(
                "SELECT s.value->>'player', h.table_id FROM matches m"
                " JOIN table_hands h USING (match_id), jsonb_array_elements(m.seats) s"
                " WHERE s.value->>'player' IS NOT NULL ORDER BY m.created_at DESC LIMIT 1"
            ).fetchone()
        assert seated is not None and all(cursors.values()), "no hand was played"
        behind = {n: (int(c[0]), int(c[1])) for n, c in cursors.items() if c is not None}
        player_id, table_id = str(seated[0]), seated[1]
        with ConnectionPool(url, min_size=1, max_size=2, open=True) as pool:
            feed = Feed(pool)
            for size in sizes:
                with psycopg.connect(url, autocommit=True) as conn:
                    while (count := conn.execute("SELECT count(*) FROM matches").fetchone()) and (
                        count[0] < size
                    ):
                        conn.execute(COPY)
                    conn.execute("VACUUM ANALYZE")
                    events = conn.execute("SELECT count(*) FROM events").fetchone()
                assert count is not None and events is not None
                figures = {
                    f"every event, {n} new": timed(partial(feed.read_all, *cursor), reads)
                    for n, cursor in behind.items()
                }
                for n, cursor in behind.items():
                    figures[f"a player's own, {n} new"] = timed(
                        partial(feed.read, player_id, *cursor, 100), reads
                    )
                figures["a table's, 80 new"] = timed(
                    partial(feed.read_table, table_id, *behind[80], 100), reads
                )
                print(f"{count[0]:,} matches, {events[0]:,} events:", flush=True)
                for name, (median, p95) in figures.items():
                    print(f"  {name:28} median {median:6.2f} ms   p95 {p95:6.2f} ms", flush=True)


def main() -> None:
    parser = command_line(__doc__, postgres=True)
    parser.add_argument("--sizes", default="1000,5000,20000,50000")
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--seed-seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reads", type=int, default=50)
    args = parse(parser, sizes="20,60", tables=2, seed_seconds=15, workers=1, reads=3)
    sizes = [int(s) for s in args.sizes.split(",")]
    run(sizes, args.tables, args.seed_seconds, args.workers, args.reads, args.admin_url)


if __name__ == "__main__":
    main()
