"""The Python client (clients/python, ``ddz_client``) against the service as ``ddz serve``
runs it (gunicorn's gevent workers and a ``ddz worker`` that matches tickets, deals and
plays the system bots), on a database and a Redis database of this module's own.

The bot of the client's README plays a hand from the lobby through its own stream over a
bad network: every stream connection drops after a few chunks and the answer of its first
command is lost after the service acted. Its stream is then exactly the player's stream
(nothing missed or repeated), and every decision applied once. Refusals raise problems
with their code. How the client retries (which requests, on what) is checked on a mock
transport, where each failure can be made to order."""

from __future__ import annotations

import json
import re
import uuid
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from api_support import DECISIONS, HttpApi, operator_events
from bad_network import BadNetwork
from ddz_client import (
    Client,
    Conflict,
    FeedItem,
    NotFound,
    ProblemError,
    Unauthorized,
    Unavailable,
    Unprocessable,
)

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[1] / "clients" / "python" / "README.md"


@pytest.fixture()
def service(shared_service) -> str:
    """The test process's shared service (its streams close every 2 s: the client
    resumes them)."""
    return shared_service


def readme_bot() -> dict:
    """The names the README's example defines (run, as a reader would paste it)."""
    (code,) = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    names: dict = {"__name__": "readme"}
    exec(compile(code, str(README), "exec"), names)
    return names


def all_items(client: Client, last: str) -> list[FeedItem]:
    """The player's whole stream, page by page from the first item, through an item of
    type ``last`` (long polls: an item may follow what it tells of by a moment)."""
    items: list[FeedItem] = []
    after = None
    while not items or items[-1].type != last:
        page = client.events(after, wait=10)
        assert page.items, f"no {last} after {[i.type for i in items]}"
        items += page.items
        after = page.last_id
    return items


def test_the_readme_bot_plays_a_hand_from_the_lobby_through_its_stream_over_a_bad_network(
    service,
):
    network = BadNetwork()
    bot = readme_bot()
    author = Client.register(service, "readme-author")
    with Client.register(
        service, "readme-bot", bot_account=True, owner_token=author.token, transport=network
    ) as client:
        seen: list[FeedItem] = []
        follow = client.stream

        def recording(after=None, **options):
            for item in follow(after, **options):
                seen.append(item)
                yield item

        client.stream = recording  # type: ignore[method-assign]
        (net,) = bot["play"](client, hands=1, unit="3.00")

        # What the stream gave across its many connections is the player's stream: after
        # `ready`, every item once, in order (then `left`, which came after the bot stopped).
        assert network.stream_connections > 3
        assert seen[0].type == "ready"
        items = all_items(client, "left")
        assert items[: len(seen) - 1] == seen[1:]
        assert [i.type for i in items[len(seen) - 1 :]] == ["left"]
        assert [i.type for i in items][:2] == ["seated", "hand_started"]

        # Each your_turn answered by one command; the first, whose answer was lost, sent
        # again with its key, and applied once: the seat's decisions in the match are the
        # player's, one per your_turn, and nothing was refused.
        turns = [i for i in seen if i.type == "your_turn"]
        assert turns
        keys = network.command_keys
        assert keys[0] == keys[1] and len(keys) == len(turns) + 1 == len(set(keys)) + 1
        (match_id,) = {i.data["match_id"] for i in turns}
        seat = turns[0].data["seat"]
        decided = [
            event["version"] - 1
            for event in operator_events(HttpApi(service), match_id)["events"]
            if event["type"] in DECISIONS and event["payload"]["seat"] == seat
        ]
        assert decided == [i.data["version"] for i in turns]

        # The hand's net is the new player's balance in the ledger; the bot account is
        # marked on its seat in the hand's record.
        me = client.me()
        assert Decimal(me["balance"]) == Decimal(net) and me["bot_account"] is True
        seats = client.record(match_id)["seats"]
        assert [s["bot_account"] for s in seats] == [i == seat for i in range(4)]


def test_a_stream_resumes_after_the_id_an_earlier_run_stopped_at(service):
    with Client.register(service, "resumer") as client:
        stream = client.stream()
        ready = next(stream)
        client.quick_match(unit="4.00", allow_bots=True)
        seated = next(stream)
        stream.close()
        assert (ready.type, seated.type) == ("ready", "seated")
        # A later run picks up after the last item it handled: the hand that follows.
        resumed = client.stream(after=seated.id)
        try:
            assert next(resumed).type == "hand_started"
        finally:
            resumed.close()
        client.leave_table(seated.data["table_id"])


def test_refusals_raise_problem_errors_carrying_their_code(service):
    with Client(service, "no-such-token") as stranger, pytest.raises(Unauthorized) as caught:
        stranger.me()
    assert (caught.value.status, caught.value.code) == (401, "invalid_token")
    assert caught.value.body["code"] == "invalid_token" and caught.value.detail

    with Client.register(service, "refused") as client:
        with pytest.raises(NotFound) as caught:
            client.match(str(uuid.uuid4()))
        assert caught.value.code == "match_not_found"

        # One waiting ticket per player: asking again answers the waiting one.
        ticket = client.quick_match(unit="7.00", allow_bots=False)
        assert client.quick_match(unit="7.00", allow_bots=False) == ticket
        assert client.cancel_ticket(ticket["ticket_id"])["status"] == "cancelled"
        assert client.cancel_ticket(ticket["ticket_id"])["status"] == "cancelled"

        # Joining a table where the player sits answers the table; a full one refuses.
        table = client.create_table(unit="5.00", bots_after=None)
        assert client.join_table(table["table_id"])["table_id"] == table["table_id"]
        others = [Client.register(service, f"other{n}") for n in range(4)]
        for other in others[:3]:
            other.join_table(table["table_id"])
        with pytest.raises(Conflict) as caught:
            others[3].join_table(table["table_id"])
        assert caught.value.code == "table_full"

        # An illegal command changes nothing and says why.
        match = client.create_match()
        client.take_seat(match["match_id"])
        with pytest.raises(Unprocessable) as caught:
            client.play(match["match_id"], ["S3"])
        assert caught.value.status == 422 and caught.value.code
        assert client.match(match["match_id"])["version"] == match["version"] + 1
        for other in others:
            other.close()


# --- the retry policy, on a mock transport -------------------------------------------------


def answering(*answers: httpx.Response | Exception):
    """A client whose transport gives these answers in turn; and the requests it got."""
    requests: list[httpx.Request] = []
    pending = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        answer = pending.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = Client("http://ddz.test", "t", backoff=0, transport=httpx.MockTransport(handle))
    return client, requests


def problem(status: int, code: str, **headers: str) -> httpx.Response:
    return httpx.Response(
        status, json={"status": status, "code": code, "detail": code}, headers=headers
    )


def test_reads_are_retried_on_passing_failures_as_retry_after_asks():
    client, requests = answering(
        httpx.ConnectError("refused"),
        problem(503, "database_unavailable", **{"Retry-After": "0"}),
        httpx.Response(502, text="<html>bad gateway</html>"),
        httpx.Response(200, json={"player_id": "p", "name": "n", "balance": "0.00"}),
    )
    assert client.me()["name"] == "n"
    assert len(requests) == 4


def test_a_command_is_retried_with_the_same_idempotency_key():
    client, requests = answering(
        httpx.ReadError("dropped"),
        problem(504, "http_504"),
        httpx.Response(200, json={"version": 9, "events": [], "view": {}}),
    )
    assert client.pass_("m", expected_version=8)["version"] == 9
    keys = {r.headers["Idempotency-Key"] for r in requests}
    assert len(requests) == 3 and len(keys) == 1
    assert all(r.content == requests[0].content for r in requests)
    # The next call is another command: another key.
    client2, more = answering(httpx.Response(200, json={"version": 10, "events": [], "view": {}}))
    client2.pass_("m")
    assert more[0].headers["Idempotency-Key"] not in keys


def test_a_new_table_is_retried_with_its_idempotency_key():
    client, requests = answering(
        httpx.ReadError("dropped"),
        problem(503, "database_unavailable"),
        httpx.Response(201, json={"table_id": "t"}),
    )
    assert client.create_table(unit="2.00")["table_id"] == "t"
    keys = {r.headers["Idempotency-Key"] for r in requests}
    assert len(requests) == 3 and len(keys) == 1


def test_a_new_match_seat_is_sent_again_only_when_the_service_surely_did_not_take_it():
    client, requests = answering(
        httpx.ConnectError("refused"),
        problem(429, "rate_limited", **{"Retry-After": "0"}),
        problem(503, "database_unavailable"),
    )
    with pytest.raises(Unavailable) as caught:
        client.take_seat("m", 0)
    assert caught.value.code == "database_unavailable" and len(requests) == 3

    client, requests = answering(httpx.ReadError("dropped"))
    with pytest.raises(httpx.ReadError):
        client.take_seat("m", 0)
    assert len(requests) == 1


def test_a_passing_failure_that_lasts_is_raised_after_the_retries():
    client, requests = answering(*[problem(503, "draining")] * 5)
    with pytest.raises(ProblemError) as caught:
        client.table("t")
    assert caught.value.code == "draining" and len(requests) == 5


def test_an_answer_that_is_no_problem_document_still_has_a_code():
    client, _ = answering(httpx.Response(418, text="teapot"))
    with pytest.raises(ProblemError) as caught:
        client.ticket("t")
    assert (caught.value.status, caught.value.code, caught.value.detail) == (
        418,
        "http_418",
        "teapot",
    )


def sse(*items: dict) -> httpx.Response:
    body = "retry: 1000\n\n" + "".join(
        f"id: {i['id']}\nevent: {i['type']}\ndata: {json.dumps(i)}\n\n" for i in items
    )
    return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, text=body)


def test_the_stream_waits_out_a_busy_service_resumes_after_its_last_id_and_raises_a_refusal():
    first = {"id": "7-1-0", "type": "seated", "table_id": "t", "seat": 0}
    second = {"id": "7-2-0", "type": "hand_started", "match_id": "m"}
    client, requests = answering(
        problem(503, "too_many_streams", **{"Retry-After": "0"}),
        sse(first),
        sse(second),
        problem(401, "token_revoked"),
    )
    got = []
    with pytest.raises(Unauthorized) as caught:
        for item in client.stream(after="7-0-0"):
            got.append(item)
    assert got == [
        FeedItem(first["id"], "seated", first),
        FeedItem(second["id"], "hand_started", second),
    ]
    assert [r.headers["Last-Event-ID"] for r in requests] == ["7-0-0", "7-0-0", "7-1-0", "7-2-0"]
    assert caught.value.code == "token_revoked"
