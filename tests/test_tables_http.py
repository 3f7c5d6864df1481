"""Four people through the lobby to one table, three hands in a row, each playing from its
own stream only, over real HTTP against the service as ``ddz serve`` runs it (the API
under gunicorn's gevent workers, a ``ddz worker`` process matching the tickets, dealing,
playing nothing, settling), on a database and a Redis database of this test's own.

Each person follows ``GET /v1/me/stream`` as a browser's EventSource does (reconnecting
with ``Last-Event-ID``; the server closes a stream every few seconds, and one person's
client also drops its connection itself every few items) and acts on each ``your_turn``
at once, on nothing else."""

from __future__ import annotations

import threading
import time
from collections import Counter
from decimal import Decimal

import pytest
from api_support import (
    DECISIONS,
    HttpApi,
    Observer,
    choice,
    new_player,
    open_sse,
    operator_events,
    sse_messages,
)
from servers import ddz_serve, fresh_database

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

HANDS = 3


class Person(threading.Thread):
    """Follows its own stream, posts a ticket once the stream is open, plays every
    ``your_turn`` it is given, and leaves the table after ``HANDS`` hands settled; done
    when the stream says it left. ``drop_every``: closes the connection itself after that
    many items, and resumes."""

    def __init__(self, base: str, me: Observer, drop_every: int | None = None):
        super().__init__(daemon=True)
        self.base, self.me, self.drop_every = base, me, drop_every
        self.items: list[dict] = []
        self.connections = 0
        self.ticket: dict | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._follow()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _follow(self) -> None:
        last_id, deadline = None, time.monotonic() + 240
        while time.monotonic() < deadline:
            conn, response = open_sse(self.base, "/v1/me/stream", self.me.token, last_id)
            self.connections += 1
            try:
                assert response.status == 200, response.read()
                read_here = 0
                for message in sse_messages(response):
                    if message.kind != "message":
                        continue
                    last_id = message.id
                    if message.event == "ready":
                        assert self.connections == 1  # a resumed stream starts after its id
                        self._take_ticket()
                        continue
                    item = message.json
                    assert item["id"] == message.id and item["type"] == message.event
                    self.items.append(item)
                    if self._act_on(item):
                        return
                    read_here += 1
                    if self.drop_every and read_here == self.drop_every:
                        break  # the connection drops, whatever the server has sent since
            finally:
                conn.close()
        raise AssertionError(f"{self.me.name}: not done in time: {self.items[-3:]}")

    def _take_ticket(self) -> None:
        reply = self.me.post("/v1/lobby/tickets", {"unit": "2.00", "allow_bots": False})
        assert reply.status == 201, reply.text
        self.ticket = reply.json

    def _act_on(self, item: dict) -> bool:
        """Acts as a person would; true once the stream says the person left."""
        if item["type"] == "your_turn":
            match = f"/v1/matches/{item['match_id']}"
            body = choice(item["actions"], lambda: self.me.get(f"{match}/legal").json)
            reply = self.me.post(f"{match}/commands", {**body, "expected_version": item["version"]})
            # The item is the present: nothing else can have happened in the match since.
            assert reply.status == 200, (item, reply.text)
        elif item["type"] == "settled" and self.settled() == HANDS:
            reply = self.me.post(f"/v1/tables/{item['table_id']}/leave")
            assert reply.status == 200, reply.text
        return item["type"] == "left"

    def settled(self) -> int:
        return sum(1 for i in self.items if i["type"] == "settled")


def everything(me: Observer) -> list[dict]:
    """The person's whole stream, page by page from the first item (``GET /v1/me/events``)."""
    items: list[dict] = []
    after = None
    while True:
        reply = me.get("/v1/me/events" + ("" if after is None else f"?after={after}"))
        assert reply.status == 200, reply.text
        if not reply.json["items"]:
            return items
        items += reply.json["items"]
        after = reply.json["last_id"]


def test_four_people_from_the_lobby_play_three_hands_from_their_own_streams_over_http(
    postgres_admin_url, own_redis_url, tmp_path
):
    with (
        fresh_database(postgres_admin_url, "ddz_tables_http") as database_url,
        ddz_serve(
            database_url,
            own_redis_url,
            tmp_path,
            DDZ_TABLE_NEXT_HAND_SECONDS="2",
            DDZ_STREAM_SECONDS="4",
            DDZ_KEEPALIVE_SECONDS="1",
            # These people act the moment they may, faster than a token's command limit.
            DDZ_RATE_LIMITS="false",
        ) as (base, _),
    ):
        api = HttpApi(base)
        people = [
            Person(base, new_player(api, f"p{n}"), drop_every=5 if n == 0 else None)
            for n in range(4)
        ]
        for person in people:
            person.start()
        for person in people:
            person.join(300)
            assert not person.is_alive(), f"{person.me.name} is still playing"
            if person.error is not None:
                raise person.error

        # One table, seated from each person's ticket, three hands, every seat free again.
        seated = [next(i for i in p.items if i["type"] == "seated") for p in people]
        assert [s["ticket_id"] for s in seated] == [p.ticket["ticket_id"] for p in people]
        (table_id,) = {s["table_id"] for s in seated}
        table = people[0].me.get(f"/v1/tables/{table_id}").json
        assert table["hands"] == HANDS and table["seats"] == [None] * 4, table
        hands = [[i["match_id"] for i in p.items if i["type"] == "hand_started"] for p in people]
        assert all(h == hands[0] for h in hands) and len(set(hands[0])) == HANDS, hands

        for person in people:
            items, name = person.items, person.me.name
            # What the connections delivered, one after another, is the whole stream:
            # nothing missed or repeated across the reconnections.
            assert items == everything(person.me), name
            assert [i["type"] for i in items][:2] == ["seated", "hand_started"], name
            assert items[-1]["type"] == "left", name
            # Every your_turn exactly once: each decision of the person's seat in the
            # three matches answered one your_turn, and none was the system's.
            turns = Counter(
                (i["match_id"], i["version"]) for i in items if i["type"] == "your_turn"
            )
            assert set(turns.values()) == {1}, name
            decided = []
            for match_id in hands[0]:
                seat = next(i["seat"] for i in items if i.get("match_id") == match_id)
                for event in operator_events(api, match_id)["events"]:
                    payload = event["payload"]
                    if event["type"] in DECISIONS and payload["seat"] == seat:
                        assert payload["by"] == "player", (name, event)
                        decided.append((match_id, event["version"] - 1))
            assert sorted(turns) == sorted(decided), name
        assert people[0].connections > 3  # its own drops and the server's closes, resumed

        # The scoreboard is the ledger: each person's net at the table is the sum of the
        # settled items of its stream and its balance (the ledger's; new players).
        board = {row["player"]: Decimal(row["net"]) for row in table["scoreboard"]}
        for person in people:
            nets = [Decimal(i["net"]) for i in person.items if i["type"] == "settled"]
            assert len(nets) == HANDS
            balance = Decimal(person.me.get("/v1/me").json["balance"])
            assert board[person.me.player_id] == sum(nets) == balance, person.me.name
