"""``ddz bridge``: a local engine (docs/bot-protocol.md) playing on the service, through the
Python client (``ddz_client``): it takes a seat (a given table, or the lobby's quick
match), follows the player's own stream, and answers each ``your_turn`` with the engine's
action, hand after hand.

What it relies on: the stream resumes after its last item when a connection drops (the
client does that); a command carries ``expected_version`` (a turn that moved on meanwhile
is refused, not misapplied) and an ``Idempotency-Key`` derived from the match and the
version it answers, so that a retry — or a restarted bridge answering the same turn — is
applied at most once. A restarted bridge finds its table (``GET /v1/me/tables``) and the
hand under way, and answers the turn that is pending, or takes its seat back from the
system (``resume``).

An engine that fails (crashes, answers garbage or something illegal, or runs out of time)
is logged, killed, and the bridge leaves that hand (``POST /v1/matches/{id}/leave``): the
system plays the seat to the end as for any disconnect (the penalty of docs/rules.md §5.6
is the same as for a missed deadline, and the other seats need not wait for it). The
engine is started anew for the next hand; after :data:`MAX_FAILURES` failing hands in a
row the bridge gives up (:class:`GaveUp`, exit status 1).

It tells its author what happens: each hand's result and the seat's net, each engine
failure, each wait for the service with its reason (the client logs its own retries),
and it paces its commands below the service's limit on a token's commands. On a ladder
(a bot account's rated tables of bot accounts, docs/tables.md) it goes back to the lobby
whenever its table closes, and plays on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from ddz_client import Client, FeedItem, ProblemError, TransportError
from ddz_client.client import TRANSIENT

from .engine import Engine, EngineError, decide_message, hand_over_message, new_hand_message

log = logging.getLogger("ddz.bridge")
T = TypeVar("T")

#: Hands in a row in which the engine failed before the bridge gives up.
MAX_FAILURES = 3
#: The longest wait between two tries of a request the service does not answer.
MAX_RETRY_SECONDS = 10.0
#: Kept back from a turn's deadline for the command's way to the service.
MARGIN_MS = 500
#: Commands a bridge sends per second at most: below the service's default limit of 10 a
#: token (DDZ_RATE_LIMIT_COMMANDS), which a bridge at full speed would otherwise meet.
COMMANDS_PER_SECOND = 8.0
#: Refusals that say the turn moved on before the answer arrived (another seat's timeout,
#: an answer already applied): nothing the engine did wrong.
STALE = frozenset({"version_conflict", "idempotency_key_reused", "not_your_turn", "match_ended"})


class GaveUp(Exception):
    """The engine failed :data:`MAX_FAILURES` hands in a row."""


@dataclass(frozen=True)
class Lobby:
    """What the bridge asks the lobby for when it is given no table."""

    ruleset: str | None = None
    unit: str | None = None
    cap: str | None = None
    #: A bot account's ladder: rated tables of bot accounts only, one after the other.
    ladder: bool = False


class Bridge:
    """One engine at one seat of the service. :meth:`run` plays until ``hands`` hands
    have ended (then leaves the table), or for ever."""

    def __init__(
        self,
        client: Client,
        engine: Engine,
        *,
        table_id: str | None = None,
        invite: str | None = None,
        lobby: Lobby = Lobby(),
        hands: int | None = None,
        move_ms: int = 5000,
        retry_seconds: float = 1.0,
        commands_per_second: float = COMMANDS_PER_SECOND,
    ) -> None:
        self.client, self.engine = client, engine
        self.table_id, self.invite, self.lobby = table_id, invite, lobby
        self.hands, self.move_ms = hands, move_ms
        self.retry_seconds = retry_seconds  # the first wait for a service that does not answer
        self.ticket_id: str | None = None
        self.played = 0  # hands ended at the table since the bridge started
        self.failures = 0  # failing hands in a row
        self.failed_hands = 0  # hands in which the engine failed, in all
        self.net = Decimal(0)  # the seat's nets in the hands ended, in all
        self.seats: dict[str, int] = {}  # our seat at each match (from hand_started)
        self.interval = 1 / commands_per_second
        self.last_command = 0.0  # when the last command was sent (monotonic)
        self.failed: set[str] = set()  # matches the system plays for us: the engine failed
        self.told: str | None = None  # the match the engine was told new_hand of
        self.answered: set[tuple[str, int]] = set()
        #: Seconds from each ``your_turn`` item's arrival to the command's answer.
        self.turn_seconds: list[float] = []

    def run(self) -> int:
        """Plays; returns the number of hands played. Raises :class:`GaveUp` (having left
        the table, whose seat the system then fills as for anyone who leaves). Stopped any
        other way (Ctrl-C, a kill), it keeps its seat: started again, it picks up."""
        self.engine.start()
        log.info("engine %s (by %s) started", self.engine.name, self.engine.author or "?")
        try:
            # Asked first: a wrong --url is told (each try logged) and a bad token refused
            # here; the stream would retry them in silence.
            me = self.call(self.client.me)
            log.info(
                "playing as %s (%s)",
                me["name"],
                "a bot account"
                if me.get("bot_account")
                else "not a bot account: its seats "
                "are not marked as a program's (POST /v1/players with bot_account)",
            )
            for item in self.client.stream():
                self.on_item(item)
                if self.hands is not None and self.played >= self.hands:
                    break
        except GaveUp:
            self.leave()
            raise
        finally:
            self.engine.close()
        self.leave()
        return self.played

    def leave(self) -> None:
        if self.table_id is None:
            return
        try:
            self.call(self.client.leave_table, self.table_id)
        except ProblemError as exc:
            if exc.code != "not_seated":
                raise
            # Left already: by another bridge playing the same player, or by this leave
            # whose answer was lost. Either way the seat is given up, as asked.
            log.info(
                "left table %s after %s (the seat was gone)", self.table_id, hand_count(self.played)
            )
        else:
            log.info("left table %s after %s", self.table_id, hand_count(self.played))

    def call(self, request: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``request`` of the client, sent again until the service answers (not busy). The
        client retries for a few seconds; a service that restarts or sheds load may take
        longer, and the bridge has nothing else to do meanwhile (the stream resumes after
        it); a busy answer is no refusal of the engine's action. Each request the
        bridge makes is safe to repeat: reads, the lobby's one ticket, a join that finds
        the seat taken by its first attempt, a command under its Idempotency-Key, a leave
        (a repeated one is refused, not done twice)."""
        delay = self.retry_seconds
        while True:
            try:
                return request(*args, **kwargs)
            except (TransportError, ProblemError) as exc:
                if isinstance(exc, ProblemError) and exc.status not in TRANSIENT:
                    raise
                log.warning("the service does not answer (%s); again in %.1f s", exc, delay)
            time.sleep(delay)
            delay = min(2 * delay, MAX_RETRY_SECONDS)

    # --- the seat -------------------------------------------------------------------------

    def sit(self) -> None:
        """Takes the seat: the given table, the table where the player sits already (a
        restarted bridge), or the lobby's; then picks up the hand under way."""
        seated = [str(table["table_id"]) for table in self.call(self.client.my_tables)]
        if self.table_id is not None:
            if self.table_id not in seated:
                self.call(self.client.join_table, self.table_id, self.invite)
        elif seated:
            self.table_id = seated[0]
        else:
            ticket = self.call(
                self.client.quick_match,
                ruleset=self.lobby.ruleset,
                unit=self.lobby.unit,
                cap=self.lobby.cap,
                ladder=self.lobby.ladder,
            )
            self.ticket_id = str(ticket["ticket_id"])
            if ticket.get("table_id"):
                self.table_id = str(ticket["table_id"])
            else:
                log.info("waiting in the lobby (ticket %s)", self.ticket_id)
        if self.table_id is not None:
            log.info("seated at table %s", self.table_id)
            match_id = self.call(self.client.table, self.table_id).get("match_id")
            if match_id:
                self.turn(str(match_id), time.perf_counter())

    def on_item(self, item: FeedItem) -> None:
        data = item.data
        if item.type == "ready":
            # The stream is open from here on: nothing that follows can be missed.
            self.sit()
        elif item.type == "seated" and self.table_id is None:
            if data.get("ticket_id") == self.ticket_id:
                self.table_id = str(data["table_id"])
                log.info("seated at table %s (seat %s)", self.table_id, data["seat"])
        elif data.get("table_id") != self.table_id:
            return  # another table's: not this bridge's to play
        elif item.type == "hand_started":
            self.seats[str(data["match_id"])] = int(data["seat"])
        elif item.type == "your_turn":
            self.turn(str(data["match_id"]), time.perf_counter())
        elif item.type == "taken_over":
            match_id = str(data["match_id"])
            log.warning("match %s: the system plays our seat (%s)", match_id, data["reason"])
            if match_id not in self.failed:
                self.turn(match_id, time.perf_counter())  # offers resume: take it back
        elif item.type == "hand_ended":
            self.hand_ended(str(data["match_id"]), data["result"])
        elif item.type == "settled":
            log.info(
                "match %s settled: net %s in the ledger; %s in the hands since the bridge started",
                data["match_id"],
                f"{Decimal(str(data['net'])):+.2f}",
                f"{self.net:+.2f}",
            )
        elif item.type in ("left", "table_closed"):
            log.info("our seat at table %s is gone (%s)", self.table_id, item.type)
            self.table_id = None
            if self.lobby.ladder and (self.hands is None or self.played < self.hands):
                log.info("back to the ladder's lobby")
                self.ticket_id = None
                self.sit()
            else:
                self.hands = self.played  # nothing more to play

    # --- a turn ---------------------------------------------------------------------------

    def turn(self, match_id: str, arrived: float) -> None:
        """Answers the seat's pending decision at ``match_id``, if any."""
        if match_id in self.failed:
            return
        view = self.call(self.client.match, match_id)
        version, actions = int(view["version"]), view["actions"]
        if not actions or (match_id, version) in self.answered:
            return
        self.answered.add((match_id, version))
        if [a["action"] for a in actions] == ["resume"]:
            log.info("match %s: taking our seat back", match_id)
            self.send(match_id, version, {"action": "resume"}, arrived)
            return
        try:
            if not self.engine.running:
                self.engine.start()
            if self.told != match_id:
                self.engine.tell(new_hand_message(view))
                self.told = match_id
            ms = self.time_left_ms(view)
            if ms <= 0:
                # Too late to answer in time: the system will take the seat over, and the
                # bridge take it back (resume) at the next decision. No fault of the engine's.
                log.warning("match %s: the turn's deadline is too near to ask", match_id)
                return
            action = self.engine.decide(decide_message(view, ms), ms / 1000)
        except EngineError as exc:
            self.fail(match_id, exc)
            return
        try:
            self.send(match_id, version, action, arrived)
        except ProblemError as exc:
            if exc.status == 401:
                raise  # the token is refused (revoked, expired), not the engine's action
            self.fail(match_id, self.engine.illegal(action, f"{exc.code}: {exc.detail}"))

    def send(self, match_id: str, version: int, action: dict[str, Any], arrived: float) -> None:
        """Sends the command; a turn that moved on meanwhile is let go, another refusal
        raised (the engine's doing)."""
        self.pace()
        try:
            self.call(
                self.client.command,
                match_id,
                action,
                expected_version=version,
                idempotency_key=f"ddz-bridge:{match_id}:{version}",
            )
        except ProblemError as exc:
            if exc.code not in STALE:
                raise
            log.info("match %s: the turn at version %d moved on (%s)", match_id, version, exc.code)
            return
        self.turn_seconds.append(time.perf_counter() - arrived)

    def pace(self) -> None:
        """Waits until the next command keeps within :data:`COMMANDS_PER_SECOND`."""
        wait = self.last_command + self.interval - time.monotonic()
        if wait > 0:
            log.debug("pacing: the next command in %.3f s", wait)
            time.sleep(wait)
        self.last_command = time.monotonic()

    def time_left_ms(self, view: dict[str, Any]) -> int:
        """The engine's time: its limit, or what is left of the turn if less."""
        deadline = view.get("deadline")
        if not deadline:
            return self.move_ms
        left = (datetime.fromisoformat(deadline) - datetime.now().astimezone()).total_seconds()
        return max(0, min(self.move_ms, int(left * 1000) - MARGIN_MS))

    def fail(self, match_id: str, error: EngineError) -> None:
        """The engine failed at ``match_id``: said plainly; the system plays the seat."""
        self.failed.add(match_id)
        self.failed_hands += 1
        self.told = None
        self.engine.kill()
        log.error(
            "engine %s failed in match %s: %s: %s; the system plays our seat to the end of "
            "this hand, the engine starts again for the next",
            self.engine.name,
            match_id,
            error.code,
            error,
        )
        try:
            self.call(self.client.leave_match, match_id)
        except ProblemError as exc:
            log.info("match %s: leaving: %s", match_id, exc.code)

    def hand_ended(self, match_id: str, result: dict[str, Any]) -> None:
        self.played += 1
        seat = self.seats.get(match_id)
        landlord = result["landlord"]
        ours = ""
        if seat is not None:
            net = Decimal(result["settlement"]["net"][seat])
            self.net += net
            role = "landlord" if seat == landlord else "farmer"
            ours = f"; our seat {seat} ({role}): net {net:+.2f}"
        log.info(
            "hand %d ended (match %s): the %s won, landlord seat %s, bid %s, multiplier %s%s%s",
            self.played,
            match_id,
            result["winner"],
            landlord,
            result["bid"],
            result["multiplier"],
            ours,
            " (the system played our seat: the engine failed)" if match_id in self.failed else "",
        )
        if match_id in self.failed:
            self.failures += 1
            if self.failures >= MAX_FAILURES:
                raise GaveUp(f"engine {self.engine.name} failed {self.failures} hands in a row")
        else:
            self.failures = 0
        if self.told == match_id and self.engine.running:
            try:
                self.engine.tell(hand_over_message(self.call(self.client.match, match_id)))
            except EngineError as exc:
                log.error("engine %s: %s: %s", self.engine.name, exc.code, exc)
        self.told = None


def hand_count(n: int) -> str:
    """``1 hand``, ``2 hands``: what the bridge says it played."""
    return f"{n} hand" if n == 1 else f"{n} hands"
