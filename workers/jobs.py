"""The jobs RQ runs. Each loads the match from PostgreSQL, checks it is still at the
version it was made for, and acts through the same command path as a player."""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import psycopg

from service.app import audit
from service.app.commands import CommandRequest
from service.app.metrics import (
    HOUSE_TAKINGS,
    JOB_SECONDS,
    PENALTIES,
    SETTLEMENT_LAG,
    SETTLEMENTS,
)
from service.app.ratings import rate_settled
from service.app.work import (
    BOT_TURN,
    CHECK_LEDGER,
    CHECK_UNVERDICTED,
    RATE_HAND,
    SETTLE_MATCH,
    TURN_TIMEOUT,
    check_ledger_later,
    check_unverdicted_later,
    rate_later,
    work_for,
)
from service.game import Disconnect, GameError, Settle, State, deadline, seat_view
from service.game.bot.levels import policy, seat_level
from service.game.commands import SeatCommand
from service.game.events import HandEnded, Settled
from service.game.policies import Policy
from service.game.record import export, verify
from service.game.state import ENDED
from service.store import MatchNotFound, StoredEvent, VersionConflict
from service.store.ledger import write_settlement
from service.store.ratings import RatingStore
from service.store.tables import TableNotFound

from .context import context

log = logging.getLogger(__name__)
#: A turn timeout run at most this early waits for the deadline instead of leaving.
EARLY_TOLERANCE = 2.0


def describe(events: Sequence[StoredEvent]) -> str:
    """What the system did, for the operator's log: the first event's summary (the kind of
    play and its card count, never a card), and the end of the hand if it came with it."""
    said = [events[0].event.summary()]
    said += [e.event.summary() for e in events[1:] if isinstance(e.event, HandEnded)]
    return "; ".join(said)


def _act(match_id: str, version: int, command: SeatCommand, what: str) -> str:
    ctx = context()
    try:
        outcome = ctx.commands.execute(
            CommandRequest(uuid.UUID(match_id), lambda _: command, expected_version=version)
        )
    except VersionConflict:
        log.debug("%s: match %s v%s: someone acted first", what, match_id, version)
        return "someone acted first"
    log.info("%s: match %s v%s %s", what, match_id, version, describe(outcome.events))
    return f"{command.name} at version {version}"


@functools.cache
def _policy(level: str) -> Policy:
    """The system's player at ``level``, one per worker process (the search's budget from
    the configuration; its dice from the match and the view, so no seed is needed)."""
    return policy(level, budget=context().config.bot_search_ms / 1000)


@JOB_SECONDS.labels(BOT_TURN).time()
def bot_turn(match_id: str, version: int) -> str:
    """Plays the turn of a seat the system plays (a bot seat, or 系统代打), if the match is
    still at ``version``. The policy sees only that seat's view."""
    try:
        loaded = context().store.load(uuid.UUID(match_id))
    except MatchNotFound:
        return "no such match"
    state = loaded.state
    if state.version != version or work_for(state, loaded.last_recorded_at) != BOT_TURN:
        return "stale"
    turn = state.turn
    taken = None if turn is None else state.seats[turn]
    assert turn is not None and taken is not None  # a bot turn is a seated seat's turn
    assert state.table is not None
    view = seat_view(state, turn)
    command = _policy(seat_level(view, state.table.bot_level)).act(view)
    # A player's seat that the system plays since a disconnect: 系统代打.
    what = "bot turn" if taken.bot else "bot turn (系统代打)"
    try:
        return _act(match_id, version, command, what)
    except GameError as exc:
        # The bot chose an illegal command: a bug worth a loud failure. Only the code is
        # told: the message may name the seat's cards, and logs are no place for them.
        log.error("bot command refused at match %s version %s: %s", match_id, version, exc.code)
        raise RuntimeError(f"bot command refused: {exc.code}") from None


@JOB_SECONDS.labels(TURN_TIMEOUT).time()
def turn_timeout(match_id: str, version: int) -> str:
    """The seat to act at ``version`` missed its deadline: it is disconnected, and the
    system plays it from now on (the first seat to disconnect pays the penalty)."""
    try:
        loaded = context().store.load(uuid.UUID(match_id))
    except MatchNotFound:
        return "no such match"
    state = loaded.state
    due = deadline(state, loaded.last_recorded_at)
    if state.version != version or due is None:
        return "stale"
    turn = state.turn
    assert turn is not None  # there is a deadline: a seat is to act
    if state.is_system(turn):
        return "stale"
    early = (due - datetime.now(UTC)).total_seconds()
    if early > EARLY_TOLERANCE:
        return "not due yet"  # the deadline scan enqueues it again once it is
    if early > 0:
        # This clock and the database's differ by a little: wait it out.
        time.sleep(early)
    # The disconnect is the takeover: the system plays the seat from now on (系统代打).
    return _act(match_id, version, Disconnect(turn, "deadline"), "turn timeout")


@JOB_SECONDS.labels(SETTLE_MATCH).time()
def settle_match(match_id: str) -> str:
    """Writes the ended hand's settlement, recomputed from its events, to the ledger and
    appends ``settled``, in one transaction. A second run, or two at once, pays once."""
    ctx = context()
    key = uuid.UUID(match_id)
    try:
        loaded = ctx.store.load(key)
    except MatchNotFound:
        return "no such match"
    state = loaded.state
    if state.phase != ENDED:
        return "not ended"
    if state.settled:
        return "settled already"
    recomputed = verify(export(e.event for e in ctx.store.read(key)))

    def ledger(conn: psycopg.Connection, stored: State) -> None:
        if not write_settlement(conn, key, recomputed):
            raise GameError("the hand is settled already", "already_settled")
        # Checked once, here: the entries just booked against the result its events
        # stored, the verdict kept with the settlement (the console reads it).
        for problem in audit.check_settling(ctx.pool, conn, key, stored):
            log.error("ledger check: %s", problem)

    try:
        outcome = ctx.commands.execute(CommandRequest(key, lambda _: Settle(), within=ledger))
    except GameError as exc:
        if exc.code == "already_settled":
            return "settled already"
        raise
    settled = outcome.events[0].event
    assert isinstance(settled, Settled)
    # Unsettled, the match's last event is hand_ended; both were recorded.
    assert outcome.last_recorded_at is not None and loaded.last_recorded_at is not None
    SETTLEMENT_LAG.observe((outcome.last_recorded_at - loaded.last_recorded_at).total_seconds())
    assert recomputed.result is not None  # a verified record is of an ended hand
    amounts = recomputed.result.settlement
    SETTLEMENTS.inc()
    HOUSE_TAKINGS.labels("rake").inc(float(sum(amounts.rake)))
    HOUSE_TAKINGS.labels("penalty").inc(float(sum(amounts.penalty)))
    if any(amounts.penalty):
        PENALTIES.inc()
    log.info(
        "settled: match %s v%s net %s house %s",
        match_id,
        outcome.events[0].version - 1,
        " ".join(settled.net),
        settled.house,
    )
    # The hand's rating, and a table's hand recorded at the table now (the sweep finds
    # either if this worker dies).
    rate_later(ctx.redis, match_id)
    ctx.tables.record_hand(key)
    return "settled"


@JOB_SECONDS.labels(CHECK_LEDGER).time()
def check_ledger(check_id: str) -> str:
    """A batch of the full ledger check ``check_id`` (asked for by an operator): its hands
    checked again, their verdicts stored, the progress recorded; then the next batch
    enqueued, behind the games' jobs, while any hands are left."""
    ctx = context()
    done = audit.full_check_batch(ctx.pool, ctx.store, int(check_id))
    if done is None:
        return "finished (or this batch was recorded by another run)"
    check_ledger_later(ctx.redis, int(check_id), done)
    return f"{done} hands checked so far"


@JOB_SECONDS.labels(CHECK_UNVERDICTED).time()
def check_unverdicted() -> str:
    """Checks a batch of the settled hands without a stored verdict (settled before
    verdicts were kept) and stores theirs; enqueues the next batch while any are left, so
    that no one has to ask for a full check."""
    ctx = context()
    checked, failing, left = audit.check_unverdicted(ctx.pool, ctx.store)
    if left is not None:
        check_unverdicted_later(ctx.redis, left)
    return f"{checked} hands checked, {failing} failing"


@JOB_SECONDS.labels(RATE_HAND).time()
def rate_hand(match_id: str) -> str:
    """Rates the settled hand's players (docs/ratings.md), once: a second run, or two at
    once, finds it rated."""
    ctx = context()
    return rate_settled(ctx.store, RatingStore(ctx.pool), uuid.UUID(match_id))


def table_due(table_id: str, version: int) -> str:
    """Does what the table at ``version`` waits for: records its settled hand, seats bots
    in its empty seats, or deals its next hand."""
    try:
        return context().tables.advance(uuid.UUID(table_id), version)
    except TableNotFound:
        return "no such table"


def match_tickets() -> str:
    """Seats the lobby's waiting tickets at tables that lost a person, or at new tables."""
    config = context().config
    made = context().tables.match_tickets(
        config.lobby_bots_after, config.table_next_hand_seconds, config.table_close_seconds
    )
    return f"{made} tables"
