"""The client: one player's token over HTTP, its requests retried where a retry is safe,
and the player's own stream followed across dropped connections."""

from __future__ import annotations

import email.utils
import enum
import logging
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import httpx
from httpx_sse import connect_sse

from .problems import ProblemError, problem_of

__version__ = "0.1.0"
#: Each wait before a request is sent again is logged here (WARNING), with its reason: a
#: program that configures logging tells its user why it waits.
log = logging.getLogger("ddz_client")

#: Answers that say the service did not act and may another time: the service is busy or
#: unavailable, or a proxy in front of it could not reach it.
TRANSIENT = frozenset({429, 502, 503, 504})
#: Transport errors raised before the request reached the service: it surely did not act.
UNSENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: A stream the service closes sooner than this after opening it is reopened after a
#: backoff, not at once (so that a service that closes every stream is not hammered).
QUICK_CLOSE_SECONDS = 1.0


class Retry(enum.Enum):
    """When a request may be sent again."""

    #: Repeating it changes nothing more: reads, a cancel, a command or a creation with its
    #: Idempotency-Key (the service answers a repeat with the first attempt's answer).
    ALWAYS = "always"
    #: Only when the service surely did not act: the connection was never made, or it
    #: answered 429 (refused before acting). A new table or a new player made twice would
    #: be two; a 502/503/504 or a dropped connection leaves unknown whether it was made.
    UNSENT = "unsent"


@dataclass(frozen=True)
class FeedItem:
    """One item of the player's own stream: ``id`` (resume after it), ``type`` (``ready``,
    ``seated``, ``hand_started``, ``your_turn``, ...) and the item's fields as ``data``
    (docs/tables.md, "The player's own stream")."""

    id: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Page:
    """A page of ``GET /v1/me/events``: its items, and ``last_id`` to send back as
    ``after`` for what follows (``None``: nothing read yet)."""

    items: list[FeedItem]
    last_id: str | None


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number or an HTTP date)."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def item_of(data: dict[str, Any]) -> FeedItem:
    return FeedItem(str(data["id"]), str(data["type"]), data)


class Client:
    """A player's client of the service at ``base_url``, with its bearer ``token``.

    Requests that fail for a passing reason (the connection, 429, 502, 503, 504) are sent
    again up to ``retries`` times, waiting ``backoff`` seconds doubled each time (at most
    ``max_backoff``, or what ``Retry-After`` asks, at most ``max_retry_after``), but only
    when sending again is safe (see :class:`Retry`). Refusals raise
    :class:`~ddz_client.ProblemError`; a connection that still fails raises
    ``httpx.TransportError``.

    ``timeout``: seconds each request may take (a long poll's ``wait`` added);
    ``transport``: an httpx transport to send through instead of the network's (a test's
    mock, a proxy's)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = 4,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        max_retry_after: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.player_id: str | None = None
        self.timeout = timeout
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self.max_retry_after = max_retry_after
        headers = {"User-Agent": f"ddz-client/{__version__}", "Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    @classmethod
    def register(
        cls,
        base_url: str,
        name: str,
        *,
        bot_account: bool = False,
        owner_token: str | None = None,
        **options: Any,
    ) -> Client:
        """A new player named ``name`` (``bot_account``: an author's program, shown as
        such to the other seats, which belongs to the person whose ``owner_token``
        registers it); the client carries its ``token`` and ``player_id``."""
        body: dict[str, Any] = {"name": name}
        if bot_account:
            body["bot_account"] = True
        client = cls(base_url, owner_token if bot_account else None, **options)
        try:
            created = client._json("POST", "/v1/players", json=body, retry=Retry.UNSENT)
        except BaseException:
            client.close()
            raise
        client.token, client.player_id = created["token"], str(created["player_id"])
        client._http.headers["Authorization"] = f"Bearer {client.token}"
        return client

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- sending, retrying ------------------------------------------------------------------

    def _delay(self, attempt: int, asked: float | None) -> float:
        if asked is not None:
            return min(asked, self.max_retry_after)
        # Jittered, so that clients dropped together do not come back together.
        return min(self.max_backoff, self.backoff * 2.0**attempt) * random.uniform(0.5, 1.0)

    def _send(self, method: str, path: str, *, retry: Retry, **kwargs: Any) -> httpx.Response:
        """The successful answer; a refusal (or a passing failure that outlasted the
        retries) raised."""
        attempt = 0
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                if attempt >= self.retries or (
                    retry is Retry.UNSENT and not isinstance(exc, UNSENT_ERRORS)
                ):
                    raise
                _wait(f"{method} {path}", _reason(exc), self._delay(attempt, None))
            else:
                if response.is_success:
                    return response
                status = response.status_code
                if (
                    attempt >= self.retries
                    or status not in TRANSIENT
                    or (retry is Retry.UNSENT and status != 429)
                ):
                    raise problem_of(response)
                _wait(
                    f"{method} {path}",
                    str(problem_of(response)),
                    self._delay(attempt, retry_after(response)),
                )
            attempt += 1

    def _json(self, method: str, path: str, *, retry: Retry = Retry.ALWAYS, **kwargs: Any) -> Any:
        return self._send(method, path, retry=retry, **kwargs).json()

    def _create(self, path: str, body: dict[str, Any]) -> Any:
        """A POST that makes something (a ticket, a table, a seat at a table, a match),
        with an Idempotency-Key made for this call and kept over its retries: a repeat
        gets the first attempt's answer and makes nothing more."""
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        return self._json("POST", path, json=body, headers=headers)

    # --- the player ---------------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        """The caller: ``player_id``, ``name``, ``bot_account``, ``balance``."""
        me: dict[str, Any] = self._json("GET", "/v1/me")
        self.player_id = str(me["player_id"])
        return me

    def my_matches(self, *, limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        result: dict[str, Any] = self._json("GET", "/v1/me/matches", params=params)
        return result

    def my_tables(self) -> list[dict[str, Any]]:
        tables: list[dict[str, Any]] = self._json("GET", "/v1/me/tables")["tables"]
        return tables

    # --- the lobby ------------------------------------------------------------------------------

    def quick_match(
        self,
        ruleset: str | None = None,
        unit: str | None = None,
        cap: str | None = None,
        allow_bots: bool = True,
        ladder: bool = False,
    ) -> dict[str, Any]:
        """A lobby ticket for a table of four with these settings (the server's defaults
        where none is given); ``ladder``: a bot account's, for a table of bot accounts
        (two at least, system bots in the other seats after the lobby's wait). A player has one waiting ticket at a time: when it has one
        already (or a retry finds the first attempt's), that ticket is the answer."""
        body: dict[str, Any] = {"allow_bots": allow_bots}
        if ladder:
            body["ladder"] = True
        for name, value in (("ruleset", ruleset), ("unit", unit), ("cap", cap)):
            if value is not None:
                body[name] = value
        try:
            ticket: dict[str, Any] = self._create("/v1/lobby/tickets", body)
        except ProblemError as exc:
            if exc.code != "ticket_waiting" or "ticket_id" not in exc.body:
                raise
            return self.ticket(exc.body["ticket_id"])
        return ticket

    def ticket(self, ticket_id: str) -> dict[str, Any]:
        """The caller's ticket: ``status`` waiting, seated (with ``table_id``) or cancelled."""
        ticket: dict[str, Any] = self._json("GET", f"/v1/lobby/tickets/{ticket_id}")
        return ticket

    def cancel_ticket(self, ticket_id: str) -> dict[str, Any]:
        """Cancel a waiting ticket (cancelling again changes nothing: retried safely)."""
        ticket: dict[str, Any] = self._json("DELETE", f"/v1/lobby/tickets/{ticket_id}")
        return ticket

    # --- tables -----------------------------------------------------------------------------------

    def create_table(self, **options: Any) -> dict[str, Any]:
        """A new table (the options of ``POST /v1/tables``: ruleset, unit, cap, rake,
        bombs_double, turn_seconds, bot_level, bots_after, next_hand_seconds, private),
        the caller in seat 0."""
        table: dict[str, Any] = self._create("/v1/tables", options)
        return table

    def table(self, table_id: str) -> dict[str, Any]:
        table: dict[str, Any] = self._json("GET", f"/v1/tables/{table_id}")
        return table

    def join_table(self, table_id: str, invite: str | None = None) -> dict[str, Any]:
        """Take a free seat at the table (``invite``: a private table's code), or find the
        caller seated there already: either way the table is the answer. So a retry that
        meets ``already_seated`` (its first attempt took the seat) is no failure, and the
        request is retried as safely as a read."""
        body = {} if invite is None else {"invite": invite}
        try:
            table: dict[str, Any] = self._create(f"/v1/tables/{table_id}/seats", body)
        except ProblemError as exc:
            if exc.code == "already_seated" and self._seated(table_id):
                return self.table(table_id)
            raise
        return table

    def _seated(self, table_id: str) -> bool:
        if self.player_id is None:
            self.me()
        return any(
            seat is not None and seat["player"] == self.player_id
            for seat in self.table(table_id)["seats"]
        )

    def leave_table(self, table_id: str) -> dict[str, Any]:
        """Leave the table (during a hand the system plays the seat to the end). Sent again
        only if it surely did not reach the service."""
        table: dict[str, Any] = self._json(
            "POST", f"/v1/tables/{table_id}/leave", retry=Retry.UNSENT
        )
        return table

    # --- matches ----------------------------------------------------------------------------------

    def create_match(self, **options: Any) -> dict[str, Any]:
        """A new match of one hand (the options of ``POST /v1/matches``); nobody seated."""
        match: dict[str, Any] = self._create("/v1/matches", options)
        return match

    def take_seat(
        self, match_id: str, seat: int | None = None, *, bot: bool = False
    ) -> dict[str, Any]:
        """Take a seat at a match (``bot``: fill it with a system bot, which only a player
        seated at the match may); the caller's view."""
        body: dict[str, Any] = {"bot": bot}
        if seat is not None:
            body["seat"] = seat
        view: dict[str, Any] = self._json(
            "POST", f"/v1/matches/{match_id}/seats", json=body, retry=Retry.UNSENT
        )
        return view

    def match(self, match_id: str) -> dict[str, Any]:
        """The caller's view of the match: its own hand, counts, the play to beat, whose
        turn, the ``actions`` it may take and the ``version``."""
        view: dict[str, Any] = self._json("GET", f"/v1/matches/{match_id}")
        return view

    def legal(self, match_id: str) -> dict[str, Any]:
        """The caller's legal plays now, each with concrete ``cards``, and ``can_pass``."""
        legal: dict[str, Any] = self._json("GET", f"/v1/matches/{match_id}/legal")
        return legal

    def record(self, match_id: str) -> dict[str, Any]:
        """The hand record (docs/hand-record.md), once the hand has ended."""
        record: dict[str, Any] = self._json("GET", f"/v1/matches/{match_id}/record")
        return record

    def leave_match(self, match_id: str) -> dict[str, Any]:
        """Leave the hand: the system plays the seat to the end (the penalty stands)."""
        result: dict[str, Any] = self._json(
            "POST", f"/v1/matches/{match_id}/leave", retry=Retry.UNSENT
        )
        return result

    def command(
        self,
        match_id: str,
        body: dict[str, Any],
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Act for the caller's seat (``body``: ``action`` and its ``value`` or ``cards``);
        the answer has the new ``version``, the ``events`` and the caller's ``view``.

        ``expected_version``: refused (409 ``version_conflict``) unless the match is at that
        version. The request carries an ``Idempotency-Key`` (new for each call, or the one
        given: a program that restarts may derive it from the match and the version it
        answers), the same on every retry, so the command applies at most once."""
        if expected_version is not None:
            body = {**body, "expected_version": expected_version}
        key = idempotency_key or uuid.uuid4().hex
        result: dict[str, Any] = self._json(
            "POST",
            f"/v1/matches/{match_id}/commands",
            json=body,
            headers={"Idempotency-Key": key},
        )
        return result

    def bid(
        self, match_id: str, value: int, *, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Bid 1, 2 or 3, or 0 to pass the bid."""
        return self.command(
            match_id, {"action": "bid", "value": value}, expected_version=expected_version
        )

    def show_hand(
        self, match_id: str, value: bool, *, expected_version: int | None = None
    ) -> dict[str, Any]:
        """The landlord shows its hand (摊打) or not."""
        return self.command(
            match_id, {"action": "show_hand", "value": value}, expected_version=expected_version
        )

    def report(
        self, match_id: str, value: str, *, expected_version: int | None = None
    ) -> dict[str, Any]:
        """报到: ``play``, ``no_play`` or ``decline``."""
        return self.command(
            match_id, {"action": "report", "value": value}, expected_version=expected_version
        )

    def play(
        self, match_id: str, cards: Sequence[str], *, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Play these cards (codes such as ``S3``, ``BJ``)."""
        return self.command(
            match_id, {"action": "play", "cards": list(cards)}, expected_version=expected_version
        )

    def pass_(self, match_id: str, *, expected_version: int | None = None) -> dict[str, Any]:
        """Pass (the command ``pass``; ``pass`` is a Python keyword)."""
        return self.command(match_id, {"action": "pass"}, expected_version=expected_version)

    def resume(self, match_id: str, *, expected_version: int | None = None) -> dict[str, Any]:
        """Take the seat back from the system (after a ``taken_over`` item)."""
        return self.command(match_id, {"action": "resume"}, expected_version=expected_version)

    # --- the player's own stream --------------------------------------------------------------

    def events(self, after: str | None = None, *, wait: float = 0.0) -> Page:
        """The items after ``after`` (none: from the first), waiting up to ``wait``
        seconds (at most 30) for the next when there is none yet."""
        params: dict[str, Any] = {"wait": wait}
        if after is not None:
            params["after"] = after
        page = self._json(
            "GET",
            "/v1/me/events",
            params=params,
            timeout=httpx.Timeout(self.timeout, read=self.timeout + wait),
        )
        return Page([item_of(item) for item in page["items"]], page["last_id"])

    def stream(self, after: str | None = None, *, idle_timeout: float = 45.0) -> Iterator[FeedItem]:
        """The player's own stream (Server-Sent Events), for as long as it is iterated.

        Without ``after`` the first item is ``ready``, whose id marks the present: what
        the player does from then on (a ticket, a seat) comes after it. Then the items
        after ``after`` or ``ready``, in order. The service closes a stream now and then
        and connections drop: the stream reconnects at once, resuming after the last id
        it gave (``Last-Event-ID``), so nothing is missed or repeated; failures are retried
        with backoff for as long as it is iterated. A connection silent for
        ``idle_timeout`` seconds (the service sends keep-alives) is taken as dropped.
        Refusals (401, 403, 400) raise :class:`~ddz_client.ProblemError`."""
        last = after
        failures = 0
        timeout = httpx.Timeout(self.timeout, read=idle_timeout)
        while True:
            headers = {"Accept": "text/event-stream"}
            if last is not None:
                headers["Last-Event-ID"] = last
            asked = None
            reason = "the service closed the stream at once"
            try:
                with connect_sse(
                    self._http, "GET", "/v1/me/stream", headers=headers, timeout=timeout
                ) as source:
                    response = source.response
                    if response.status_code != 200:
                        response.read()
                        if response.status_code not in TRANSIENT:
                            raise problem_of(response)
                        asked = retry_after(response)
                        reason = str(problem_of(response))
                    else:
                        opened = time.monotonic()
                        for event in source.iter_sse():
                            if not event.id or not event.data:
                                continue  # the reconnection delay the server advises
                            last, failures = event.id, 0
                            data = event.json() if event.data else {}
                            yield FeedItem(event.id, event.event, data)
                        # Closed by the service: after a while (its stream_seconds), resume
                        # at once; closed as soon as opened (a process that is stopping),
                        # back off as from a failure.
                        if time.monotonic() - opened >= QUICK_CLOSE_SECONDS:
                            failures = 0
                            continue
            except httpx.TransportError as exc:
                reason = _reason(exc)
            _wait("the player's stream", reason, self._delay(failures, asked))
            failures += 1


def _reason(exc: httpx.TransportError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _wait(what: str, reason: str, seconds: float) -> None:
    """Waits before sending again, saying why."""
    log.warning("%s: %s; trying again in %.1f s", what, reason, seconds)
    time.sleep(seconds)
