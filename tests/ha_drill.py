"""The failover drill (tests/test_failover_drill.py runs it once per way of losing the
primary; benchmarks/failover_drill.py runs it several times and prints its figures); no
tests here.

On this machine, real processes only (tests/ha.py): etcd, Patroni managing two PostgreSQL
instances with ``synchronous_mode``, a Redis master and replica under three sentinels,
and the service as deployed: ``ddz serve`` (migrations, gunicorn with two API
processes, a worker) and a second ``ddz worker``, on ``DATABASE_URL`` listing both
instances with ``target_session_attrs=read-write`` and on ``REDIS_SENTINELS``. Clients
play hands over HTTP, each a person against three system bots, half of them following
their match's event stream too (reconnecting with ``Last-Event-ID``). Mid-play the
PostgreSQL primary is lost (``kill``: SIGKILL to its postmaster; ``cut``: its network is
cut, to its clients, its standby and etcd alike), then the Redis master (SIGKILL).

A client does what the API asks of an app: a command answered 503 is sent again after
``Retry-After``, with the same ``Idempotency-Key``, as is one whose answer never came.
Then the drill checks that every command answered 200 is in the event store, every hand
is settled exactly once, the ledger adds to zero and its check passes, no answer was a
5xx but a 503 with ``Retry-After``, and each stream delivered every event once; and it
measures, from each loss, the time to the first command answered 200 and the time until
every match that was in play then moved on (its seat to act, person or bot, played)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import requests
from api_support import choice, open_stream, sse_messages
from clusters import free_port, server_user
from ha import Patroni, Sentinels, start, stop, wait_until

ROOT = Path(__file__).resolve().parents[1]
OPERATOR = "drill-operator-token"
#: libpq's settings of the drill's DATABASE_URL, as docs/operations.md advises: give up
#: on a server that does not answer a connection in 2 s, and (on a real network) on one
#: that stopped answering an open connection in 5 s.
LIBPQ = {
    "connect_timeout": "2",
    "keepalives_idle": "2",
    "keepalives_interval": "1",
    "keepalives_count": "3",
    "tcp_user_timeout": "5000",
}
#: How long a cut Link holds the connections it had before resetting them (what the
#: keepalives above take on a real network).
SILENT_SECONDS = 5.0
KINDS = ("kill", "cut")
#: A request unanswered this long (the service down for good) fails its client.
GIVE_UP_SECONDS = 120


@dataclass
class Ack:
    """A command answered 200: its match, and the events its answer says it appended."""

    match_id: str
    #: When the attempt that was answered was sent, and when its answer came.
    sent: float
    at: float
    events: list[tuple[int, str]]


@dataclass
class Client:
    """A person playing hand after hand against three system bots, over HTTP."""

    base: str
    name: str
    streams: bool
    session: requests.Session = field(default_factory=requests.Session)
    token: str = ""
    matches: list[str] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    #: (when, match, version, ended) each time the client read its match.
    seen: list[tuple[float, str, int, bool]] = field(default_factory=list)
    #: When the last request was sent.
    sent: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)
    #: 5xx answers other than a 503 with Retry-After: (status, method, path, body).
    errors: list[tuple[int, str, str, str]] = field(default_factory=list)
    #: Per streamed match, the event ids received, in order.
    streamed: dict[str, list[int]] = field(default_factory=dict)
    failure: BaseException | None = None

    def call(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        """The answer to the request, sent again (with the same key) while it is refused
        with 503 or gets no answer; None for a 4xx."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if key:
            headers["Idempotency-Key"] = key
        give_up = time.monotonic() + GIVE_UP_SECONDS
        while True:
            if time.monotonic() > give_up:
                raise AssertionError(f"{method} {path}: no answer in {GIVE_UP_SECONDS} s")
            self.sent = time.monotonic()
            try:
                answer = self.session.request(
                    method, self.base + path, json=body, headers=headers, timeout=15
                )
            except requests.RequestException:
                time.sleep(0.5)
                continue
            self.statuses[answer.status_code] = self.statuses.get(answer.status_code, 0) + 1
            if answer.status_code == 503 and answer.headers.get("Retry-After"):
                time.sleep(float(answer.headers["Retry-After"]))
                continue
            if answer.status_code >= 500:
                self.errors.append((answer.status_code, method, path, answer.text[:500]))
                time.sleep(1)
                continue
            if answer.status_code >= 400:
                return None
            return answer.json() if answer.content else {}

    def play(self, stopping: threading.Event) -> None:
        try:
            self.token = self.call("POST", "/v1/players", {"name": self.name})["token"]
            while not stopping.is_set():
                self.hand()
        except BaseException as exc:  # noqa: BLE001 - told at the end
            self.failure = exc

    def hand(self) -> None:
        match_id = self.call("POST", "/v1/matches", {"turn_seconds": 600}, key=str(uuid.uuid4()))[
            "match_id"
        ]
        self.matches.append(match_id)
        for seat in range(4):
            body = {"seat": seat} if seat == 0 else {"seat": seat, "bot": True}
            self.call("POST", f"/v1/matches/{match_id}/seats", body)  # taken already: None
        reader = None
        if self.streams:
            reader = threading.Thread(target=self.follow, args=(match_id,), daemon=True)
            reader.start()
        while True:
            view = self.call("GET", f"/v1/matches/{match_id}")
            if view is None:
                raise AssertionError(f"cannot read match {match_id}")
            self.seen.append(
                (time.monotonic(), match_id, view["version"], view["phase"] == "ended")
            )
            if view["phase"] == "ended":
                break
            if not view["actions"]:
                time.sleep(0.1)
                continue
            command = choice(
                view["actions"], lambda: self.call("GET", f"/v1/matches/{match_id}/legal")
            )
            answer = self.call(
                "POST",
                f"/v1/matches/{match_id}/commands",
                {**command, "expected_version": view["version"]},
                key=str(uuid.uuid4()),
            )
            if answer is not None:  # 409/422: the match moved on; read it again
                self.acks.append(
                    Ack(
                        match_id,
                        self.sent,
                        time.monotonic(),
                        [(e["version"], e["type"]) for e in answer["events"]],
                    )
                )
        if reader is not None:
            reader.join(120)

    def follow(self, match_id: str) -> None:
        """The match's stream, from its start to ``settled``, reconnecting with the last
        id received whenever it ends before that."""
        received = self.streamed.setdefault(match_id, [])
        base = self.base
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            last = str(received[-1]) if received else "0"
            try:
                conn, response = open_stream(base, match_id, self.token, last, timeout=30)
            except OSError:
                time.sleep(0.5)
                continue
            try:
                if response.status == 204:
                    return  # settled, and we have it
                if response.status != 200:
                    time.sleep(float(response.getheader("Retry-After") or 1))
                    continue
                for message in sse_messages(response):
                    if message.kind == "message" and message.id is not None:
                        received.append(int(message.id))
                        if message.event == "settled":
                            return
            except (OSError, ValueError):
                pass
            finally:
                conn.close()


@dataclass
class Loss:
    """One server lost mid-play, and what followed."""

    what: str
    at: float
    #: The version each match in play (not ended) had then.
    in_play: dict[str, int]
    first_answer: float | None = None
    moved: float | None = None


@dataclass
class Figures:
    kind: str
    losses: list[Loss]
    acknowledged: int
    lost: list[str]
    hands: int
    unsettled: list[str]
    ledger: dict[str, Any]
    errors: list[tuple[int, str, str, str]]
    answered_503: int
    stream_problems: list[str]
    failures: list[str]
    #: From the Redis master's loss until /readyz answered 200 again.
    ready_after: float
    seconds: float

    def line(self) -> str:
        parts = [f"{self.kind}:"]
        for loss in self.losses:
            first = "never" if loss.first_answer is None else f"{loss.first_answer:.1f} s"
            moved = "never" if loss.moved is None else f"{loss.moved:.1f} s"
            parts.append(
                f"{loss.what} lost: first command answered after {first}, "
                f"every match in play a round further after {moved};"
            )
        parts.append(
            f"{self.acknowledged} commands answered 200, {len(self.lost)} missing from the store;"
            f" {self.hands} hands, {len(self.unsettled)} not settled once;"
            f" ledger ok={self.ledger.get('ok')} total={self.ledger.get('total')};"
            f" {len(self.errors)} 5xx; {self.answered_503} 503 with Retry-After;"
            f" {len(self.stream_problems)} stream gaps; ready again {self.ready_after:.1f} s"
            f" after the Redis master was lost; {self.seconds:.0f} s in all"
        )
        return " ".join(parts)


@contextmanager
def service(cluster: Patroni, sentinels: Sentinels, home: Path) -> Iterator[str]:
    """``ddz serve`` with two API processes and its worker, and a second worker: its URL."""
    port = free_port()
    env = {
        **{
            k: v for k, v in os.environ.items() if not k.startswith(("DDZ_", "REDIS_", "DATABASE_"))
        },
        "DATABASE_URL": cluster.dsn("ddz", **LIBPQ),
        "REDIS_SENTINELS": sentinels.addresses,
        "REDIS_SENTINEL_MASTER": "ddz",
        "DDZ_OPERATOR_TOKEN": OPERATOR,
        "DDZ_RATE_LIMITS": "off",
        "DDZ_DB_TIMEOUT": "5",
        # Streams end now and then, so that the clients' reconnections are tried too.
        "DDZ_STREAM_SECONDS": "20",
        "DDZ_KEEPALIVE_SECONDS": "2",
        "PYTHONUNBUFFERED": "1",
    }
    with ExitStack() as stack:
        # Two API processes (gunicorn workers) and its own worker.
        arguments = f"serve --port {port} --workers 2 --data {home / 'serve'}".split()
        serve = start(
            [sys.executable, "-m", "service.cli", *arguments],
            home / "serve.log",
            cwd=ROOT,
            env=env,
        )
        stack.callback(stop, serve, signal.SIGTERM, 40)
        base = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: requests.get(base + "/readyz", timeout=5).status_code == 200,
            120,
            "ddz serve to be ready",
        )
        worker = start(
            [sys.executable, "-m", "service.cli", "worker"], home / "worker.log", cwd=ROOT, env=env
        )
        stack.callback(stop, worker, signal.SIGTERM, 30)
        yield base
        for process, name, log in (
            (serve, "ddz serve", "serve.log"),
            (worker, "the second worker", "worker.log"),
        ):
            tail = (home / log).read_text(errors="replace")[-3000:]
            assert process.poll() is None, f"{name} exited: {process.returncode}\n{tail}"


def drill(
    kind: str, logs: Path | None = None, clients: int = 4, play_seconds: float = 8.0
) -> Figures:
    """Runs the drill once (see the module's text); its figures. The servers' and the
    service's logs are copied into ``logs`` at the end, if given."""
    assert kind in KINDS
    began = time.monotonic()
    user = server_user()
    home = Path(tempfile.mkdtemp(prefix="ddz-failover-"))
    if user:
        shutil.chown(home, user)
    with ExitStack() as stack:
        stack.callback(_remove, home)
        if logs is not None:
            stack.callback(_copy_logs, home, logs)
        cluster = Patroni(home, 2)
        stack.callback(cluster.close)
        sentinels = Sentinels(home)
        stack.callback(sentinels.close)
        with psycopg.connect(cluster.leader().url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE ddz")
        base = stack.enter_context(service(cluster, sentinels, home))
        stopping = threading.Event()
        players = [Client(base, f"drill{i}", streams=i % 2 == 0) for i in range(clients)]
        threads = [threading.Thread(target=p.play, args=(stopping,), daemon=True) for p in players]
        for thread in threads:
            thread.start()
        wait_until(lambda: all(len(p.acks) >= 3 for p in players), 120, "every client to play")
        time.sleep(play_seconds / 2)

        leader = cluster.leader()
        pg = _lose(players, "PostgreSQL primary")
        if kind == "kill":
            os.kill(leader.postmaster_pid(), signal.SIGKILL)
        else:
            for link in leader.links:
                link.cut()
        _measure(players, pg, 90)
        if kind == "cut":
            # The network back: the old primary rejoins as a standby (pg_rewind).
            for link in leader.links:
                link.mend()
        wait_until(cluster.synchronous, 120, "a synchronous standby again")
        time.sleep(play_seconds / 2)

        red = _lose(players, "Redis master")
        sentinels.kill_master()
        _measure(players, red, 60)
        # Ready again on the new master: Redis answers there, and the workers' heartbeats
        # are there.
        ready = wait_until(lambda: _ready(base), 60, "/readyz to answer 200 again")
        time.sleep(play_seconds / 2)

        stopping.set()
        for thread in threads:
            thread.join(240)
        failures = [f"{p.name}: {p.failure!r}" for p in players if p.failure is not None]
        failures += [f"{p.name} still playing" for p, t in zip(players, threads) if t.is_alive()]
        matches = [m for p in players for m in p.matches]
        with psycopg.connect(cluster.leader().url("ddz")) as db:
            wait_until(lambda: _all_settled(db, matches), 120, "every hand to be settled")
            lost = _lost(db, [a for p in players for a in p.acks])
            unsettled = _not_settled_once(db, matches)
        ledger = requests.get(
            base + "/v1/admin/ledger/check",
            headers={"Authorization": f"Bearer {OPERATOR}"},
            timeout=30,
        ).json()
        stream_problems = []
        for p in players:
            for match_id, ids in p.streamed.items():
                with psycopg.connect(cluster.leader().url("ddz")) as db:
                    (last,) = db.execute(
                        "SELECT max(version) FROM events WHERE stream_id = %s", (match_id,)
                    ).fetchone()
                if ids != list(range(1, last + 1)):
                    stream_problems.append(f"{match_id}: {ids}")
        return Figures(
            kind=kind,
            losses=[pg, red],
            acknowledged=sum(len(p.acks) for p in players),
            lost=lost,
            hands=len(matches),
            unsettled=unsettled,
            ledger=ledger,
            errors=[e for p in players for e in p.errors],
            answered_503=sum(p.statuses.get(503, 0) for p in players),
            stream_problems=stream_problems,
            failures=failures,
            ready_after=ready - red.at,
            seconds=time.monotonic() - began,
        )


def _lose(players: list[Client], what: str) -> Loss:
    in_play: dict[str, int] = {}
    for p in players:
        if p.seen and not p.seen[-1][3]:
            _, match_id, version, _ = p.seen[-1]
            in_play[match_id] = version
    return Loss(what, time.monotonic(), in_play)


def _measure(players: list[Client], loss: Loss, timeout: float) -> None:
    """Waits until a command sent after the loss is answered 200, and until every match
    then in play has moved a round on (each seat, bots too, played once: 4 versions) or
    ended; records when."""

    def first() -> float | None:
        after = [a.at for p in players for a in p.acks if a.sent > loss.at]
        return min(after) - loss.at if after else None

    def moved() -> float | None:
        times = []
        for match_id, version in loss.in_play.items():
            later = [
                at
                for p in players
                for at, m, v, ended in list(p.seen)
                if m == match_id and at > loss.at and (ended or v >= version + 4)
            ]
            if not later:
                return None
            times.append(min(later) - loss.at)
        return max(times, default=0.0)

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (loss.first_answer is None or loss.moved is None):
        loss.first_answer = loss.first_answer if loss.first_answer is not None else first()
        loss.moved = loss.moved if loss.moved is not None else moved()
        time.sleep(0.1)


def _ready(base: str) -> float | None:
    """When /readyz answered 200, if it did."""
    answered = requests.get(base + "/readyz", timeout=5).status_code == 200
    return time.monotonic() if answered else None


def _all_settled(db: psycopg.Connection, matches: list[str]) -> bool:
    (count,) = db.execute(
        "SELECT count(*) FROM events WHERE type = 'settled' AND stream_id = ANY(%s::uuid[])",
        (matches,),
    ).fetchone()
    db.commit()
    return count >= len(matches)


def _lost(db: psycopg.Connection, acks: list[Ack]) -> list[str]:
    stored = {
        (str(m), v, t)
        for m, v, t in db.execute(
            "SELECT stream_id, version, type FROM events WHERE stream_id = ANY(%s::uuid[])",
            (sorted({a.match_id for a in acks}),),
        )
    }
    return [
        f"{a.match_id} v{v} {t}"
        for a in acks
        for v, t in a.events
        if (a.match_id, v, t) not in stored
    ]


def _not_settled_once(db: psycopg.Connection, matches: list[str]) -> list[str]:
    rows = db.execute(
        "SELECT m, (SELECT count(*) FROM events WHERE stream_id = m AND type = 'settled'),"
        " (SELECT count(*) FROM settlements WHERE match_id = m)"
        " FROM unnest(%s::uuid[]) AS m",
        (matches,),
    ).fetchall()
    return [f"{m}: {e} settled events, {s} settlements" for m, e, s in rows if (e, s) != (1, 1)]


def _copy_logs(home: Path, logs: Path) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    for log in home.rglob("*.log"):
        shutil.copy(log, logs / "-".join(log.relative_to(home).parts))


def _remove(home: Path) -> None:
    shutil.rmtree(home, ignore_errors=True)
