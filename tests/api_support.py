"""Helpers shared by the REST API integration tests (``test_api_*.py``); no tests here.

- ``ClientApi`` / ``HttpApi``: one small interface over the Flask test client and over real
  HTTP (``live_server``), answering ``Reply`` objects.
- ``Observer``: a player (seated or not) that records every body it receives, with the
  match version it describes, so that the tests can check afterwards that no seat ever saw a
  card it may not see (docs/rules.md §6).
- ``Knowledge``: from the operator's unredacted events, what each seat may know at each
  version, as per-code counts (two decks: every code exists twice).
- ``SSE`` helpers over ``http.client`` (streams are read line by line as they arrive).
- ``run_bots``: the RQ worker in burst mode, on the test Redis and database.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import requests
from servers import OPERATOR_TOKEN

#: A card code anywhere in a text (S3, HT, BJ ...).
CARD_IN_TEXT = re.compile(r"\b(?:[SHCD][3-9TJQKA2]|[BR]J)\b")
#: A string that is exactly one card code.
CARD_CODE = re.compile(r"^(?:[SHCD][3-9TJQKA2]|[BR]J)$")
PROBLEM_JSON = "application/problem+json"
#: A seat's decisions (each answers one ``your_turn``), as events and hand records name them.
DECISIONS = {"bid", "show_hand", "report", "play", "pass"}


# --- transports ---------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: Any  # case-insensitive mapping
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    @property
    def json(self) -> Any:
        return json.loads(self.content)

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "")


def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


#: The operator's headers (the test configuration's token).
OP = bearer(OPERATOR_TOKEN)


class ClientApi:
    """The Flask test client (fast, in-process)."""

    def __init__(self, client):
        self.client = client

    def request(
        self,
        method: str,
        path: str,
        token: str | None = None,
        json_body: Any = None,
        data: bytes | str | None = None,
        headers: dict | None = None,
    ) -> Reply:
        all_headers = {**bearer(token), **(headers or {})}
        kwargs: dict[str, Any] = {"headers": all_headers}
        if json_body is not None:
            kwargs["json"] = json_body
        elif data is not None:
            kwargs["data"] = data
            all_headers.setdefault("Content-Type", "application/json")
        response = self.client.open(path, method=method, **kwargs)
        return Reply(response.status_code, response.headers, response.get_data())


class HttpApi:
    """Real HTTP against ``live_server``; one ``requests`` session per thread."""

    def __init__(self, base: str):
        self.base = base
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def request(
        self,
        method: str,
        path: str,
        token: str | None = None,
        json_body: Any = None,
        data: bytes | str | None = None,
        headers: dict | None = None,
    ) -> Reply:
        all_headers = {**bearer(token), **(headers or {})}
        if json_body is not None:
            data = json.dumps(json_body)
            all_headers.setdefault("Content-Type", "application/json")
        elif data is not None:
            all_headers.setdefault("Content-Type", "application/json")
        response = self._session().request(
            method, self.base + path, data=data, headers=all_headers, timeout=30
        )
        return Reply(response.status_code, response.headers, response.content)


# --- players, observers -------------------------------------------------------------------


@dataclass
class Received:
    what: str  # e.g. "GET /v1/matches/…", "sse hand_dealt"
    version: int | None  # the match version the body describes (None: from the body itself)
    body: Any  # parsed JSON, or text
    #: Card codes the request itself named: an answer that repeats them ("the hand does not
    #: hold: S3") tells the caller nothing it did not know.
    sent: Counter = field(default_factory=Counter)


@dataclass
class Observer:
    """A player token and everything that player received from the API."""

    api: Any
    token: str
    player_id: str
    name: str
    seat: int | None = None
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(
        self, what: str, version: int | None, body: Any, sent: Counter | None = None
    ) -> None:
        with self.lock:
            self.received.append(Received(what, version, body, sent or Counter()))

    def call(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        *,
        at: int | None = None,
        headers: dict | None = None,
        data=None,
    ) -> Reply:
        """A request with this player's token; the reply body is recorded (``at``: the match
        version it describes when the body does not say, e.g. for problems)."""
        reply = self.api.request(
            method, path, self.token, json_body=json_body, data=data, headers=headers
        )
        try:
            body = reply.json
        except ValueError:
            body = reply.text
        request = json.dumps(json_body) if json_body is not None else data
        if isinstance(request, bytes):
            request = request.decode("utf-8", "replace")
        self.record(
            f"{method} {path} -> {reply.status}",
            at,
            body,
            Counter(CARD_IN_TEXT.findall(request or "")),
        )
        return reply

    def get(self, path: str, **kwargs) -> Reply:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, json_body: Any = None, **kwargs) -> Reply:
        return self.call("POST", path, json_body, **kwargs)


def new_player(api, name: str) -> Observer:
    reply = api.request("POST", "/v1/players", json_body={"name": name})
    assert reply.status == 201, reply.text
    body = reply.json
    return Observer(api, body["token"], body["player_id"], name)


def new_match(owner: Observer, **options) -> str:
    reply = owner.post("/v1/matches", {"turn_seconds": 3600, **options})
    assert reply.status == 201, reply.text
    return reply.json["match_id"]


def take_seat(player: Observer, match_id: str, seat: int) -> dict:
    reply = player.post(f"/v1/matches/{match_id}/seats", {"seat": seat})
    assert reply.status == 201, reply.text
    player.seat = seat
    return reply.json


def operator_events(api, match_id: str) -> dict:
    reply = api.request("GET", f"/v1/admin/matches/{match_id}/events", OPERATOR_TOKEN)
    assert reply.status == 200, reply.text
    return reply.json


def stream_fingerprint(api, match_id: str) -> tuple:
    """What a refused request must leave unchanged: the version and every stored event."""
    document = operator_events(api, match_id)
    return document["version"], json.dumps(document["events"], sort_keys=True)


def assert_problem(reply: Reply, status: int, code: str | None = None) -> dict:
    """An RFC 9457 problem with a machine-readable code and a human detail."""
    assert reply.status == status, f"expected {status}, got {reply.status}: {reply.text}"
    assert reply.content_type.split(";")[0].strip() == PROBLEM_JSON, reply.content_type
    body = reply.json
    assert body["status"] == status
    assert isinstance(body.get("code"), str) and re.fullmatch(r"[a-z][a-z0-9_]*", body["code"]), (
        body
    )
    if code is not None:
        assert body["code"] == code, body
    assert isinstance(body.get("detail"), str) and body["detail"].strip(), body
    assert isinstance(body.get("title"), str) and body["title"], body
    return body


def zero_sum(result: dict) -> None:
    settlement = result["settlement"]
    assert len(settlement["net"]) == 4
    total = sum(Decimal(x) for x in settlement["net"]) + Decimal(settlement["house"])
    assert total == 0, settlement
    for key in ("gross", "after_cap"):
        assert sum(Decimal(x) for x in settlement[key]) == 0, settlement


def seed_where(predicate, ruleset_name: str = "shanghai-platform", tries: int = 50000) -> bytes:
    """The first of a fixed series of seeds whose deal satisfies ``predicate(deal, ruleset)``."""
    from service.rules import Ruleset, deal

    ruleset = Ruleset.by_name(ruleset_name)
    for i in range(tries):
        seed = hashlib.sha256(f"ddz-api-test-{ruleset_name}-{i}".encode()).digest()
        if predicate(deal(seed), ruleset):
            return seed
    raise AssertionError("no seed found")


# --- what each seat may know --------------------------------------------------------------


@dataclass
class Snap:
    """The facts at one version, as per-code counts."""

    hands: list[Counter]
    bottom: Counter  # before the landlord takes it
    original_bottom: Counter
    played: Counter
    landlord: int | None
    shown: bool
    reported: Counter
    marked: str | None
    marked_seat: int | None
    ended: bool

    def copy(self) -> Snap:
        return Snap(
            [Counter(h) for h in self.hands],
            Counter(self.bottom),
            Counter(self.original_bottom),
            Counter(self.played),
            self.landlord,
            self.shown,
            Counter(self.reported),
            self.marked,
            self.marked_seat,
            self.ended,
        )

    def allowed(self, seat: int | None) -> Counter | None:
        """How many copies of each code ``seat`` (None: a player with no seat) may know of;
        None once the hand has ended (the seed is revealed: everything can be derived)."""
        if self.ended:
            return None
        known = Counter()
        codes = set(self.played)
        for hand in self.hands:
            codes |= set(hand)
        codes |= set(self.bottom)
        for code in codes:
            n = self.played[code]
            if seat is not None:
                n += self.hands[seat][code]
            if (
                self.landlord is not None
                and self.landlord != seat
                and (self.shown or self.reported[code])
            ):
                n += self.hands[self.landlord][code]
            if code == self.marked and seat != self.marked_seat:
                n += 1  # the marked card is public, wherever it is now
            if n:
                known[code] = min(n, 2)
        return known


class Knowledge:
    """Replays the operator's events into one ``Snap`` per version."""

    def __init__(self, events: list[dict]):
        assert [e["version"] for e in events] == list(range(1, len(events) + 1)), (
            "events are not gapless"
        )
        snap = Snap(
            [Counter() for _ in range(4)],
            Counter(),
            Counter(),
            Counter(),
            None,
            False,
            Counter(),
            None,
            None,
            False,
        )
        self.snaps = [snap]
        self.seed: str | None = None
        self.end_version: int | None = None
        for event in events:
            snap = snap.copy()
            kind, p = event["type"], event["payload"]
            if kind == "hand_dealt":
                snap.hands = [Counter(h) for h in p["hands"]]
                snap.bottom = Counter(p["bottom"])
                snap.original_bottom = Counter(p["bottom"])
                snap.marked, snap.marked_seat = p["marked_card"], p["marked_seat"]
                self.seed = p["seed"]
            elif kind == "landlord_chosen":
                snap.landlord = p["seat"]
                snap.hands[p["seat"]] += snap.bottom
                snap.bottom = Counter()
            elif kind == "show_hand":
                snap.shown = bool(p["value"])
            elif kind == "report":
                snap.reported = Counter(p["cards"])
            elif kind == "play":
                played = Counter(p["cards"])
                assert not played - snap.hands[p["seat"]], "a play of cards the seat does not hold"
                snap.hands[p["seat"]] -= played
                snap.played += played
            elif kind == "hand_ended":
                snap.ended = True
                self.end_version = event["version"]
            self.snaps.append(snap)

    def at(self, version: int) -> Snap:
        assert 0 <= version < len(self.snaps), f"version {version} is unknown to the operator"
        return self.snaps[version]


def leaks(observer: Observer, knowledge: Knowledge) -> list[str]:
    """Every place where a body ``observer`` received shows more than it may know."""
    problems: list[str] = []
    for item in observer.received:
        raw = item.body if isinstance(item.body, str) else json.dumps(item.body)
        version = item.version if item.version is not None else _version_of(item.body)
        where = f"{observer.name} (seat {observer.seat}) {item.what}"
        if version is None:
            problems.append(f"{where}: no version to judge the body at")
            continue
        if knowledge.seed and knowledge.seed in raw and not knowledge.at(version).ended:
            problems.append(f"{where}: the seed before the end (v{version})")
        _scan(item.body, version, observer.seat, knowledge, where, problems, item.sent)
    return problems


def _version_of(body: Any) -> int | None:
    if isinstance(body, dict) and isinstance(body.get("version"), int):
        return body["version"]
    return None


def _is_view(node: dict) -> bool:
    return {"hand", "phase", "seat", "version", "seats"} <= node.keys()


def _is_event(node: dict) -> bool:
    return {"type", "version", "payload"} <= node.keys()


def _scan(
    node: Any,
    version: int,
    seat: int | None,
    k: Knowledge,
    where: str,
    problems: list[str],
    sent: Counter,
) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("version"), int) and (_is_view(node) or _is_event(node)):
            version = node["version"]
        if "hands" in node and not k.at(version).ended:
            problems.append(f"{where}: an operator-only 'hands' field")
        if _is_view(node):
            _check_view(node, seat, k, where, problems)
        for key, value in node.items():
            _scan(value, version, seat, k, f"{where}.{key}", problems, sent)
    elif isinstance(node, list):
        if node and all(isinstance(x, str) and CARD_CODE.match(x) for x in node):
            _check_codes(Counter(node), version, seat, k, where, problems, sent)
        else:
            for i, value in enumerate(node):
                _scan(value, version, seat, k, f"{where}[{i}]", problems, sent)
    elif isinstance(node, str):
        codes = CARD_IN_TEXT.findall(node)
        if codes:
            _check_codes(Counter(codes), version, seat, k, where, problems, sent)


def _check_codes(
    codes: Counter, version: int, seat, k: Knowledge, where: str, problems: list[str], sent: Counter
) -> None:
    allowed = k.at(version).allowed(seat)
    if allowed is None:
        return
    excess = codes - allowed - sent
    if excess:
        problems.append(f"{where} at v{version}: may not see {dict(excess)}")


def _check_view(view: dict, seat, k: Knowledge, where: str, problems: list[str]) -> None:
    snap = k.at(view["version"])
    if view["seat"] != seat:
        problems.append(f"{where}: view of seat {view['seat']}, expected {seat}")
        return
    expected_hand = snap.hands[seat] if seat is not None else Counter()
    if Counter(view["hand"]) != expected_hand:
        problems.append(
            f"{where}: hand {sorted(view['hand'])} is not the seat's hand {sorted(expected_hand.elements())}"
        )
    if snap.ended:
        return
    if view.get("seed") is not None:
        problems.append(f"{where}: seed before the end")
    if view.get("bottom") is not None and (seat is None or seat != snap.landlord):
        problems.append(f"{where}: the bottom shown to a seat that is not the landlord")
    if (
        seat is not None
        and seat == snap.landlord
        and Counter(view.get("bottom") or []) != snap.original_bottom
    ):
        problems.append(f"{where}: the landlord's view lacks its bottom")
    if view.get("landlord_hand") is not None and not snap.shown:
        problems.append(f"{where}: the landlord's hand without 摊打")


# --- Server-Sent Events ------------------------------------------------------------------


@dataclass
class SSE:
    kind: str  # "message", "comment", "retry"
    event: str | None = None
    id: str | None = None
    data: str | None = None
    comment: str | None = None

    @property
    def json(self) -> Any:
        return json.loads(self.data)


def open_stream(
    base: str,
    match_id: str,
    token: str | None,
    last_event_id: str | None = None,
    timeout: float = 10.0,
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    return open_sse(base, f"/v1/matches/{match_id}/stream", token, last_event_id, timeout)


def open_sse(
    base: str,
    path: str,
    token: str | None,
    last_event_id: str | None = None,
    timeout: float = 10.0,
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    headers = {"Accept": "text/event-stream", **bearer(token)}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    conn.request("GET", path, headers=headers)
    return conn, conn.getresponse()


def sse_messages(response: http.client.HTTPResponse) -> Iterator[SSE]:
    """Parses the stream as it arrives (WHATWG event-stream format)."""
    fields: dict[str, str] = {}
    while True:
        line = response.readline()
        if not line:
            if fields:
                yield _message(fields)
            return
        text = line.decode("utf-8").rstrip("\n").rstrip("\r")
        if text == "":
            if fields:
                yield _message(fields)
                fields = {}
            continue
        if text.startswith(":"):
            yield SSE("comment", comment=text[1:].strip())
            continue
        name, _, value = text.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data" and "data" in fields:
            fields["data"] += "\n" + value
        else:
            fields[name] = value


def _message(fields: dict[str, str]) -> SSE:
    if set(fields) == {"retry"}:
        return SSE("retry", data=fields["retry"])
    return SSE(
        "message",
        event=fields.get("event", "message"),
        id=fields.get("id"),
        data=fields.get("data"),
    )


def read_messages(response, count: int, observer=None) -> list:
    """The next ``count`` messages with an id (recorded for ``observer``)."""
    found = []
    for message in sse_messages(response):
        if message.kind != "message":
            continue
        found.append(message)
        if observer is not None:
            observer.record(f"sse {message.event} id={message.id}", int(message.id), message.json)
        if len(found) == count:
            return found
    raise AssertionError(f"the stream ended after {len(found)} of {count} messages")


def without_deadline(document: dict) -> dict:
    return {k: v for k, v in document.items() if k != "deadline"}


class StreamReader(threading.Thread):
    """Follows a match's stream for ``observer`` like a browser's EventSource: reconnects
    with ``Last-Event-ID`` whenever the server closes it, until ``hand_ended`` (or stop)."""

    def __init__(
        self,
        base: str,
        match_id: str,
        observer: Observer,
        deadline_seconds: float = 120.0,
        until: str = "hand_ended",
    ):
        super().__init__(daemon=True)
        self.base, self.match_id, self.observer = base, match_id, observer
        self.deadline = time.monotonic() + deadline_seconds
        self.until = until
        self.connections: list[list[SSE]] = []
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.statuses: list[int] = []

    def run(self) -> None:
        last_id = None
        try:
            while not self.stop_event.is_set() and time.monotonic() < self.deadline:
                conn, response = open_stream(self.base, self.match_id, self.observer.token, last_id)
                try:
                    self.statuses.append(response.status)
                    if response.status != 200:
                        self.observer.record(
                            f"sse status {response.status}", None, response.read().decode()
                        )
                        return
                    messages: list[SSE] = []
                    self.connections.append(messages)
                    for message in sse_messages(response):
                        messages.append(message)
                        if message.kind != "message":
                            continue
                        self.observer.record(
                            f"sse {message.event} id={message.id}", int(message.id), message.json
                        )
                        last_id = message.id
                        if message.event == self.until or self.stop_event.is_set():
                            return
                finally:
                    conn.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def messages(self) -> list[SSE]:
        return [m for connection in self.connections for m in connection if m.kind == "message"]

    def event_ids(self) -> list[int]:
        return [int(m.id) for m in self.messages() if m.event != "snapshot"]

    def finish(self, timeout: float = 30.0) -> None:
        self.join(timeout)
        assert not self.is_alive(), "the stream reader did not finish"
        if self.error is not None:
            raise self.error


# --- the RQ worker ------------------------------------------------------------------------


def run_bots(redis_url: str) -> None:
    """Runs every queued job (bot turns, and the jobs they enqueue) in this process."""
    import redis as redis_lib

    from service.app.work import queue
    from workers.worker import JobWorker

    connection = redis_lib.Redis.from_url(redis_url)
    try:
        JobWorker([queue(connection)], connection=connection).work(burst=True)
    finally:
        connection.close()


# --- a person's choices ------------------------------------------------------------------


def choice(actions: list[dict], legal: Callable[[], dict]) -> dict:
    """What a person offered ``actions`` chooses: bid the highest, decline 摊打 and 报到,
    play the legal play with most cards (``legal``: the match's ``/legal``), pass when
    there is none."""
    kinds = {a["action"]: a for a in actions}
    if "bid" in kinds:
        return {"action": "bid", "value": max(kinds["bid"]["choices"])}
    if "show_hand" in kinds:
        return {"action": "show_hand", "value": False}
    if "report" in kinds:
        return {"action": "report", "value": kinds["report"]["choices"][-1]}
    plays = legal()["plays"]
    if plays:
        return {"action": "play", "cards": max(plays, key=lambda p: len(p["cards"]))["cards"]}
    return {"action": "pass"}


# --- tables ready to play -----------------------------------------------------------------


def seated_match(api, prefix: str, **options) -> tuple[list[Observer], str]:
    """Four new players seated at a new match (dealt)."""
    players = [new_player(api, f"{prefix}{i}") for i in range(4)]
    match_id = new_match(players[0], **options)
    for seat, player in enumerate(players):
        take_seat(player, match_id, seat)
    return players, match_id


def view_of(player: Observer, match_id: str) -> dict:
    reply = player.get(f"/v1/matches/{match_id}")
    assert reply.status == 200, reply.text
    return reply.json


def to_act(players: list[Observer], match_id: str) -> tuple[Observer, dict]:
    """The player whose turn it is, and its view."""
    turn = view_of(players[0], match_id)["turn"]
    assert turn is not None
    return players[turn], view_of(players[turn], match_id)


def advance_to_playing(players: list[Observer], match_id: str) -> dict:
    """First bidder bids 3, no 摊打, no 报到: the landlord leads. Returns the landlord's view."""
    for _ in range(10):
        player, view = to_act(players, match_id)
        kinds = {a["action"] for a in view["actions"]}
        if view["phase"] == "playing":
            return view
        if "bid" in kinds:
            body = {"action": "bid", "value": 3}
        elif "show_hand" in kinds:
            body = {"action": "show_hand", "value": False}
        else:
            body = {"action": "report", "value": "decline"}
        reply = player.post(
            f"/v1/matches/{match_id}/commands", {**body, "expected_version": view["version"]}
        )
        assert reply.status == 200, reply.text
    raise AssertionError("did not reach the playing phase")


def act_once(players, match_id: str) -> dict:
    """The seat to act makes one legal move (a bid of 0, or its first legal play)."""
    player, view = to_act(players, match_id)
    kinds = {a["action"] for a in view["actions"]}
    if "bid" in kinds:
        body = {"action": "bid", "value": 0}
    elif kinds & {"play", "pass"}:
        legal = player.get(f"/v1/matches/{match_id}/legal").json
        body = (
            {"action": "pass"}
            if legal["can_pass"]
            else {"action": "play", "cards": legal["plays"][0]["cards"]}
        )
    else:
        raise AssertionError(view["actions"])
    reply = player.post(
        f"/v1/matches/{match_id}/commands", {**body, "expected_version": view["version"]}
    )
    assert reply.status == 200, reply.text
    return reply.json


# --- waiting ------------------------------------------------------------------------------


def wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
