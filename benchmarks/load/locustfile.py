"""A day at the tables, on Locust: the load model of benchmarks/capacity.py and
benchmarks/soak.py (docs/scaling.md, "A day at the tables").

    locust -f benchmarks/load/locustfile.py --host http://127.0.0.1:8000 --headless ...

Who comes (each a Locust user; ``weight`` is their share):

- **people** (:class:`Person`): sign up, then visit after visit: a quick match from the
  lobby, or a private table with friends (one of them makes it and the others join with
  its invite, system bots taking the seats no friend took); play from their own stream
  (Server-Sent Events) with human think times (2-8 s, one decision in twenty 10-25 s),
  reading the legal plays before playing; now and then drop the stream and come back with
  ``Last-Event-ID`` (sometimes after long enough to miss a deadline: the system plays the
  seat, 系统代打, and they take it back with ``resume``); leave between hands, read their
  own page, history and ratings and the leaderboard, rest, and come again;
- **watchers** (:class:`Watcher`) follow a public table's stream a while, then another's;
- **bot accounts** (:class:`LadderBot`) play on the ladder, answering at once;
- **an operator** (:class:`Operator`) reads the console (when ``DDZ_LOAD_OPERATOR`` and
  ``DDZ_LOAD_OPERATOR_PASSWORD`` name one).

Arrivals ramp up, hold and ramp down (:class:`Day`: ``DDZ_LOAD_USERS`` users in all, or
a step after step of more, such as ``1000,1500``; ``DDZ_LOAD_RAMP`` and ``DDZ_LOAD_HOLD``
seconds a step, ``DDZ_LOAD_DOWN`` at the end). Besides Locust's
figures per request, what a player feels is reported as requests of type ``SLO``:

- ``decision ack``: from sending a decision to its answer (the player's view of a command);
- ``your_turn delivery``: from the commit of the event that gave the seat its turn (the
  item's ``at``) to the ``your_turn`` item's arrival on the seat's stream;
- ``stream resume``: from reconnecting a dropped stream (with ``Last-Event-ID``) to its
  answer; a repeated item, or a hand whose items came without its start, is a failure
  (``stream gap``);
- ``watch delivery``: an event's commit to its arrival at a watcher, for the events
  recorded after the watcher came (the hand so far, which it catches up on, is not timed).

Conflicts that a person meets in a real game (409 ``version_conflict`` when the system
took the seat at a deadline a moment before) are counted as ``SLO``/``conflict``, not as
failures; every other answer of 4xx or 5xx, and every broken connection, is a failure.
"""

from __future__ import annotations

import collections
import datetime as dt
import functools
import json
import os
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import gevent
from gevent.queue import Empty, Queue
from geventhttpclient import HTTPClient
from locust import FastHttpUser, LoadTestShape, argument_parser, constant, events, runners, task
from locust.exception import StopUser

# A generator process's heartbeats may come late on a crowded machine: its master takes it
# for lost after this many missed seconds (3 by default), and stops the run when the last
# one is lost.
runners.HEARTBEAT_LIVENESS = 30
# A generator process builds and parses Locust's whole command line anew for each option
# of every spawn message (``default_args_dict()`` inside a loop, locust 2.47): 75 % of its
# CPU in a ramp, where a spawn message comes every second, and about 170 ms each time in
# which no user's greenlet runs, so every timer running then measured the stall. The
# defaults do not change within a process.
argument_parser.default_args_dict = functools.cache(argument_parser.default_args_dict)

#: The model's knobs, from the environment (the capacity and soak scripts set them).
STEPS = [int(users) for users in os.environ.get("DDZ_LOAD_USERS", "100").split(",")]
RAMP = float(os.environ.get("DDZ_LOAD_RAMP", "60"))
HOLD = float(os.environ.get("DDZ_LOAD_HOLD", "300"))
DOWN = float(os.environ.get("DDZ_LOAD_DOWN", "30"))
#: Think times, seconds: most decisions, and the slow ones.
THINK = (2.0, 8.0)
SLOW_THINK = (10.0, 25.0)
SLOW_SHARE = 0.05
#: Scaled down for the smoke run (the same paths, sooner).
PACE = float(os.environ.get("DDZ_LOAD_PACE", "1"))
#: Per decision (a person makes about 15 a hand), the chance that it drops the stream
#: just before (about one hand in 15); of those drops, the share that stay away long
#: enough to miss the deadline; per hand settled, the chance that it leaves the table.
DROP_PER_DECISION = 0.005
AWAY_SHARE = 0.15
LEAVE_SHARE = 0.25
#: Of the visits: a private table with friends, rather than a quick match.
PRIVATE_SHARE = 0.25
#: The turn a private table gives each decision (the lobby's tables: the service's).
TURN_SECONDS = 30
#: At least one user of each kind (the smoke runs: too few users for the weights to give
#: a bot account or a watcher one).
EVERY_KIND = os.environ.get("DDZ_LOAD_EVERY_KIND") == "1"
OPERATOR = os.environ.get("DDZ_LOAD_OPERATOR", "")
OPERATOR_PASSWORD = os.environ.get("DDZ_LOAD_OPERATOR_PASSWORD", "")
#: A directory where each process writes every request it made, one JSON line each
#: (time, type, name, milliseconds, failure), so that the capacity and soak scripts take
#: percentiles over the windows they choose (Locust's own are over the whole run).
SAMPLES = os.environ.get("DDZ_LOAD_SAMPLES", "")

#: What a person meets when the game moved on a moment before the request (refused,
#: nothing changed): counted as conflicts, not failures.
CONFLICTS = (
    "version_conflict",
    "not_your_turn",
    "match_ended",
    "wrong_phase",
    "seat_under_system_control",
    "not_disconnected",
    "seated_elsewhere",
    "ticket_waiting",
    "table_full",
    "table_closed",
)

#: Private tables waiting for friends, in this process: (table_id, invite, seats open).
WAITING_FRIENDS: collections.deque[list[Any]] = collections.deque(maxlen=500)
#: Public tables seen lately, in this process (for watchers).
PUBLIC_TABLES: collections.deque[str] = collections.deque(maxlen=200)


def paced(low: float, high: float) -> float:
    return random.uniform(low, high) * PACE


def report(kind: str, name: str, seconds: float, failure: Exception | None = None) -> None:
    """Reports a request of its own (a stream's, a feeling's) to Locust's figures."""
    events.request.fire(  # type: ignore[no-untyped-call]
        request_type=kind,
        name=name,
        response_time=seconds * 1e3,
        response_length=0,
        exception=failure,
        context={},
    )


def slo(name: str, seconds: float, failure: str | None = None) -> None:
    """Reports what a player feels as a request of type ``SLO`` (milliseconds)."""
    report("SLO", name, seconds, None if failure is None else RuntimeError(failure))


def since(at: str) -> float:
    """Seconds from ``at`` (an ISO time the service wrote) to now."""
    return time.time() - dt.datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


class Samples:
    """This process's requests, appended to its file in :data:`SAMPLES` every few seconds."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, f"samples-{os.getpid()}.jsonl")
        self.pending: list[str] = []
        self.writer = gevent.spawn(self._write_every, 5.0)

    def add(self, kind: str, name: str, ms: float, failure: BaseException | None) -> None:
        failed = None if failure is None else f"{type(failure).__name__}: {failure}"[:160]
        self.pending.append(json.dumps([round(time.time(), 3), kind, name, round(ms, 2), failed]))

    def flush(self) -> None:
        lines, self.pending = self.pending, []
        if lines:
            with open(self.path, "a") as out:
                out.write("\n".join(lines) + "\n")

    def _write_every(self, seconds: float) -> None:
        while True:
            gevent.sleep(seconds)
            self.flush()


if SAMPLES:

    def _record(environment: Any, **_: Any) -> None:
        samples = Samples(SAMPLES)

        def request(
            request_type: str,
            name: str,
            response_time: float,
            exception: BaseException | None = None,
            **_: Any,
        ) -> None:
            samples.add(request_type, name, response_time, exception)

        def flush(**_: Any) -> None:
            samples.flush()

        events.request.add_listener(request)  # type: ignore[no-untyped-call]
        events.quitting.add_listener(flush)  # type: ignore[no-untyped-call]

    events.init.add_listener(_record)  # type: ignore[no-untyped-call]


class Stream:
    """An SSE stream of the service, read in a greenlet of its own into a queue, resumed
    after its last id (``Last-Event-ID``) when it closes; :meth:`drop` breaks it as a lost
    connection does, and :meth:`resume` reconnects."""

    def __init__(self, host: str, path: str, headers: dict[str, str], name: str):
        self.host, self.path, self.headers, self.name = host, path, headers, name
        self.items: Queue[tuple[str, str, dict[str, Any]]] = Queue()
        self.last: str | None = None
        self.seen: collections.deque[str] = collections.deque(maxlen=256)
        self.client: HTTPClient | None = None
        self.reader: gevent.Greenlet[Any, Any] | None = None
        self.resumed_at: float | None = None

    def open(self) -> None:
        self.reader = gevent.spawn(self._read)

    def drop(self) -> None:
        if self.reader is not None:
            self.reader.kill(block=True)
            self.reader = None
        if self.client is not None:
            self.client.close()
            self.client = None

    def resume(self) -> None:
        self.resumed_at = time.perf_counter()
        self.open()

    def close(self) -> None:
        self.drop()

    def _lines(self) -> Iterator[tuple[str, str, str]]:
        """(event, id, data) of each message until the stream closes."""
        headers = dict(self.headers, Accept="text/event-stream")
        if self.last is not None:
            headers["Last-Event-ID"] = self.last
        self.client = HTTPClient.from_url(self.host, network_timeout=45, connection_timeout=10)
        started = time.perf_counter()
        answer = self.client.get(self.path, headers=headers)
        took = time.perf_counter() - started
        if self.resumed_at is not None:
            slo("stream resume", time.perf_counter() - self.resumed_at)
            self.resumed_at = None
        if answer.status_code == 204:
            return
        failed = answer.status_code != 200
        report(
            "GET",
            self.name,
            took,
            RuntimeError(f"{answer.status_code} {answer.read()[:200]!r}") if failed else None,
        )
        if answer.status_code != 200:
            gevent.sleep(1)
            return
        event, ident, data = "message", "", list[str]()
        while True:
            line = answer.readline(b"\n")
            if not line:
                return
            text = line.decode().rstrip("\r\n")
            if not text:
                if data:
                    yield event, ident, "\n".join(data)
                event, ident, data = "message", "", list[str]()
            elif text.startswith("event:"):
                event = text[6:].strip()
            elif text.startswith("id:"):
                ident = text[3:].strip()
            elif text.startswith("data:"):
                data.append(text[5:].lstrip())

    def _read(self) -> None:
        while True:
            opened = time.monotonic()
            try:
                for event, ident, data in self._lines():
                    if ident:
                        if ident in self.seen:
                            slo("stream gap", 0, f"item {ident} came twice")
                            continue
                        self.seen.append(ident)
                        self.last = ident
                    self.items.put((event, ident, json.loads(data) if data else {}))
            except (OSError, ValueError) as exc:
                report("GET", self.name, 0, exc)
                gevent.sleep(1)
            finally:
                if self.client is not None:
                    self.client.close()
                    self.client = None
            if time.monotonic() - opened < 1:
                gevent.sleep(1)  # closed at once (a process stopping): not in a tight loop


class Player(FastHttpUser):
    """What people and bot accounts share: a token, their own stream, the decisions."""

    abstract = True
    wait_time = constant(0)
    bot_account = False
    network_timeout = 45.0
    connection_timeout = 15.0

    def on_start(self) -> None:
        name = f"{'bot' if self.bot_account else 'p'}-{uuid.uuid4().hex[:10]}"
        body = {"name": name, "bot_account": self.bot_account}
        headers = {}
        if self.bot_account:
            # A bot account is registered by the person who runs it (docs/ratings.md,
            # "Fair play"): its author signs up first.
            headers = {"Authorization": f"Bearer {self.sign_up(f'author-{name}')}"}
        self.token = self.sign_up(name, json=body, headers=headers)
        #: The private tables this player made or joined.
        self.sat_at: set[str] = set()
        self.auth = {"Authorization": f"Bearer {self.token}"}
        self.stream = Stream(self.host or "", "/v1/me/stream", self.auth, "/v1/me/stream")
        self.stream.open()
        self.table: str | None = None
        self.started: set[str] = set()

    def sign_up(self, name: str, **request: Any) -> str:
        """A new account's token (a person's, unless ``request`` says otherwise)."""
        request.setdefault("json", {"name": name})
        with self.client.post("/v1/players", catch_response=True, **request) as answer:
            if answer.status_code != 201:
                answer.failure(f"sign-up: {answer.status_code}")
                raise StopUser()
            return str(answer.json()["token"])

    def on_stop(self) -> None:
        if getattr(self, "stream", None) is not None:
            self.stream.close()

    def think(self) -> None:
        gevent.sleep(paced(*(SLOW_THINK if random.random() < SLOW_SHARE else THINK)))

    def next_item(self, timeout: float) -> tuple[str, dict[str, Any]] | None:
        try:
            event, _, item = self.stream.items.get(timeout=timeout)
        except Empty:
            return None
        kind = str(item.get("type", event))
        match = str(item.get("match_id"))
        if kind == "hand_started":
            self.started.add(match)
        elif kind in ("your_turn", "hand_ended", "settled") and match not in self.started:
            # Its hand started before this player's stream was first opened: fine only
            # for the first hand seen.
            if self.started:
                slo("stream gap", 0, f"{kind} of match {match} without its hand_started")
            self.started.add(match)
        if kind == "your_turn":
            slo("your_turn delivery", since(item["at"]))
        if kind == "seated":
            self.table = item.get("table_id")
            if item.get("ticket_id") and self.table:
                PUBLIC_TABLES.append(self.table)  # the lobby's tables are public
        return kind, item

    def post(
        self, path: str, body: dict[str, Any] | None, name: str, also: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        """A command or a creation: its answer, None when refused (as a person is when the
        system took the seat at a deadline a moment before: counted as a conflict, as are
        the codes ``also`` names). One that got no answer at all (its connection closed
        as it went out: a stopping API process closes its idle connections, and a request
        sent on one at that moment meets the close) is sent again with the same
        ``Idempotency-Key``, as the TypeScript client does, and counted as ``resent``."""
        headers = dict(self.auth, **{"Idempotency-Key": uuid.uuid4().hex})
        for may_resend in (True, False):
            with self.client.post(
                path, json=body or {}, headers=headers, name=name, catch_response=True
            ) as answer:
                if answer.status_code == 0 and may_resend:
                    answer.success()
                    slo("resent", 0)
                    continue
                if answer.status_code in (200, 201):
                    answer.success()
                    created: dict[str, Any] = answer.json()
                    return created
                if answer.status_code in (403, 409, 422):
                    code = (answer.json() or {}).get("code", "")
                    if code in CONFLICTS or code in also:
                        answer.success()
                        slo("conflict", 0)
                        return None
                answer.failure(f"{answer.status_code} {answer.text[:200] if answer.text else ''}")
                return None
        return None

    def get(self, path: str, name: str) -> dict[str, Any] | None:
        with self.client.get(path, headers=self.auth, name=name, catch_response=True) as answer:
            if answer.status_code == 200:
                read: dict[str, Any] = answer.json()
                return read
            answer.failure(f"{answer.status_code}")
            return None

    def decide(self, item: dict[str, Any]) -> None:
        """Answers a ``your_turn``: the decision, sent, its answer timed."""
        match, version = item["match_id"], item["version"]
        actions = {a["action"]: a for a in item.get("actions", [])}
        body: dict[str, Any]
        if "bid" in actions:
            choices = actions["bid"]["choices"]
            body = {"action": "bid", "value": random.choice(choices)}
        elif "show_hand" in actions or "report" in actions:
            action = "show_hand" if "show_hand" in actions else "report"
            body = {"action": action, "value": actions[action]["choices"][0]}
        elif "play" in actions or "pass" in actions:
            legal = self.get(f"/v1/matches/{match}/legal", "/v1/matches/[id]/legal")
            if legal is None:
                return
            plays = legal.get("plays") or []
            if plays and not (legal.get("can_pass") and random.random() < 0.3):
                body = {"action": "play", "cards": random.choice(plays[:3])["cards"]}
            else:
                body = {"action": "pass"}
        elif "resume" in actions:
            body = {"action": "resume"}
        else:
            return
        body["expected_version"] = version
        started = time.perf_counter()
        self.post(f"/v1/matches/{match}/commands", body, "/v1/matches/[id]/commands")
        slo("decision ack", time.perf_counter() - started)


class Person(Player):
    """A person's visits (the module's doc)."""

    weight = 90

    @task
    def visit(self) -> None:
        if not self.join():
            gevent.sleep(paced(5, 15))
            return
        hands = 0
        while True:
            item = self.next_item(timeout=120 * PACE + 60)
            if item is None:
                return self.leave()  # nothing for two minutes: gone
            kind, body = item
            if kind == "your_turn":
                if random.random() < DROP_PER_DECISION:
                    self.drop()
                self.think()
                self.decide(body)
            elif kind == "taken_over":
                # Back from a while away: the seat is taken again.
                gevent.sleep(paced(0.5, 2))
                self.post(
                    f"/v1/matches/{body['match_id']}/commands",
                    {"action": "resume"},
                    "/v1/matches/[id]/commands (resume)",
                )
            elif kind == "settled":
                hands += 1
                if random.random() < LEAVE_SHARE or hands >= 12:
                    gevent.sleep(paced(0.3, 2))
                    return self.leave()
            elif kind in ("table_closed", "left") and body.get("table_id") == self.table:
                self.table = None
                return self.browse()

    def join(self) -> bool:
        """A quick match, a private table of its own, or a friend's."""
        if random.random() < PRIVATE_SHARE:
            # Not back to a table of its own: a seat left during a hand is still held
            # until the hand ends, and the service refuses a second one (422
            # ``already_seated``), as it should.
            while table := next((t for t in WAITING_FRIENDS if t[0] not in self.sat_at), None):
                table[2] -= 1
                if table[2] <= 0:
                    WAITING_FRIENDS.remove(table)
                joined = self.post(
                    f"/v1/tables/{table[0]}/seats", {"invite": table[1]}, "/v1/tables/[id]/seats"
                )
                if joined is not None:
                    self.table = table[0]
                    self.sat_at.add(table[0])
                    return True
            made = self.post(
                "/v1/tables",
                {"private": True, "bots_after": 20 * PACE, "turn_seconds": TURN_SECONDS},
                "/v1/tables",
            )
            if made is None:
                return False
            self.table = made["table_id"]
            self.sat_at.add(made["table_id"])
            WAITING_FRIENDS.append([made["table_id"], made["invite"], 3])
            return True
        ticket = self.post("/v1/lobby/tickets", {"allow_bots": True}, "/v1/lobby/tickets")
        return ticket is not None

    def drop(self) -> None:
        """The connection is lost: back a moment later, or after long enough to miss a
        deadline (the system plays the seat meanwhile)."""
        self.stream.drop()
        away = paced(35, 45) if random.random() < AWAY_SHARE else paced(1, 5)
        gevent.sleep(away)
        self.stream.resume()

    def leave(self) -> None:
        if self.table is not None:
            # The seat may have been freed a moment before: a player who did nothing for
            # a whole hand (away past its deadlines) leaves with it, and the stream's
            # ``left`` comes after the hand's ``settled``, when the table records it.
            self.post(
                f"/v1/tables/{self.table}/leave",
                None,
                "/v1/tables/[id]/leave",
                also=("not_seated",),
            )
            self.table = None
        self.browse()

    def browse(self) -> None:
        """Between visits: the player's own pages, then a rest."""
        self.get("/v1/me", "/v1/me")
        gevent.sleep(paced(1, 3))
        self.get("/v1/me/matches?limit=10", "/v1/me/matches")
        if random.random() < 0.5:
            self.get("/v1/me/ratings", "/v1/me/ratings")
        if random.random() < 0.3:
            self.get("/v1/leaderboards?kind=people", "/v1/leaderboards")
        gevent.sleep(paced(5, 30))


class LadderBot(Player):
    """An author's program on the ladder: answers at once, hand after hand."""

    weight = 5
    fixed_count = 1 if EVERY_KIND else 0
    bot_account = True

    @task
    def ladder(self) -> None:
        ticket = self.post(
            "/v1/lobby/tickets", {"ladder": True, "allow_bots": True}, "/v1/lobby/tickets"
        )
        if ticket is None:
            gevent.sleep(paced(2, 5))
        while True:
            item = self.next_item(timeout=120 * PACE + 60)
            if item is None:
                return
            kind, body = item
            if kind == "your_turn":
                gevent.sleep(random.uniform(0.05, 0.5))
                self.decide(body)
            elif kind == "seated" and body.get("table_id"):
                PUBLIC_TABLES.append(body["table_id"])
            elif kind in ("table_closed", "left") and body.get("table_id") == self.table:
                return


class Watcher(FastHttpUser):
    """Someone following a public table a while, then another."""

    weight = 5
    fixed_count = 1 if EVERY_KIND else 0
    wait_time = constant(0)

    @task
    def watch(self) -> None:
        if not PUBLIC_TABLES:
            gevent.sleep(paced(5, 10))
            return
        table = random.choice(PUBLIC_TABLES)
        stream = Stream(
            self.host or "", f"/v1/tables/{table}/watch/stream", {}, "/v1/tables/[id]/watch/stream"
        )
        opened = time.time()
        stream.open()
        until = time.monotonic() + paced(30, 90)
        try:
            while time.monotonic() < until:
                try:
                    _, _, item = stream.items.get(timeout=max(0.1, until - time.monotonic()))
                except Empty:
                    break
                # The table's hand so far, recorded before the watcher came, is caught up
                # on, not delivered late: only what was recorded since the stream opened
                # is timed.
                if item.get("at") and (late := since(item["at"])) <= time.time() - opened:
                    slo("watch delivery", late)
        finally:
            stream.close()
        gevent.sleep(paced(2, 10))


class Operator(FastHttpUser):
    """An operator reading the console now and then."""

    fixed_count = 1
    wait_time = constant(0)

    def on_start(self) -> None:
        if not OPERATOR:
            return
        page = self.client.get("/console/sign-in", name="/console/sign-in").text or ""
        token = page.split('name="csrf_token" value="')[1].split('"')[0]
        self.client.post(
            "/console/sign-in",
            data={"name": OPERATOR, "password": OPERATOR_PASSWORD, "csrf_token": token},
            allow_redirects=False,
            name="/console/sign-in",
        )

    @task
    def read(self) -> None:
        if not OPERATOR:
            gevent.sleep(60)
            return
        for path in ("/console/matches", "/console/players", "/console/ledger"):
            self.client.get(path, name=path)
            gevent.sleep(paced(10, 30))


class Day(LoadTestShape):
    """Arrivals ramp up to each step's users of ``DDZ_LOAD_USERS`` in turn over
    ``DDZ_LOAD_RAMP`` seconds and hold them ``DDZ_LOAD_HOLD``; then all ramp down over
    ``DDZ_LOAD_DOWN``. The users of a step stay for the next: stopped all at once, they
    would leave their tables' hands to the system, and the next step would measure the
    bots finishing them (docs/scaling.md, "Capacity on this machine")."""

    def tick(self) -> tuple[int, float] | None:
        now: float = self.get_run_time()  # type: ignore[no-untyped-call]
        before = 0
        for users in STEPS:
            rate = max(1.0, (users - before) / max(RAMP, 1.0))
            if now < RAMP:
                return max(1, before + int((users - before) * now / RAMP)), rate
            if now < RAMP + HOLD:
                return users, rate
            now -= RAMP + HOLD
            before = users
        if now < DOWN:
            return max(1, int(before * (1 - now / max(DOWN, 1.0)))), max(1.0, before / DOWN)
        return None
