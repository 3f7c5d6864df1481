"""The operators' check of the ledger: what the store holds must add up, and must be what
the rules compute from each match's events (docs/rules.md §5), recomputed from scratch."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from psycopg_pool import ConnectionPool

from ..game import State
from ..game.record import Discrepancy, export, verify
from ..store import EventStore, ledger


def check_ledger(pool: ConnectionPool, store: EventStore) -> dict[str, Any]:
    """Every movement, every match and the whole ledger add to zero, and every settled
    match, recomputed from its events, equals its ledger entries."""
    total, entries, problems, booked = ledger.booked(pool)
    if total != 0:
        problems.insert(0, f"the ledger adds to {total:.2f}, not 0.00")
    for match_id, amounts in booked.items():
        problems += _recompute(store, match_id, amounts)
    return {
        "ok": not problems,
        "entries": entries,
        "matches": len(booked),
        "total": f"{total:.2f}",
        "problems": problems,
    }


def check_match(pool: ConnectionPool, store: EventStore, match_id: uuid.UUID) -> list[str]:
    """The ledger check of one ended match: its events verify, each of its movements adds
    to zero and, once settled, its ledger entries equal the settlement recomputed from its
    events. The problems found; none when it checks out."""
    _, _, problems, booked = ledger.booked(pool, match_id)
    return problems + _recompute(store, match_id, booked.get(match_id))


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
