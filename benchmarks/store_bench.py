"""How long the store's operations take at size: settled hands seeded in bulk into a
PostgreSQL cluster of the script's own (archiving its WAL), then timed: ``ddz rebuild``
making every read model from none, its ``--check`` of the read models, the ledger check
per hand, a full backup with pgBackRest (the settings of deploy/pgbackrest, encrypted and
compressed) and a restore of it to a point in time until the restored cluster takes writes.

    .venv/bin/python benchmarks/store_bench.py [--hands 100000] [--pool 300]
                                               [--ledger-sample 2000] [--smoke]

The hands are real: ``--pool`` hands played by the bot at every seat on the pure engine
(``service.game.simulate``), each settled, then copied under new match ids and players
until there are ``--hands`` of them (COPY, in one transaction per 5,000 hands). Each is
the same number of events a hand played through the API leaves (its creation, the
seats, the deal, every decision, its end and its settlement), its settlement and its
ledger entries. The cluster is the one tests/test_restore_drill.py uses (tests/clusters.py:
this machine's PostgreSQL programs, pgBackRest where installed, else pg_basebackup and
WAL replay); it is removed at the end.
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from common import ROOT, command_line, parse

# The restore drill's cluster and its backups, shared rather than copied.
sys.path.insert(0, str(ROOT / "tests"))
import psycopg  # noqa: E402
from clusters import backed_up_cluster  # type: ignore[import-not-found]  # noqa: E402

from service.app.audit import check_match  # noqa: E402
from service.game import MatchSettings, Settle, decide, replay  # noqa: E402
from service.game.bot import BotPolicy  # noqa: E402
from service.game.simulate import hand_seed, play_hand  # noqa: E402
from service.store import EventStore, migrate, open_pool  # noqa: E402
from service.store.ledger import movements  # noqa: E402
from service.store.rebuild import ReadModels  # noqa: E402

#: Hands per transaction of the seeding.
CHUNK = 5000
PLAYERS = 1000
MATCH = "00000000-0000-4000-8000-00000000000m"
SEATS = [f"00000000-0000-4000-8000-00000000000{seat}" for seat in range(4)]


#: A played hand: its events (type, schema version, payload as JSON with the placeholder
#: ids), its result as JSON, its ledger entries (movement, account, seat, kind, amount).
Hand = tuple[list[tuple[str, int, str]], str, list[tuple[int, str, int | None, str, Decimal]]]


def pool_hands(count: int) -> list[Hand]:
    """``count`` hands played and settled: each its events (type, schema version, payload
    as JSON with the placeholder ids), its result as JSON and its ledger entries."""
    import orjson

    table = MatchSettings.build(None)
    bot = BotPolicy()
    hands = []
    for i in range(count):
        events, state = play_hand(
            table, hand_seed("5" * 64, i), [bot] * 4, match_id=MATCH, players=SEATS
        )
        settled = decide(state, Settle())
        state = replay(settled, state)
        assert state.result is not None
        rows = [(e.type, e.version, orjson.dumps(e.payload()).decode()) for e in events + settled]
        entries = [
            (n, account, seat, kind, amount)
            for n, move in enumerate(movements(state))
            for account, seat, kind, amount in move
        ]
        hands.append((rows, orjson.dumps(state.result.to_json()).decode(), entries))
    return hands


def seat_ids(players: list[str], hand: int) -> list[str]:
    """The players of the seeded hand ``hand``, by seat."""
    return [players[(hand * 4 + seat) % len(players)] for seat in range(4)]


def seed(
    url: str, hands: int, pool: list[Hand], players: list[str]
) -> tuple[list[uuid.UUID], float]:
    """Copies the pool's hands into ``hands`` matches of ``players``; their ids, and the
    seconds it took (the players and events; the read models are the rebuild's)."""
    matches = [uuid.uuid4() for _ in range(hands)]
    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        with conn.cursor().copy("COPY players (player_id, name) FROM STDIN") as copy:
            for n, player in enumerate(players):
                copy.write_row((player, f"seeded-{n}"))
        for start in range(0, hands, CHUNK):
            with conn.cursor().copy(
                "COPY events (stream_id, version, type, schema_version, payload) FROM STDIN"
            ) as copy:
                for i in range(start, min(start + CHUNK, hands)):
                    rows, _, _ = pool[i % len(pool)]
                    ids = seat_ids(players, i)
                    for version, (type_, schema, payload) in enumerate(rows, start=1):
                        text = payload.replace(MATCH, str(matches[i]))
                        for seat in range(4):
                            text = text.replace(SEATS[seat], ids[seat])
                        copy.write_row((matches[i], version, type_, schema, text))
            conn.commit()
    return matches, time.perf_counter() - started


def book(url: str, matches: list[uuid.UUID], pool: list[Hand], players: list[str]) -> float:
    """The settlements and ledger entries of the seeded hands (after their ``matches``
    rows, which they refer to); the seconds it took."""
    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        for start in range(0, len(matches), CHUNK):
            chunk = range(start, min(start + CHUNK, len(matches)))
            with conn.cursor().copy("COPY settlements (match_id, result) FROM STDIN") as copy:
                for i in chunk:
                    copy.write_row((matches[i], pool[i % len(pool)][1]))
            with conn.cursor().copy(
                "COPY ledger_entries (match_id, movement, account, seat, kind, amount) FROM STDIN"
            ) as copy:
                for i in chunk:
                    accounts = {
                        f"player:{s}": f"player:{p}" for s, p in zip(SEATS, seat_ids(players, i))
                    }
                    for n, account, seat, kind, amount in pool[i % len(pool)][2]:
                        copy.write_row(
                            (matches[i], n, accounts.get(account, account), seat, kind, amount)
                        )
            conn.commit()
    return time.perf_counter() - started


def size(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pg_size_pretty(pg_database_size(current_database())), (SELECT count(*) FROM events)"
        ).fetchone()
    assert row is not None
    return f"{row[0]} ({row[1]:,} events)"


def directory_size(path: Path) -> str:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return f"{total / 2**20:,.0f} MB"


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--hands", type=int, default=100_000)
    parser.add_argument("--pool", type=int, default=300, help="distinct hands played")
    parser.add_argument(
        "--ledger-sample", type=int, default=2000, help="hands the ledger check is timed on"
    )
    args = parse(parser, hands=20, pool=4, ledger_sample=5)
    figures: list[tuple[str, str]] = []
    with backed_up_cluster() as backups:
        admin = backups.primary.url()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE ddz")
        url = admin.replace("/postgres?", "/ddz?")
        migrate(url)
        started = time.perf_counter()
        pool = pool_hands(args.pool)
        print(
            f"{args.pool} distinct hands played in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        players = [str(uuid.uuid4()) for _ in range(PLAYERS)]
        matches, seconds = seed(url, args.hands, pool, players)
        figures.append(("seeding (COPY of the events)", f"{seconds:.1f} s"))
        connections = open_pool(url, 2, "store-bench")
        try:
            started = time.perf_counter()
            found = ReadModels(connections).run(write=True)
            rebuilt = time.perf_counter() - started
            assert found.written == args.hands and not found.left, found
            figures.append(
                (
                    "rebuild of every read model, from none",
                    f"{rebuilt:.1f} s ({args.hands / rebuilt:,.0f} hands/s)",
                )
            )
            figures.append(("ledger (COPY)", f"{book(url, matches, pool, players):.1f} s"))
            started = time.perf_counter()
            found = ReadModels(connections).run(write=False)
            checked = time.perf_counter() - started
            assert not found.differences, found.differences[:5]
            figures.append(
                (
                    "rebuild --check of the read models",
                    f"{checked:.1f} s ({args.hands / checked:,.0f} hands/s)",
                )
            )
            store = EventStore(connections)
            sample = matches[: args.ledger_sample]
            started = time.perf_counter()
            for match_id in sample:
                assert check_match(connections, store, match_id) == []
            per_hand = (time.perf_counter() - started) / len(sample)
            figures.append(
                (
                    "ledger check, per hand",
                    f"{per_hand * 1000:.2f} ms (on {len(sample):,} hands; {args.hands:,} hands:"
                    f" about {per_hand * args.hands / 60:.0f} min on one core)",
                )
            )
        finally:
            connections.close()
        figures.append(("database", size(url)))
        started = time.perf_counter()
        backups.backup()
        figures.append((f"full backup ({backups.tool})", f"{time.perf_counter() - started:.1f} s"))
        repository = backups.home / ("repo" if backups.tool == "pgBackRest" else "base")
        figures.append(("backup's size", directory_size(repository)))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE after_the_backup (at timestamptz DEFAULT now())")
            conn.execute("INSERT INTO after_the_backup DEFAULT VALUES")
            row = conn.execute("SELECT clock_timestamp()").fetchone()
            conn.execute("INSERT INTO after_the_backup DEFAULT VALUES")  # past the target
        assert row is not None
        backups.archived()
        started = time.perf_counter()
        restored = backups.restore(row[0])
        figures.append(
            (
                "restore to a point in time, until it takes writes",
                f"{time.perf_counter() - started:.1f} s",
            )
        )
        with psycopg.connect(restored.url("ddz")) as conn:
            (count,) = conn.execute("SELECT count(*) FROM settlements").fetchone() or (0,)
        assert count == args.hands
    print(f"{args.hands:,} settled hands ({args.pool} distinct, {datetime.now(UTC):%Y-%m-%d})")
    for label, value in figures:
        print(f"  {label:<52} {value}")


if __name__ == "__main__":
    main()
