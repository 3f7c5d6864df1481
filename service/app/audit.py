"""The operators' check of the ledger: what the store holds must add up, and must be what
the rules compute from each match's events (docs/rules.md §5), recomputed from scratch.

Each settled hand is checked once, in the transaction that settles it, and its verdict
stored (:func:`check_settling`); the console and ``/metrics`` read the stored verdicts
(docs/operations.md, "The ledger"), and ``ddz rebuild`` stores one for each hand it
writes. The hands that have none (settled before verdicts were kept) are checked by the
workers in the background, a batch at a time (:func:`check_unverdicted`). The full check (:func:`full_check_batch`,
background jobs an operator starts, a batch each) checks every settled hand again and
stores each verdict anew."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ..game import State
from ..game.record import Discrepancy, export, verify
from ..store import EventStore, ledger

#: The settled hands the full check (or the check of those without a verdict) reads,
#: checks and stores in one job (its progress moves by as many).
BATCH = 200


def check_ledger(pool: ConnectionPool, store: EventStore) -> dict[str, Any]:
    """Every movement, every match and the whole ledger add to zero, and every settled
    match, recomputed from its events, equals its ledger entries (all at once, as the
    API's check answers it)."""
    booked = ledger.booked(pool)
    total = sum((b.total for b in booked.values()), Decimal(0))
    problems = [] if total == 0 else [f"the ledger adds to {total:.2f}, not 0.00"]
    for match_id, found in booked.items():
        problems += found.unbalanced + _recompute(store, match_id, found.amounts)
    return {
        "ok": not problems,
        "entries": sum(b.entries for b in booked.values()),
        "matches": len(booked),
        "total": f"{total:.2f}",
        "problems": problems,
    }


def check_match(pool: ConnectionPool, store: EventStore, match_id: uuid.UUID) -> list[str]:
    """The ledger check of one ended match: its events verify, each of its movements adds
    to zero and, once settled, its ledger entries equal the settlement recomputed from its
    events. The problems found; none when it checks out."""
    found = ledger.booked(pool, [match_id]).get(match_id)
    if found is None:
        return _recompute(store, match_id, None)
    return found.unbalanced + _recompute(store, match_id, found.amounts)


def check_settling(
    pool: ConnectionPool, conn: psycopg.Connection, match_id: uuid.UUID, state: State
) -> list[str]:
    """Checks the hand being settled on ``conn``, in the settling transaction: what its
    entries book against the settlement of ``state`` (its stored events' result), and
    stores the verdict with the settlement. The problems found."""
    found = ledger.booked(pool, [match_id], conn)[match_id]
    problems = found.unbalanced + compare(str(match_id), state, found.amounts)
    ledger.write_verdicts(pool, [(match_id, problems, found)], conn)
    return problems


def full_check_batch(pool: ConnectionPool, store: EventStore, check_id: int) -> int | None:
    """The next batch of the full check ``check_id``: :data:`BATCH` settled hands, by id
    from where it stands, recomputed from their events and compared with their entries,
    each verdict stored and the progress recorded; after the last, the ledger's total, and
    the check is finished. The hands checked so far while more are left (the caller
    enqueues the next batch); None once it has finished (or if another run of this batch
    recorded it first)."""
    position = ledger.check_position(pool, check_id)
    if position is None or position.finished:
        return None
    if position.hands is None:
        ledger.count_check(pool, check_id)
    batch = ledger.settled_after(pool, position.checked_to, BATCH)
    if batch:
        failing = check_hands(pool, store, batch)
        done = ledger.advance_check(
            pool, check_id, position.checked_to, batch[-1], len(batch), failing
        )
        if done is None or len(batch) == BATCH:
            return done
    total, _ = ledger.whole(pool)
    problems = [] if total == 0 else [f"the ledger adds to {total:.2f}, not 0.00"]
    ledger.finish_check(pool, check_id, problems)
    return None


def check_unverdicted(pool: ConnectionPool, store: EventStore) -> tuple[int, int, uuid.UUID | None]:
    """Checks up to :data:`BATCH` of the settled hands without a stored verdict and stores
    theirs: (how many it checked, how many of them fail, the first of those left). Read
    with one more than it checks: looking for them reads every settled hand's id."""
    found = ledger.unverdicted(pool, BATCH + 1)
    batch, left = found[:BATCH], found[BATCH:]
    if not batch:
        return 0, 0, None
    return len(batch), check_hands(pool, store, batch), left[0] if left else None


def check_hands(pool: ConnectionPool, store: EventStore, batch: list[uuid.UUID]) -> int:
    """Each settled hand of ``batch`` recomputed from its events and compared with its
    entries, its verdict stored anew; how many fail."""
    booked = ledger.booked(pool, batch)
    verdicts = [
        (m, booked[m].unbalanced + _recompute(store, m, booked[m].amounts), booked[m])
        for m in batch
    ]
    ledger.write_verdicts(pool, verdicts)
    return sum(1 for _, problems, _ in verdicts if problems)


def _recompute(
    store: EventStore, match_id: uuid.UUID, booked: dict[Any, Decimal] | None
) -> list[str]:
    """What is wrong with the match's events, and with what the ledger books for it
    (``booked``; None before its settlement, when only the events are checked)."""
    try:
        state = verify(export(e.event for e in store.read(match_id)))
    except Discrepancy as exc:
        return [f"match {match_id}: its events do not verify: {exc}"]
    if booked is None:
        return []
    return compare(str(match_id), state, booked)


def compare(match_id: str, state: State, booked: dict[Any, Decimal]) -> list[str]:
    """What differs between the amounts booked for a hand (by seat, and ``"house"``) and
    its settlement in ``state``, the hand verified."""
    assert state.result is not None  # a verified record is of an ended hand
    settlement = state.result.settlement
    expected: dict[Any, Decimal] = dict(enumerate(settlement.net))
    expected["house"] = settlement.house
    found = []
    for key, amount in expected.items():
        if booked.get(key, Decimal(0)) != amount:
            found.append(
                f"match {match_id} {'house' if key == 'house' else f'seat {key}'}: ledger {booked.get(key, Decimal(0)):.2f}, recomputed {amount:.2f}"
            )
    return found
