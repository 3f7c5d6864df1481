"""The command path, for the API and the workers alike: load the match, decide the
command on its state, append the events at the version decided on, and what follows (the
deal once the fourth seat is taken; then the work the new state calls for, through the
``on_appended`` callback that the process wires: the API's app factory and the worker's
context each pass one)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from ..game import (
    Command,
    DealHand,
    GameError,
    State,
    decide,
    decision,
    decision_kept,
    initial_state,
    replay,
)
from ..game.commands import SeatCommand
from ..game.state import DEALING
from ..rules import new_seed
from ..store import (
    ATTEMPTS,
    Behind,
    ConnectionLost,
    DatabaseUnavailable,
    EventStore,
    Idempotency,
    Loaded,
    Outcome,
    VersionConflict,
    pause,
)
from .metrics import APPEND_SECONDS, VERSION_CONFLICTS

#: Appends retried on a version conflict when the caller named no expected version.
RETRIES = 5


@dataclass(frozen=True)
class CommandRequest:
    """A command on a match. ``decide`` makes the command from the match's state (it may
    refuse with a :class:`GameError`). With ``expected_version`` a stale state fails with
    :class:`VersionConflict` (but for the decision pending there, which stands while every
    later event leaves it as it was: another seat disconnected or took its seat back);
    without, a lost race is decided again on the new state, and a refusal is always
    decided on the latest state.

    ``idempotency`` is (player, key, request hash): the key is written with the events,
    and a retry with the same key gets the first outcome back without deciding again (the
    same key with another request: :class:`IdempotencyMismatch`). ``new_match`` starts a
    stream. ``within`` writes what must commit with the events (the ledger of a
    settlement), in their transaction."""

    match_id: uuid.UUID
    decide: Callable[[State], Command]
    expected_version: int | None = None
    idempotency: Idempotency | None = None
    new_match: bool = False
    within: Callable[[psycopg.Connection, State], None] | None = None


class _Lost(Exception):
    """The connection broke during a command. ``known`` is the state its last append was
    decided on, if it got that far: whether that append committed is then unknown."""

    def __init__(self, known: Loaded | None):
        super().__init__("the database connection broke")
        self.known = known


class Commands:
    def __init__(
        self, store: EventStore, on_appended: Callable[[uuid.UUID, Outcome], None] | None = None
    ):
        self.store = store
        self.on_appended = on_appended

    def execute(self, request: CommandRequest) -> Outcome:
        """The command's outcome; the work it calls for is handed to ``on_appended`` (a
        retry's replayed outcome appended nothing, and calls for nothing new)."""
        outcome = self._execute(request)
        if outcome.events and not outcome.replayed and self.on_appended is not None:
            self.on_appended(request.match_id, outcome)
        return outcome

    def _execute(self, request: CommandRequest) -> Outcome:
        # The command's identity: its events carry it, so that when the connection breaks
        # after the append was sent, the events say whether it committed.
        command_id = uuid.uuid4()
        attempts = 1 if request.expected_version is not None else RETRIES
        conflicts = lost = 0
        while True:
            try:
                return self._execute_once(request, command_id)
            except VersionConflict:
                # A concurrent request with the same key may have won: then this is its retry.
                replayed = (
                    self.store.replayed(request.match_id, request.idempotency)
                    if request.idempotency
                    else None
                )
                if replayed is not None:
                    return replayed
                conflicts += 1
                if conflicts == attempts:
                    raise
            except _Lost as exc:
                committed = (
                    self.store.committed(request.match_id, exc.known, command_id)
                    if exc.known
                    else None
                )
                if committed is not None:
                    return committed
                # Not committed: nothing was written, so the command is decided again.
                lost += 1
                if lost == ATTEMPTS:
                    raise DatabaseUnavailable(
                        "the database connection broke on every try"
                    ) from exc.__cause__
                pause(lost - 1)

    def _execute_once(self, request: CommandRequest, command_id: uuid.UUID) -> Outcome:
        # The command is decided on the state this process last saw of the match, and the
        # append (one statement) inserts only if the stream is still at that version. If
        # it is not, the append answers with the events missed instead: they are folded
        # in and the command decided again. So a command is one round trip when this
        # process saw the match's last event, and two when another process appended since.
        # Only what ``within`` writes needs a transaction around it (it reads first).
        store, match_id, expected = self.store, request.match_id, request.expected_version
        known = (
            None if request.new_match or request.within is not None else store.cache.get(match_id)
        )
        try:
            with store.connection(transaction=request.within is not None) as conn:
                read = known is None or expected not in (None, known.state.version)
                if read:
                    known = (
                        Loaded(initial_state, None)
                        if request.new_match
                        else store.load(match_id, conn)
                    )
                assert known is not None  # read above when nothing was known
                for _ in range(RETRIES):
                    try:
                        outcome = self._decide_and_append(conn, request, known.state, command_id)
                        break
                    except Behind as behind:
                        VERSION_CONFLICTS.inc()
                        if request.within is not None:
                            raise VersionConflict(
                                f"the match is at version {behind.missed[-1].version}, not {known.state.version}"
                            ) from None
                        known, read = store.fold(match_id, known, behind.missed), True
                    except GameError:
                        if not read:
                            # Refused on a state that may be behind: refuse only on the latest.
                            known, read = store.load(match_id, conn), True
                            continue
                        if request.idempotency is not None:
                            # A retry of a request whose events are in the state just read
                            # gets that request's outcome, not a refusal of the repeat.
                            replayed = store.replayed(match_id, request.idempotency, conn)
                            if replayed is not None:
                                return replayed
                        raise
                else:
                    raise VersionConflict("the match kept changing; try again")
        except ConnectionLost as exc:
            # ``known`` is the state the last append (if one was sent) was decided on.
            raise _Lost(known) from exc.__cause__
        store.cache.put(match_id, Loaded(outcome.state, outcome.last_recorded_at))
        return outcome

    def _decide_and_append(
        self, conn: psycopg.Connection, request: CommandRequest, state: State, command_id: uuid.UUID
    ) -> Outcome:
        expected = request.expected_version
        stale = VersionConflict(f"the match is at version {state.version}, not {expected}")
        pending = None
        if expected is not None and expected != state.version:
            pending = self._pending_since(conn, request.match_id, expected, state)
            if pending is None:
                raise stale
        command = request.decide(state)
        if pending is not None and not (
            isinstance(command, SeatCommand) and command.seat == pending[0]
        ):
            raise stale
        events = decide(state, command)
        after = replay(events, state)
        if after.phase == DEALING:
            # The fourth seat is taken: the deal, from a fresh secret seed, commits with it.
            more = decide(after, DealHand(new_seed()))
            events, after = events + more, replay(more, after)
        if request.within is not None:
            request.within(conn, state)
        with APPEND_SECONDS.time():
            stored = self.store.append(
                conn,
                request.match_id,
                state.version,
                events,
                after,
                command_id,
                request.idempotency,
            )
        return Outcome(stored, after, stored[-1].recorded_at)

    def _pending_since(
        self, conn: psycopg.Connection, match_id: uuid.UUID, expected: int, state: State
    ) -> tuple[int, str] | None:
        """The decision pending at version ``expected`` if every event since (up to
        ``state``) left it as it was: a seat told of its turn there (its ``your_turn``
        item, docs/tables.md) answers it then, not 409, when another seat disconnected
        meanwhile (a leave, a missed deadline) or took its seat back."""
        if not 0 < expected < state.version:
            return None
        stored = [s for s in self.store.read(match_id, 0, conn) if s.version <= state.version]
        at = replay(s.event for s in stored if s.version <= expected)
        later = [s.event for s in stored if s.version > expected]
        return decision(at) if decision_kept(at, later) else None
