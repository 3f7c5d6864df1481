"""Player stream benchmark: how soon "your turn" reaches a player on ``GET /v1/me/stream``
with many players' streams open on one API instance.

    python benchmarks/player_stream_bench.py [--streams 1000] [--active 50] [--seconds 45]
        [--warmup 20] [--own-postgres] [--smoke]

Uses a fresh database on --admin-url and a Redis server of its own (dropped and stopped at
the end), runs the API as ``ddz serve`` does (gunicorn, gevent workers; ``--api-workers``
processes, one by default: one API instance) and ``--workers`` worker processes (``ddz
worker``: the bots, the deals, the settlements). Of the ``--streams`` players, ``--active``
each sit at a table of their own with three system bots, hand after hand (``bots_after``
0, ``next_hand_seconds`` 0), and play each ``your_turn`` as soon as it arrives; the others
are idle: half seated alone at a table that waits for people, half with a lobby ticket that
waits (a stake of its own, no bots). Every player keeps one stream open, read by a light
client (a raw socket, all of them in one thread).

The figure: for each ``your_turn`` an active player reads in the ``--seconds`` after the
``--warmup``, the time from its event's
``at`` (recorded in the appending transaction, so a little before its commit: the figure
is an upper bound) to the moment the client reads it, on this machine's one clock.
Target: p99 <= 100 ms with 1,000 streams. Raises the open-file limit as far as allowed.

The feed's horizon is the PostgreSQL server's (docs/tables.md): on a server shared with
other work, another database's long transaction holds every item back, and the figures
show it (the benchmark reports such transactions). ``--own-postgres`` runs the benchmark on
a PostgreSQL server of its own (the embedded one of ``ddz serve``), as the service should.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import resource
import selectors
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import IO, Any

import psutil
import psycopg
import requests
from common import (
    command_line,
    free_port,
    gunicorn,
    parse,
    percentile,
    redis_server,
    scratch_database,
    start_workers,
    terminate,
    wait_ready,
)
from psycopg_pool import ConnectionPool
from table_bench import choose

from service import embedded
from service.config import COMMAND_CONNECTIONS
from service.game import MatchSettings
from service.store import Players, open_pool
from service.store.events import EventStore
from service.store.tables import TableStore

OPERATOR = "bench-operator"


class Stream:
    """One player's stream on a raw socket (HTTP/1.0: the body is the event stream itself,
    not chunked), parsed as it arrives."""

    def __init__(self, port: int, token: str, active: bool):
        self.port, self.token, self.active = port, token, active
        self.buffer = b""
        self.headers_done = False
        self.sock: socket.socket | None = None

    def open(self, selector: selectors.BaseSelector) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port))
        self.sock.sendall(
            (
                f"GET /v1/me/stream HTTP/1.0\r\nHost: bench\r\nAccept: text/event-stream\r\n"
                f"Authorization: Bearer {self.token}\r\n\r\n"
            ).encode()
        )
        self.sock.setblocking(False)
        self.buffer, self.headers_done = b"", False
        selector.register(self.sock, selectors.EVENT_READ, self)

    def messages(self, data: bytes) -> list[tuple[str, str]]:
        """The complete messages (event, data) in what arrived."""
        self.buffer += data
        if not self.headers_done:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return []
            status = head.split(b" ", 2)[1]
            assert status == b"200", head
            self.headers_done, self.buffer = True, rest
        found = []
        *blocks, self.buffer = self.buffer.split(b"\n\n")
        for block in blocks:
            fields = dict(
                line.split(": ", 1)
                for line in block.decode().splitlines()
                if line and not line.startswith(":") and ": " in line
            )
            if "event" in fields:
                found.append((fields["event"], fields.get("data", "")))
        return found


def read_streams(
    streams: list[Stream],
    stop: threading.Event,
    turns: queue.Queue[tuple[str, dict[str, Any]]],
    delays: list[float],
    counts: dict[str, int],
) -> None:
    """Every stream in one loop: the active players' your_turn items are timed and handed
    to the players' threads; a stream the server closes is opened again (a new stream: the
    benchmark needs no resumption)."""
    selector = selectors.DefaultSelector()
    for stream in streams:
        stream.open(selector)
    while not stop.is_set():
        for key, _ in selector.select(timeout=0.5):
            stream = key.data
            sock = stream.sock
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            now = datetime.now(UTC)
            if not data:
                selector.unregister(sock)
                sock.close()
                counts["reopened"] += 1
                stream.open(selector)
                continue
            for event, payload in stream.messages(data):
                counts[event] = counts.get(event, 0) + 1
                if event == "your_turn" and stream.active:
                    item = json.loads(payload)
                    delays.append((now - datetime.fromisoformat(item["at"])).total_seconds())
                    turns.put((stream.token, item))
    for stream in streams:
        if stream.sock is not None:
            stream.sock.close()


def legal(session: requests.Session, match: str, auth: dict[str, str]) -> dict[str, Any]:
    """The match's ``/legal``, read by its player."""
    plays: dict[str, Any] = session.get(f"{match}/legal", headers=auth).json()
    return plays


def act(base: str, turns: queue.Queue[tuple[str, dict[str, Any]]], stop: threading.Event) -> None:
    """Plays the your_turn items it is given, as the players would."""
    session = requests.Session()
    while not stop.is_set():
        try:
            token, item = turns.get(timeout=0.5)
        except queue.Empty:
            continue
        auth = {"Authorization": f"Bearer {token}"}
        try:
            match = f"{base}/v1/matches/{item['match_id']}"
            body = choose(item, partial(legal, session, match, auth))
            body["expected_version"] = item["version"]
            session.post(f"{match}/commands", json=body, headers=auth)
        except requests.RequestException:
            if not stop.is_set():
                raise


def oldest_transaction(
    admin_url: str, database: str, stop: threading.Event, ages: list[tuple[float, float]]
) -> None:
    """Samples, every 100 ms, the age of the oldest transaction with an id running on the
    PostgreSQL server, in the benchmark's database and in the others: the player stream
    delivers nothing committed after such a transaction started until it ends
    (docs/tables.md), so another database's long transaction on a shared server shows in
    the figures too."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        while not stop.wait(0.1):
            row = conn.execute(
                "SELECT coalesce(extract(epoch FROM max(now() - xact_start)"
                " FILTER (WHERE datname = %(db)s)), 0)::float,"
                " coalesce(extract(epoch FROM max(now() - xact_start)"
                " FILTER (WHERE datname <> %(db)s)), 0)::float"
                " FROM pg_stat_activity WHERE backend_xid IS NOT NULL",
                {"db": database},
            ).fetchone()
            assert row is not None
            ages.append((row[0], row[1]))


def cpu_seconds(procs: list[subprocess.Popen[bytes]], database: str) -> dict[str, float]:
    """CPU time so far of the API's processes, the workers' and the PostgreSQL backends
    serving the benchmark's database (where the time goes, beside the clients')."""
    api, *workers = [psutil.Process(p.pid) for p in procs]

    def total(processes: list[psutil.Process]) -> float:
        seconds = 0.0
        for process in processes:
            try:
                times = process.cpu_times()
                seconds += times.user + times.system
            except psutil.NoSuchProcess:
                pass
        return seconds

    backends = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] and f"postgres {database} " in " ".join(p.info["cmdline"])
    ]
    return {
        "API": total([api, *api.children(recursive=True)]),
        "workers": total(workers),
        "PostgreSQL": total(backends),
    }


@contextlib.contextmanager
def own_postgres() -> Iterator[str]:
    """A PostgreSQL server of the benchmark's own, in a temporary directory: its URL."""
    data = Path(tempfile.mkdtemp(prefix="ddz-player-stream-"))
    sockets = embedded.socket_dir(data)
    sockets.mkdir(mode=0o700, parents=True)
    child = None
    try:
        child, url = embedded.postgres(data, sockets, lambda: False)
        yield url
    finally:
        if child is not None:
            embedded.stop([child])
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)


def run(args: argparse.Namespace) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        with (
            scratch_database(args.admin_url) as (name, url),
            redis_server() as redis_url,
            open_pool(url, 4, "player-stream-bench") as pool,
        ):
            play(args, name, url, redis_url, pool)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def play(
    args: argparse.Namespace, name: str, url: str, redis_url: str, pool: ConnectionPool
) -> None:
    """The benchmark on its database (``name``, ``url``, ``pool``) and Redis server."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": redis_url,
        "DDZ_RATE_LIMITS": "false",
        "DDZ_OPERATOR_TOKEN": OPERATOR,
        "DDZ_STREAM_SECONDS": str(args.seconds * 4),
        # Room for every stream and, beside them, the players' commands. Both together:
        # gunicorn refuses to start when the connections do not exceed the streams' bound
        # by COMMAND_CONNECTIONS (with the default bound, 5,000, it refused 1,200
        # connections, and the benchmark waited for a server that had exited).
        "DDZ_MAX_STREAMS": str(args.streams + 100),
        "DDZ_WORKER_CONNECTIONS": str(args.streams + 100 + COMMAND_CONNECTIONS),
    }
    procs: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()
    api_log: IO[bytes] | int = open(args.api_log, "wb") if args.api_log else subprocess.DEVNULL
    try:
        api = subprocess.Popen(
            gunicorn(port, "--workers", str(args.api_workers), "service.api.wsgi:app"),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=api_log,
        )
        procs.append(api)
        wait_ready(f"{base}/healthz", api, log=Path(args.api_log) if args.api_log else None)

        # The players: the idle ones first, seated alone or waiting in the lobby.
        players = Players(pool)
        tickets = TableStore(EventStore(pool))
        session = requests.Session()
        streams: list[Stream] = []
        idle = args.streams - args.active
        for n in range(idle):
            player, token = players.create(f"idle{n}")
            if n % 2:
                alone = MatchSettings.build(unit=f"{1000 + n}.00").to_json()
                tickets.create_ticket(player, alone, False)
            else:
                r = session.post(
                    f"{base}/v1/tables", json={}, headers={"Authorization": f"Bearer {token}"}
                )
                assert r.status_code == 201, r.text
            streams.append(Stream(port, token, active=False))
        actives = [players.create(f"active{n}")[1] for n in range(args.active)]
        streams += [Stream(port, token, active=True) for token in actives]
        print(f"{idle} idle players ready (half seated alone, half with a waiting ticket)")

        turns: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        delays: list[float] = []
        counts: dict[str, int] = {"reopened": 0}
        reader = threading.Thread(
            target=read_streams, args=(streams, stop, turns, delays, counts), daemon=True
        )
        reader.start()
        actors = [
            threading.Thread(target=act, args=(base, turns, stop), daemon=True)
            for _ in range(args.actors)
        ]
        for actor in actors:
            actor.start()
        opening = time.monotonic() + 120
        while counts.get("ready", 0) < args.streams:
            assert reader.is_alive() and time.monotonic() < opening, counts
            time.sleep(0.2)
        print(f"{args.streams} streams open on {args.api_workers} API process(es)")
        procs += start_workers(args.workers, env)
        # The active players' tables, bots at once: their your_turn items start to flow.
        for token in actives:
            r = session.post(
                f"{base}/v1/tables",
                json={"bots_after": 0, "next_hand_seconds": 0},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert r.status_code == 201, r.text
        # Warm-up (the workers start, the first hands are dealt), then the measured window.
        time.sleep(args.warmup)
        delays.clear()
        start_counts = dict(counts)
        ages: list[tuple[float, float]] = []
        window = threading.Event()
        sampler = threading.Thread(
            target=oldest_transaction, args=(args.admin_url, name, window, ages), daemon=True
        )
        sampler.start()
        cpu_before = cpu_seconds(procs, name)
        time.sleep(args.seconds)
        cpu = {k: v - cpu_before[k] for k, v in cpu_seconds(procs, name).items()}
        window.set()
        ms = [d * 1000 for d in delays]
        settled = counts.get("settled", 0) - start_counts.get("settled", 0)
        print(
            f"{args.streams} player streams ({args.active} active at tables with 3 bots,"
            f" {idle} idle), {args.workers} workers, {args.seconds:.0f} s:"
            f" {settled / args.seconds * 60:,.0f} hands/min settled"
        )
        if ms:
            print(
                f"your_turn on the player stream, event recorded to read: p50"
                f" {statistics.median(ms):.1f} ms, p90 {percentile(ms, 0.9):.1f} ms,"
                f" p99 {percentile(ms, 0.99):.1f} ms, max {max(ms):.1f} ms ({len(ms)} turns)"
            )
        print(f"streams reopened (closed by the server): {counts['reopened']}")
        print(
            "CPU in the window: "
            + ", ".join(f"{k} {v / args.seconds:.0%} of a core" for k, v in cpu.items())
            + f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )
        for n, where in enumerate(("the benchmark's database", "other databases")):
            seen = [a[n] for a in ages]
            slow = sum(1 for a in seen if a > 0.1) / max(1, len(seen))
            print(
                f"oldest running transaction in {where}: max {max(seen, default=0) * 1000:.0f}"
                f" ms; older than 100 ms {slow:.0%} of the time"
            )
    finally:
        stop.set()
        terminate(procs)
        if not isinstance(api_log, int):
            api_log.close()


def main() -> None:
    parser = command_line(__doc__, postgres=True)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--active", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--warmup", type=float, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--api-workers", type=int, default=1)
    parser.add_argument("--actors", type=int, default=8, help="client threads that act")
    parser.add_argument("--api-log", help="a file for the API's log (default: none)")
    parser.add_argument(
        "--own-postgres",
        action="store_true",
        help="a PostgreSQL server of its own (embedded), not --admin-url's",
    )
    args = parse(parser, streams=6, active=2, seconds=1.5, warmup=2, workers=1, actors=2)
    if args.own_postgres:
        with own_postgres() as args.admin_url:
            run(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
