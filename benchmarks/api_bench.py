"""API benchmark: the command round-trip over HTTP into PostgreSQL, next to the database's
own commit rate on this machine.

    .venv/bin/python benchmarks/api_bench.py [--seconds S] [--clients 1,32] [--smoke]

It creates a scratch database (``ddz_bench_<random>`` on the server of ``--admin-url``),
migrates it, starts the API under gunicorn as ``ddz serve`` does (the settings of
``service/gunicorn_conf.py``: a gevent worker per core) on a free local port with its own
Redis DB (flushed), and waits for ``/healthz`` (it runs no worker, which ``/readyz`` asks for). Then, for each client count, every client thread drives its own
match (four player tokens, one persistent HTTP connection, answers parsed by httptools so
that the client takes little of the machine's CPU from the server) and times only
``POST /v1/matches/{id}/commands``: from sending the request to reading the whole answer.
The seat to act picks a legal command from what the previous answers showed (its hand,
the play to beat); creating matches, taking seats and the few view reads a hand needs
(the other seats' hands after the deal, the landlord's after the bottom) are not timed.
When a hand ends the client starts a new match. Last, a bare ``INSERT ...; COMMIT`` loop
on the same database (psycopg 3, one small row per transaction) gives the commit rate the
API is built on. Everything is stopped and dropped at the end, also on Ctrl-C or errors.

Commands/s is timed commands over the phase's wall time, so the untimed setup requests of
new hands (about 7% of the requests) count against it. Each phase also says how much CPU
gunicorn, PostgreSQL, Redis and the bench client used per command, and warns when other
processes took more than a tenth of the machine (the figures are then disturbed).
``--idempotency`` sends an Idempotency-Key with every command; ``--connection-per-seat``
gives each seat its own connection, as four phones would have, so that a match's commands
reach several workers and a worker often has not seen the match's last event (by default
one connection serves the four seats); ``--app`` serves another
WSGI entry point (a variant to compare; PYTHONPATH reaches gunicorn); ``--compiled`` serves
the build the image runs (``bin/compiled``: the rules' hot modules and the bot search
compiled by mypyc) instead of the checkout's pure-Python sources.

First (unless ``--no-floor``), before the API's server starts, the floor: what gunicorn and
Flask cost per request doing nothing of ours (``floor_bench.py``'s ``flask`` route, driven
by as many clients as the most of ``--clients``), and its ``commit`` and ``read`` routes (the
same route committing, or reading, one row through a psycopg pool: the least a command's
append, or a read of the store, can cost). After the commands, two reads are
measured with as many clients, each client with a connection of its own reading for its
match's four players in turn: the view (``GET /v1/matches/{id}``) and the player's feed
(``GET /v1/me/events`` after the id of its fifth item from the end, found untimed: a poll
that finds news). The command's gunicorn CPU per command and each read's per request are
printed over the floor's (issue 29's target: at most twice it), and the commands' p99 over
their p50 (at most 4).

Targets (issue 17): command p50 <= 2 ms with one client; with 32 clients, p99 <= 50 ms
and commands/s at least a quarter of the bare commit rate on as many connections, both
measured in this run (the ratio is printed: the machine's load moves both).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlparse

import httptools
import psutil
import psycopg
from common import (
    ROOT,
    command_line,
    flushed,
    free_port,
    gunicorn,
    ms,
    parse,
    percentile,
    scratch_database,
    tail,
    unlimited_environment,
    wait_ready,
)
from psycopg import sql

from service.rules import legal_moves, parse_cards, readings
from service.rules.rulesets import Ruleset

TARGET_P50_ONE_MS = 2.0
#: Commands/s with 32 clients over INSERT+COMMIT/s on 32 connections, from the same run.
TARGET_SHARE = 0.25
TARGET_P99_MS = 50.0
#: The reads measured after the commands: their names, and the request each sends.
READS = {"view": "GET /v1/matches/{id}", "feed": "GET /v1/me/events"}
#: Issue 29: a command's (and a read's) gunicorn CPU over the empty Flask route's, one run.
TARGET_FLOOR_RATIO = 2.0
#: Issue 29: p99 over p50 of the commands with the most clients.
TARGET_TAIL_RATIO = 4.0
BOMBS = ("bomb", "joker_bomb")
#: A JSON object, as the API sends and takes them.
Json = dict[str, Any]


# ---------------------------------------------------------------------------------------
# The scratch database, Redis DB and gunicorn


class Environment:
    """Creates what the run needs and removes it again (``close`` is safe to call twice)."""

    def __init__(self, args: argparse.Namespace, server_env: dict[str, str] | None = None):
        self.args = args
        #: More of the server's environment (the rate limits: see ``main``).
        self.server_env = server_env or {}
        self.stack = ExitStack()
        self.db_name = self.dsn = ""
        self.gunicorn: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.port = 0

    def open(self) -> None:
        self.db_name, self.dsn = self.stack.enter_context(scratch_database(self.args.admin_url))
        print(f"database {self.db_name}, migrated", flush=True)
        self.stack.enter_context(flushed(self.args.redis_url))

        self.port = free_port()
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.dsn,
            REDIS_URL=self.args.redis_url,
            DDZ_OPERATOR_TOKEN=secrets.token_urlsafe(24),
        )
        env.update(self.server_env)
        fd, name = tempfile.mkstemp(prefix="ddz-api-bench-", suffix=".log")
        os.close(fd)
        self.log_path = Path(name)
        if not self.args.keep_log:
            self.stack.callback(self.log_path.unlink, missing_ok=True)
        command = gunicorn(
            self.port,
            *(["--workers", str(self.args.workers)] if self.args.workers else []),
            # Without --worker-class, the one service/gunicorn_conf.py names (as deployed).
            *(["--worker-class", self.args.worker_class] if self.args.worker_class else []),
            *(["--threads", str(self.args.threads)] if self.args.worker_class == "gthread" else []),
            # Longer than gunicorn's 2 s default so that a client's connection is never
            # closed under it between phases (a command is never re-sent).
            "--keep-alive",
            "60",
        )
        if self.args.access_log:
            command += ["--access-logfile", "-"]
        command.append(self.args.app)
        # gunicorn imports the app from its working directory, which comes first on its path.
        served = self._compiled() if self.args.compiled else ROOT
        with open(self.log_path, "ab") as log:
            self.gunicorn = subprocess.Popen(
                command,
                env=env,
                cwd=served,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.stack.callback(self._stop_gunicorn)
        wait_ready(f"http://127.0.0.1:{self.port}/healthz", self.gunicorn, 60, self.log_path)
        print(
            f"gunicorn pid {self.gunicorn.pid} on 127.0.0.1:{self.port} "
            f"({self.args.workers or os.cpu_count()} {self.args.worker_class or 'gevent'} workers"
            f"{f' x {self.args.threads} threads' if self.args.worker_class == 'gthread' else ''}; log {self.log_path})",
            flush=True,
        )

    def _compiled(self) -> Path:
        """A build of the checkout as the image runs it, removed at the end."""
        out = Path(self.stack.enter_context(tempfile.TemporaryDirectory(prefix="ddz-compiled-")))
        subprocess.run([ROOT / "bin" / "compiled", out], check=True, stdout=subprocess.DEVNULL)
        print(f"serving the compiled build in {out}", flush=True)
        return out

    def _stop_gunicorn(self) -> None:
        if self.gunicorn is not None and self.gunicorn.poll() is None:
            self.gunicorn.terminate()
            try:
                self.gunicorn.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.gunicorn.kill()
                self.gunicorn.wait()
        self.gunicorn = None

    def close(self) -> None:
        """Stops gunicorn, flushes the Redis DB, drops the database, removes the log."""
        self.stack.close()

    def server_pids(self) -> list[int]:
        if self.gunicorn is None:
            return []
        master = psutil.Process(self.gunicorn.pid)
        return [master.pid] + [p.pid for p in master.children(recursive=True)]


# ---------------------------------------------------------------------------------------
# CPU accounting (where the machine's time goes during a phase)


class CpuMeter:
    """CPU seconds used between ``start`` and ``stop`` by the bench process, gunicorn (master
    and workers), this run's PostgreSQL processes (the backends of the scratch database and
    the server's own background processes), the Redis server of ``--redis-url``, and the
    whole machine. Per process, so that processes that come and go do not skew the sums."""

    def __init__(self, env: Environment):
        self.env = env
        self.redis_port = f":{urlparse(env.args.redis_url).port or 6379}"

    def _category(self, proc: psutil.Process) -> str | None:
        name = proc.info["name"] or ""
        if name.startswith("postgres"):
            title = " ".join(proc.info["cmdline"] or [])
            # Client backends of other databases ("... db 127.0.0.1(port) ...") are not ours.
            if self.env.db_name in title or ("(" not in title and "[local]" not in title):
                return "postgres"
        elif name.startswith("redis-server") and self.redis_port in " ".join(
            proc.info["cmdline"] or []
        ):
            return "redis"
        return None

    def _sample(self) -> dict[str, Any]:
        own = os.times()
        per_process: dict[tuple[str, int, float], float] = {}
        gunicorn = set(self.env.server_pids())
        for proc in psutil.process_iter(["name", "cmdline", "cpu_times", "create_time"]):
            t = proc.info["cpu_times"]
            if t is None:
                continue
            category = "gunicorn" if proc.pid in gunicorn else self._category(proc)
            if category is not None:
                per_process[(category, proc.pid, proc.info["create_time"])] = t.user + t.system
        total = psutil.cpu_times()
        busy = (
            total.user
            + total.system
            + getattr(total, "nice", 0)
            + getattr(total, "irq", 0)
            + getattr(total, "softirq", 0)
        )
        return {
            "client": own.user + own.system,
            "processes": per_process,
            "busy": busy,
            "all": sum(total),
        }

    def start(self) -> None:
        self.before = self._sample()

    def stop(self) -> dict[str, float]:
        after = self._sample()
        usage = {k: after[k] - self.before[k] for k in ("client", "busy", "all")}
        usage.update(gunicorn=0.0, postgres=0.0, redis=0.0)
        for key, seconds in after["processes"].items():
            usage[key[0]] += seconds - self.before["processes"].get(key, 0.0)
        return usage


# ---------------------------------------------------------------------------------------
# HTTP client


class _Answer:
    """httptools callbacks: the body of one answer, whether it is complete, and whether
    the server keeps the connection open (asked when the headers are in: once the message
    is complete the parser has reset and always says no)."""

    def __init__(self) -> None:
        self.parser: httptools.HttpResponseParser | None = None
        self.body: list[bytes] = []
        self.complete = False
        self.keep_alive = False

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class Http:
    """One persistent HTTP/1.1 connection, opened again when the server has closed it
    (gunicorn does after ``DDZ_REQUESTS_PER_CONNECTION`` requests). Requests are a few
    formatted lines; answers are parsed by httptools (llhttp, in C). The bench shares the
    machine's two cores with the server, and http.client, which parses headers with the
    email package, cost as much CPU per command as a third of the server's own work."""

    def __init__(self, port: int):
        self.port = port
        self.sock: socket.socket | None = None

    def open(self) -> socket.socket:
        """The connection, opened when it is not."""
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(
        self,
        method: str,
        path: str,
        token: str | None = None,
        body: Json | None = None,
        extra: dict[str, str] | None = None,
    ) -> tuple[int, bytes, float]:
        """(status, raw body, seconds from sending to the last byte of the answer)."""
        sock = self.open()
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            "Accept: application/json",
        ]
        lines += [f"{name}: {value}" for name, value in (extra or {}).items()]
        payload = b""
        if token is not None:
            lines.append(f"Authorization: Bearer {token}")
        if body is not None:
            payload = json.dumps(body).encode()
            lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        elif method == "POST":
            lines.append("Content-Length: 0")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode() + payload
        answer = _Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)
        start = time.perf_counter()
        try:
            sock.sendall(request)
            while not answer.complete:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionResetError("the server closed the connection")
                parser.feed_data(chunk)
        except (OSError, httptools.HttpParserError):
            self.close()
            raise
        elapsed = time.perf_counter() - start
        if not answer.keep_alive:
            self.close()
        return parser.get_status_code(), b"".join(answer.body), elapsed

    def call(
        self,
        method: str,
        path: str,
        token: str | None = None,
        body: Json | None = None,
        expect: tuple[int, ...] = (200, 201),
    ) -> Json:
        """An untimed request that must succeed (retried once on a dropped connection: only
        reads and setup go through here, never a command)."""
        for attempt in range(2):
            try:
                status, raw, _ = self.send(method, path, token, body)
                break
            except (OSError, httptools.HttpParserError):
                if attempt:
                    raise
        if status not in expect:
            raise RuntimeError(f"{method} {path} -> {status}: {raw[:300]!r}")
        answer: Json = json.loads(raw)
        return answer


# ---------------------------------------------------------------------------------------
# One client: a match at a time, the four seats driven from one thread


@dataclass
class ClientStats:
    latencies: list[float] = field(default_factory=list)
    by_action: dict[str, list[float]] = field(default_factory=dict)
    rejected: Counter[str] = field(default_factory=Counter)
    hands: int = 0
    untimed_requests: int = 0
    dropped: int = 0


class Game:
    """What a client knows of its match: each seat's hand and the public state, from the
    answers it got. The seat to act picks a legal command from that."""

    def __init__(
        self,
        connections: list[Http],
        tokens: list[str],
        rng: random.Random,
        stats: ClientStats,
        idempotency: bool,
    ):
        self.connections, self.tokens, self.rng, self.stats = connections, tokens, rng, stats
        self.idempotency = idempotency

    def _untimed(self, method: str, path: str, token: str, body: Json | None = None) -> Json:
        self.stats.untimed_requests += 1
        return self.connections[self.tokens.index(token)].call(method, path, token, body)

    def new_match(self) -> None:
        match = self._untimed("POST", "/v1/matches", self.tokens[0], {"turn_seconds": 3600})
        self.match_id = match["match_id"]
        self.path = f"/v1/matches/{self.match_id}"
        for seat, token in enumerate(self.tokens):
            view = self._untimed("POST", f"{self.path}/seats", token, {"seat": seat})
        self.hands: list[list[str]] = [[] for _ in range(4)]
        self.bombs_left: list[int | None] = [None] * 4
        self.ruleset = Ruleset.by_name(view["ruleset"])
        self.landlord_synced = False
        self.absorb(view)  # seat 3, after the deal
        for seat in range(3):
            self.absorb(self._untimed("GET", self.path, self.tokens[seat]))

    def resync(self) -> None:
        for seat in range(4):
            self.absorb(self._untimed("GET", self.path, self.tokens[seat]))
        self.landlord_synced = self.landlord is not None

    def absorb(self, view: Json) -> None:
        seat = view["seat"]
        self.hands[seat] = view["hand"]
        self.bombs_left[seat] = view["bombs_left"]
        self.phase, self.turn, self.lead = view["phase"], view["turn"], view["lead"]
        self.bids, self.landlord = view["bids"], view["landlord"]
        if self.landlord is not None and seat == self.landlord:
            self.landlord_synced = True

    def choose(self) -> Json:
        """A legal command for the seat to act."""
        rng, phase = self.rng, self.phase
        if phase == "bidding":
            highest = max((b or 0) for b in self.bids)
            higher = [v for v in (1, 2, 3) if v > highest]
            return {
                "action": "bid",
                "value": rng.choice(higher) if higher and rng.random() < 0.4 else 0,
            }
        if phase == "show_hand":
            return {"action": "show_hand", "value": rng.random() < 0.2}
        if phase == "report":
            # Declining keeps no ranks locked, so the plays below need no 报到 constraint.
            return {"action": "report", "value": "decline"}
        if phase != "playing":
            raise RuntimeError(f"nothing to do in phase {phase!r}")
        seat = self.turn
        hand = parse_cards(self.hands[seat])
        lead = None
        if self.lead is not None:
            options = readings(parse_cards(self.lead["cards"]), self.ruleset)
            matching = [
                c
                for c in options
                if c.type.value == self.lead["type"] and c.rank == self.lead["rank"]
            ]
            lead = (matching or options)[-1]
        moves = legal_moves(hand, lead, ruleset=self.ruleset, bombs_left=self.bombs_left[seat])
        if lead is None:
            # Lead one of the first plays the generator offers (singles, pairs, triples,
            # then sequences ...), a bomb only when nothing else is left.
            first = list(itertools.islice(moves, 48))
            plain = [m for m in first if m.combination.type.value not in BOMBS]
            move = rng.choice(plain or first)
        else:
            # Follow with the lowest plain reply most of the time, otherwise pass.
            replies = [
                m for m in itertools.islice(moves, 6) if m.combination.type.value not in BOMBS
            ]
            if not replies or rng.random() < 0.3:
                return {"action": "pass"}
            move = replies[0]
        return {"action": "play", "cards": [c.code for c in move.cards]}

    def step(self, timed: bool) -> None:
        """Send one command for the seat to act (timed), then catch up what the next seat
        needs to know (untimed)."""
        body = self.choose()
        seat = self.turn
        key = secrets.token_hex(8) if self.idempotency else None
        try:
            status, raw, elapsed = self._command(seat, body, key)
        except (OSError, httptools.HttpParserError):
            # The connection broke: whether the command went through is unknown; look.
            self.stats.dropped += 1
            self.resync()
            return
        if status != 200:
            code = "?"
            try:
                code = json.loads(raw).get("code", "?")
            except ValueError:
                pass
            self.stats.rejected[f"{status} {code}"] += 1
            self.resync()
            return
        if timed:
            self.stats.latencies.append(elapsed)
            self.stats.by_action.setdefault(body["action"], []).append(elapsed)
        result = json.loads(raw)
        before = self.phase
        self.absorb(result["view"])
        if self.phase == "ended":
            self.stats.hands += 1 if timed else 0
            self.new_match()
            return
        if before == "bidding" and self.landlord is not None and not self.landlord_synced:
            # The bottom went to a landlord other than the seat that answered: read its hand.
            self.absorb(self._untimed("GET", self.path, self.tokens[self.landlord]))

    def _command(self, seat: int, body: Json, key: str | None) -> tuple[int, bytes, float]:
        extra = {"Idempotency-Key": key} if key is not None else None
        return self.connections[seat].send(
            "POST", f"{self.path}/commands", self.tokens[seat], body, extra
        )


class Client(threading.Thread):
    """Plays from the ``go`` event until its ``deadline`` or the ``stop`` event."""

    def __init__(
        self,
        index: int,
        port: int,
        seed: int,
        options: argparse.Namespace,
        go: threading.Event,
        stop: threading.Event,
    ):
        super().__init__(name=f"client-{index}", daemon=True)
        # One connection for the four seats, or one each (as four phones would).
        self.connections = (
            [Http(port) for _ in range(4)] if options.connection_per_seat else [Http(port)] * 4
        )
        self.rng = random.Random(seed)
        self.stats = ClientStats()
        self.idempotency = options.idempotency
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.go, self.stop = go, stop
        self.deadline = 0.0

    def prepare(self) -> None:
        """Players and a first match, before the clock starts."""
        tokens = [
            self.connections[seat].call(
                "POST", "/v1/players", body={"name": f"{self.name}-seat{seat}"}
            )["token"]
            for seat in range(4)
        ]
        self.game = Game(self.connections, tokens, self.rng, self.stats, self.idempotency)
        self.game.new_match()

    def run(self) -> None:
        try:
            self.prepare()
            self.ready.set()
            self.go.wait()
            while not self.stop.is_set() and time.perf_counter() < self.deadline:
                self.game.step(timed=True)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
            self.ready.set()
        finally:
            for http in self.connections:
                http.close()


@dataclass
class RunResult:
    clients: int
    seconds: float
    latencies: list[float]
    by_action: dict[str, list[float]]
    rejected: Counter[str]
    hands: int
    untimed: int
    dropped: int
    cpu: dict[str, float] | None
    #: Each client's game as the phase left it (its match and players: the reads' subjects).
    games: list[Game] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def gunicorn_ms(self) -> float:
        """gunicorn's CPU per timed command, ms."""
        return self.cpu["gunicorn"] / len(self.latencies) * 1e3 if self.cpu else float("nan")


def run_clients(
    env: Environment,
    count: int,
    seconds: float,
    seed: int,
    options: argparse.Namespace,
    stop: threading.Event,
    cpu: CpuMeter | None,
) -> RunResult:
    go = threading.Event()
    clients = [Client(i, env.port, seed * 1000 + i, options, go, stop) for i in range(count)]
    for client in clients:
        client.start()
    for client in clients:
        while not client.ready.wait(0.2):
            if stop.is_set():
                raise KeyboardInterrupt
        if client.error is not None:
            stop.set()
            raise RuntimeError(
                f"{client.name} failed to set up: {client.error!r}"
            ) from client.error
    untimed_before = sum(c.stats.untimed_requests for c in clients)
    if cpu:
        cpu.start()
    started = time.perf_counter()
    for client in clients:
        client.deadline = started + seconds
    go.set()
    for client in clients:
        while client.is_alive():
            client.join(0.2)
    elapsed = time.perf_counter() - started
    usage = cpu.stop() if cpu else None
    errors = [c for c in clients if c.error is not None]
    if errors:
        raise RuntimeError(f"{errors[0].name} failed: {errors[0].error!r}") from errors[0].error
    by_action: dict[str, list[float]] = {}
    rejected: Counter[str] = Counter()
    for c in clients:
        for action, values in c.stats.by_action.items():
            by_action.setdefault(action, []).extend(values)
        rejected.update(c.stats.rejected)
    return RunResult(
        clients=count,
        seconds=elapsed,
        latencies=[x for c in clients for x in c.stats.latencies],
        by_action=by_action,
        rejected=rejected,
        hands=sum(c.stats.hands for c in clients),
        untimed=sum(c.stats.untimed_requests for c in clients) - untimed_before,
        dropped=sum(c.stats.dropped for c in clients),
        cpu=usage,
        games=[c.game for c in clients],
    )


# ---------------------------------------------------------------------------------------
# Reads: the caller's view of a match and the player's own feed


@dataclass
class ReadResult:
    name: str
    seconds: float
    latencies: list[float]
    cpu: dict[str, float]

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def gunicorn_ms(self) -> float:
        return self.cpu["gunicorn"] / max(1, len(self.latencies)) * 1e3


def run_until(
    threads: list[threading.Thread], go: threading.Event, deadline: list[float], seconds: float
) -> float:
    """Lets the started ``threads`` go (``go``) until ``seconds`` from now (their
    ``deadline``), waits for them to end, and returns the wall time they took."""
    started = time.perf_counter()
    deadline[0] = started + seconds
    go.set()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    return time.perf_counter() - started


def view_reads(game: Game, http: Http) -> list[tuple[str, str]]:
    """The view of the client's match, each seat's in turn."""
    return [(game.path, token) for token in game.tokens]


def feed_reads(game: Game, http: Http) -> list[tuple[str, str]]:
    """Each seat's feed after the id of its fifth item from the end (what a poll that
    finds news reads), found by reading the feed through once (untimed)."""
    reads = []
    for token in game.tokens:
        ids: list[str] = []
        after = ""
        while True:
            page = http.call("GET", f"/v1/me/events{after}", token)
            ids += [item["id"] for item in page["items"]]
            if not page["items"]:
                break
            after = f"?after={page['last_id']}"
        query = f"?after={ids[-5]}" if len(ids) >= 5 else ""
        reads.append((f"/v1/me/events{query}", token))
    return reads


def run_reads(
    env: Environment,
    name: str,
    games: list[Game],
    reads_of: Callable[[Game, Http], list[tuple[str, str]]],
    seconds: float,
    stop: threading.Event,
    cpu: CpuMeter,
) -> ReadResult:
    """One client thread per game (its own connection) sending the GETs ``reads_of``
    gives, round and round, for ``seconds``; each timed as a command is."""
    connections = [Http(env.port) for _ in games]
    plans = [reads_of(game, http) for game, http in zip(games, connections, strict=True)]
    latencies: list[list[float]] = [[] for _ in games]
    failures: list[BaseException] = []
    deadline = [0.0]
    go = threading.Event()

    def client(i: int) -> None:
        http, mine = connections[i], latencies[i]
        try:
            go.wait()
            for path, token in itertools.cycle(plans[i]):
                if stop.is_set() or time.perf_counter() >= deadline[0]:
                    break
                status, raw, elapsed = http.send("GET", path, token)
                if status != 200:
                    raise RuntimeError(f"GET {path} -> {status}: {raw[:300]!r}")
                mine.append(elapsed)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)
        finally:
            http.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(len(games))]
    for t in threads:
        t.start()
    cpu.start()
    elapsed = run_until(threads, go, deadline, seconds)
    usage = cpu.stop()
    if failures:
        raise RuntimeError(f"{name} reads failed: {failures[0]!r}") from failures[0]
    return ReadResult(name, elapsed, [x for mine in latencies for x in mine], usage)


# ---------------------------------------------------------------------------------------
# The database's own commit rate


def commit_loop(
    dsn: str, connections: int, seconds: float, stop: threading.Event, notify: bool = False
) -> tuple[int, float, list[float]]:
    """``INSERT`` one small row, ``COMMIT``, again, on ``connections`` connections at once;
    with ``notify``, each transaction also sends a notification (as the append did in its
    own transaction until issue 17: PostgreSQL serialises such commits server-wide)."""
    insert = "INSERT INTO bench_scratch (n, note) VALUES (%s, %s)"
    if notify:
        insert = (
            f"WITH i AS ({insert} RETURNING id) SELECT pg_notify('ddz_bench', i.id::text) FROM i"
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_scratch (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " n integer NOT NULL, note text NOT NULL, at timestamptz NOT NULL DEFAULT now())"
        )
    latencies: list[list[float]] = [[] for _ in range(connections)]
    ready = threading.Barrier(connections + 1)
    go = threading.Event()
    deadline = [0.0]
    failures: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            with psycopg.connect(dsn) as conn:
                mine = latencies[i]
                ready.wait()
                go.wait()
                n = 0
                while not stop.is_set() and time.perf_counter() < deadline[0]:
                    start = time.perf_counter()
                    conn.execute(insert, (n, "x"))
                    conn.commit()
                    mine.append(time.perf_counter() - start)
                    n += 1
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)
            ready.abort()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(connections)]
    for t in threads:
        t.start()
    try:
        ready.wait()
    except threading.BrokenBarrierError:
        pass
    elapsed = run_until(threads, go, deadline, seconds)
    if failures:
        raise RuntimeError(f"commit loop failed: {failures[0]!r}") from failures[0]
    flat = [x for mine in latencies for x in mine]
    return len(flat), elapsed, flat


# ---------------------------------------------------------------------------------------
# Report


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report(
    runs: list[RunResult],
    commits: list[tuple[int, int, float, list[float]]],
    settings: dict[str, str],
    notifying: list[tuple[int, int, float, list[float]]] | None = None,
    floor: tuple[int, float, float, float, float] | None = None,
    reads: list[ReadResult] | None = None,
) -> None:
    print()
    print(f"{'figure':<44} {'measured':>14}   {'target':<12} ")
    print("-" * 80)
    if floor is not None:
        # Our own work against the framework's: CPU per request over the floor's, one run.
        clients, floor_rate, floor_ms, commit_ms, read_ms = floor
        print(
            f"{f'floor: empty Flask route, {clients} clients':<44} {floor_ms:>11.3f} ms   "
            f"gunicorn CPU per request ({floor_rate:,.0f} requests/s)"
        )
        # What one round trip to the store adds to the floor, before any of the game's work.
        for name, store_ms in (("commit", commit_ms), ("read", read_ms)):
            print(
                f"{f'floor with one {name} (floor_bench {name})':<44} {store_ms:>11.3f} ms   "
                f"{store_ms / floor_ms:.2f}x the floor"
            )
        for run in runs:
            if run.clients == clients and run.latencies:
                ratio = run.gunicorn_ms() / floor_ms
                print(
                    f"{f'command: gunicorn CPU, {clients} clients':<44} {run.gunicorn_ms():>11.3f} ms"
                )
                print(
                    f"{'command CPU over the floor':<44} {ratio:>13.2f}x   "
                    f"<= {TARGET_FLOOR_RATIO:g}x        {verdict(ratio <= TARGET_FLOOR_RATIO)}"
                )
                print(
                    f"{'command CPU over the floor with one commit':<44} "
                    f"{run.gunicorn_ms() / commit_ms:>13.2f}x"
                )
                p50, p99 = percentile(run.latencies, 0.5), percentile(run.latencies, 0.99)
                print(
                    f"{f'command p99 over p50, {clients} clients':<44} {p99 / p50:>13.2f}x   "
                    f"<= {TARGET_TAIL_RATIO:g}x        {verdict(p99 <= TARGET_TAIL_RATIO * p50)}"
                )
        for read in reads or []:
            ratio = read.gunicorn_ms() / floor_ms
            print(
                f"{read.name + ': gunicorn CPU per ' + READS[read.name]:<44} {read.gunicorn_ms():>11.3f} ms"
                f"   ({read.rate:,.0f}/s, p50 {ms(percentile(read.latencies, 0.5))}, "
                f"p99 {ms(percentile(read.latencies, 0.99))})"
            )
            print(
                f"{read.name + ' CPU over the floor':<44} {ratio:>13.2f}x   "
                f"<= {TARGET_FLOOR_RATIO:g}x        {verdict(ratio <= TARGET_FLOOR_RATIO)}"
            )
            print(
                f"{read.name + ' CPU over the floor with one read':<44} {read.gunicorn_ms() / read_ms:>13.2f}x"
            )
    for run in runs:
        label = f"{run.clients} client{'s' if run.clients != 1 else ''}"
        p50, p99 = percentile(run.latencies, 0.5), percentile(run.latencies, 0.99)
        target50 = ""
        if run.clients == 1:
            target50 = f"<= {TARGET_P50_ONE_MS:g} ms   {verdict(p50 * 1e3 <= TARGET_P50_ONE_MS)}"
        print(f"{'command round-trip p50, ' + label:<44} {ms(p50):>14}   {target50}")
        print(
            f"{'command round-trip p99, ' + label:<44} {ms(p99):>14}   <= {TARGET_P99_MS:g} ms  {verdict(p99 * 1e3 <= TARGET_P99_MS)}"
        )
        print(f"{'commands/s, ' + label:<44} {run.rate:>12,.0f}/s")
    bare = {}
    for connections, count, elapsed, lat in commits:
        bare[connections] = count / elapsed
        label = f"INSERT+COMMIT, {connections} connection{'s' if connections != 1 else ''}"
        print(
            f"{label + ' (tx/s)':<44} {bare[connections]:>12,.0f}/s   (p50 {ms(percentile(lat, 0.5))}, p99 {ms(percentile(lat, 0.99))})"
        )
    for connections, count, elapsed, lat in notifying or []:
        label = f"INSERT+NOTIFY+COMMIT, {connections} connections"
        print(
            f"{label + ' (tx/s)':<44} {count / elapsed:>12,.0f}/s   (p50 {ms(percentile(lat, 0.5))}, p99 {ms(percentile(lat, 0.99))})"
        )
    for run in runs:
        if run.clients in bare:
            share = run.rate / bare[run.clients]
            target = ""
            if run.clients >= 32:
                target = f">= {TARGET_SHARE:.0%}       {verdict(share >= TARGET_SHARE)}"
            label = f"commands/s over INSERT+COMMIT/s, {run.clients}"
            print(f"{label:<44} {share:>13.1%}   {target}")
    print("-" * 80)

    print()
    print("details")
    for run in runs:
        print(
            f"  {run.clients:>3} client(s): {len(run.latencies):,} commands in {run.seconds:.1f} s, {run.hands} hands finished, "
            f"{run.untimed:,} untimed setup/view requests, rejected {dict(run.rejected) or 'none'}, dropped {run.dropped}"
        )
        mix = ", ".join(
            f"{action} {len(values) / max(1, len(run.latencies)):.0%} p50 {ms(percentile(values, 0.5))}"
            for action, values in sorted(run.by_action.items(), key=lambda kv: -len(kv[1]))
        )
        print(f"      mix: {mix}")
        print(
            f"      p90 {ms(percentile(run.latencies, 0.9))}, p99.9 {ms(percentile(run.latencies, 0.999))}, max {ms(max(run.latencies, default=float('nan')))}"
        )
        if run.cpu and run.latencies:
            n = len(run.latencies)
            cores = psutil.cpu_count()
            busy = run.cpu["busy"] / run.cpu["all"] if run.cpu["all"] else float("nan")
            other = run.cpu["busy"] - sum(
                run.cpu[k] for k in ("client", "gunicorn", "postgres", "redis")
            )
            print(
                f"      CPU per command: gunicorn {run.cpu['gunicorn'] / n * 1e3:.2f} ms, postgres {run.cpu['postgres'] / n * 1e3:.2f} ms, "
                f"redis {run.cpu['redis'] / n * 1e3:.2f} ms, bench client {run.cpu['client'] / n * 1e3:.2f} ms, "
                f"other {other / n * 1e3:.2f} ms; machine {busy:.0%} busy of {cores} cores"
            )
            if run.cpu["all"] and other / run.cpu["all"] > 0.1:
                print(
                    f"      WARNING: other processes took {other / run.cpu['all']:.0%} of the machine during this "
                    "phase; these figures are disturbed (run again on a quiet machine)"
                )
    print("  postgres: " + ", ".join(f"{k}={v}" for k, v in settings.items()))


# ---------------------------------------------------------------------------------------


def main() -> int:
    parser = command_line(__doc__, postgres=True, redis_database=True)
    parser.add_argument(
        "--seconds", type=float, default=15.0, help="length of each measured phase (default 15)"
    )
    parser.add_argument(
        "--clients", default="1,32", help="client counts, comma-separated (default 1,32)"
    )
    parser.add_argument(
        "--commit-connections",
        default="1,32",
        help="connections of the INSERT+COMMIT loop (default 1,32)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=3.0,
        help="seconds of untimed play first, with the most clients",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="gunicorn workers (default as ddz serve: one per core)",
    )
    parser.add_argument(
        "--worker-class",
        default=None,
        help="default: ddz serve's (gevent, service/gunicorn_worker.py); gevent or gthread to compare",
    )
    parser.add_argument("--threads", type=int, default=32, help="threads per gthread worker")
    parser.add_argument(
        "--access-log", action="store_true", help="gunicorn access log on (as ddz serve has it)"
    )
    parser.add_argument(
        "--app",
        default="service.api.wsgi:app",
        help="the WSGI app gunicorn serves (to compare a variant)",
    )
    parser.add_argument(
        "--idempotency", action="store_true", help="send an Idempotency-Key with every command"
    )
    parser.add_argument(
        "--connection-per-seat",
        action="store_true",
        help="each seat of a match on its own connection (so its commands reach several workers)",
    )
    parser.add_argument(
        "--notifying",
        action="store_true",
        help="also INSERT+COMMIT with a pg_notify in each transaction (what one lock serialises)",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="serve the build the image runs (bin/compiled: the rules and the search by mypyc)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep-log", action="store_true", help="keep gunicorn's log file")
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="measure neither the floor (floor_bench's flask route) nor the reads",
    )
    args = parse(
        parser, seconds=0.5, clients="1,2", commit_connections="1,2", warmup=0.3, notifying=True
    )
    counts = [int(x) for x in args.clients.split(",") if x.strip()]
    commit_connections = [int(x) for x in args.commit_connections.split(",") if x.strip()]

    # The limits stay on, so that their cost is measured, but far above this load: 128
    # players from one address, each seat at many times a person's pace.
    server_env = unlimited_environment()

    floor = None
    if not args.no_floor and counts:
        # First, before the API's server starts: the same machine, minutes apart at most.
        from floor_bench import measure as floor_measure
        from floor_bench import measure_store

        clients = max(counts)
        print(f"measuring: the floor, floor_bench's flask route, {clients} clients", flush=True)
        workers = args.workers or os.cpu_count() or 2
        rate, cpu_ms = floor_measure("floor_bench:flask", clients, args.seconds, workers)
        print(f"measuring: floor_bench's commit and read routes, {clients} clients", flush=True)
        store = measure_store(args.admin_url, clients, args.seconds, workers)
        floor = (clients, rate, cpu_ms, store["commit"][1], store["read"][1])

    def measure(env: Environment, stop: threading.Event) -> int:
        cpu = CpuMeter(env)
        with psycopg.connect(env.dsn) as conn:
            settings = {
                name: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchall()[0][0]
                for name in (
                    "fsync",
                    "synchronous_commit",
                    "wal_sync_method",
                    "commit_delay",
                    "shared_buffers",
                )
            }
        if args.warmup > 0 and counts:
            print(f"warm-up: {max(counts)} clients for {args.warmup:g} s", flush=True)
            run_clients(env, max(counts), args.warmup, args.seed + 99, args, stop, None)
        runs = []
        for count in counts:
            print(f"measuring: {count} client(s) for {args.seconds:g} s", flush=True)
            runs.append(run_clients(env, count, args.seconds, args.seed + count, args, stop, cpu))
        reads = []
        if floor is not None:
            games = max(runs, key=lambda run: run.clients).games
            for name, reads_of in (
                ("view", view_reads),
                ("feed", feed_reads),
            ):
                print(
                    f"measuring: {name}, {READS[name]}, {len(games)} clients for {args.seconds:g} s",
                    flush=True,
                )
                reads.append(run_reads(env, name, games, reads_of, args.seconds, stop, cpu))
        commits = []
        for connections in commit_connections:
            print(
                f"measuring: INSERT+COMMIT on {connections} connection(s) for {args.seconds:g} s",
                flush=True,
            )
            done, elapsed, lat = commit_loop(env.dsn, connections, args.seconds, stop)
            commits.append((connections, done, elapsed, lat))
        notifying = []
        if args.notifying:
            connections = max(commit_connections)
            print(
                f"measuring: INSERT+NOTIFY+COMMIT on {connections} connections for {args.seconds:g} s",
                flush=True,
            )
            done, elapsed, lat = commit_loop(env.dsn, connections, args.seconds, stop, notify=True)
            notifying.append((connections, done, elapsed, lat))
        report(runs, commits, settings, notifying, floor, reads)
        return 0

    return serve(args, server_env, measure)


def serve(
    args: argparse.Namespace,
    server_env: dict[str, str],
    body: Callable[[Environment, threading.Event], int],
) -> int:
    """Starts the environment, runs ``body(env, stop)`` and returns what it returns; stops
    and removes everything afterwards, also on Ctrl-C or SIGTERM (then 130) or errors."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()
        raise KeyboardInterrupt

    # Ctrl-C and SIGTERM both end the run through the cleanup below (even where the shell
    # started this with SIGINT ignored).
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    env = Environment(args, server_env)
    try:
        env.open()
        return body(env, stop)
    except KeyboardInterrupt:
        stop.set()
        print("interrupted; cleaning up", file=sys.stderr)
        return 130
    except Exception:
        stop.set()
        if env.log_path is not None:
            print(f"gunicorn log (last lines){tail(env.log_path)}", file=sys.stderr)
        raise
    finally:
        stop.set()
        # A second signal must not cut the cleanup short (it is bounded: gunicorn gets 20 s).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        env.close()


if __name__ == "__main__":
    sys.exit(main())
