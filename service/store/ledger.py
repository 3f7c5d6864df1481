"""The double-entry ledger of settlements: every point that moved, between a seat's
player (or the system's bots) and the house or another player."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ..game import State
from ..rules import SEATS
from .pool import retried

HOUSE = "house"
BOTS = "bots"
#: A ledger entry: (account, seat or None for the house, kind, amount).
Entry = tuple[str, int | None, str, Decimal]
_Rows = list[tuple[Any, ...]]


def account(state: State, seat: int) -> str:
    taken = state.seats[seat]
    assert taken is not None  # a settled hand had every seat taken
    player = taken.player
    return BOTS if player is None else f"player:{player}"


def movements(state: State) -> list[list[Entry]]:
    """The movements of an ended hand, each as its entries (account, seat, kind, amount),
    which add to zero: the stakes between each farmer and the landlord (after the cap),
    then each winner's system cut and the disconnect penalty, to the house."""
    assert state.result is not None, "an ended hand"
    settlement = state.result.settlement
    landlord = state.result.outcome.landlord
    moves: list[list[Entry]] = []
    for seat in range(SEATS):
        amount = settlement.after_cap[seat]
        if seat != landlord and amount:
            moves.append(
                [
                    (account(state, seat), seat, "stake", amount),
                    (account(state, landlord), landlord, "stake", -amount),
                ]
            )
    for kind in ("rake", "penalty"):
        for seat, amount in enumerate(getattr(settlement, kind)):
            if amount:
                moves.append(
                    [(account(state, seat), seat, kind, -amount), (HOUSE, None, kind, amount)]
                )
    return moves


def write_settlement(conn: psycopg.Connection, match_id: uuid.UUID, state: State) -> bool:
    """Writes the settlement and its entries; ``False`` when the match is settled already
    (the primary key of ``settlements`` lets one settlement in, whoever runs the job)."""
    assert state.result is not None, "an ended hand"
    inserted = conn.execute(
        "INSERT INTO settlements (match_id, result) VALUES (%s, %s) ON CONFLICT (match_id) DO NOTHING RETURNING match_id",
        (match_id, Jsonb(state.result.to_json())),
    ).fetchone()
    if inserted is None:
        return False
    write_entries(conn, match_id, state)
    return True


def write_entries(conn: psycopg.Connection, match_id: uuid.UUID, state: State) -> int:
    """Writes the ledger entries of the settled hand in ``state``; how many."""
    rows = [
        (match_id, movement, acct, seat, kind, amount)
        for movement, entries in enumerate(movements(state))
        for acct, seat, kind, amount in entries
    ]
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO ledger_entries (match_id, movement, account, seat, kind, amount) VALUES (%s, %s, %s, %s, %s, %s)",
                rows,
            )
    return len(rows)


def unbooked(pool: ConnectionPool) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """The matches whose events say they are settled but that have no settlement, and the
    settlements without a ledger entry (a hand where no point moved has none)."""

    def read(conn: psycopg.Connection) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        settled = conn.execute(
            "SELECT stream_id FROM events e WHERE type = 'settled'"
            " AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.match_id = e.stream_id)"
            " ORDER BY stream_id"
        ).fetchall()
        bare = conn.execute(
            "SELECT match_id FROM settlements s"
            " WHERE NOT EXISTS (SELECT 1 FROM ledger_entries e WHERE e.match_id = s.match_id)"
            " ORDER BY match_id"
        ).fetchall()
        return [r[0] for r in settled], [r[0] for r in bare]

    return retried(pool, read)


def settlement(pool: ConnectionPool, match_id: uuid.UUID) -> dict[str, Any] | None:
    row = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT result, settled_at FROM settlements WHERE match_id = %s", (match_id,)
        ).fetchone(),
    )
    if row is None:
        return None
    result, settled_at = row
    amounts = result["settlement"]
    return {
        "match_id": match_id,
        "settled_at": settled_at,
        "landlord": result["landlord"],
        "bid": result["bid"],
        "winner": result["winner"],
        "factors": result["factors"],
        "multiplier": result["multiplier"],
        "first_disconnect": result["first_disconnect"],
        **{key: amounts[key] for key in ("gross", "after_cap", "rake", "penalty", "net", "house")},
    }


def player_ledger(pool: ConnectionPool, player_id: uuid.UUID, limit: int = 200) -> dict[str, Any]:
    acct = f"player:{player_id}"

    def read(conn: psycopg.Connection) -> tuple[Decimal, _Rows]:
        with conn.transaction():
            total = conn.execute(
                "SELECT coalesce(sum(amount), 0) FROM ledger_entries WHERE account = %s", (acct,)
            ).fetchone()
            assert total is not None  # an aggregate has its row
            balance: Decimal = total[0]
            rows = conn.execute(
                "SELECT entry_id, match_id, seat, kind, amount, created_at FROM ledger_entries"
                " WHERE account = %s ORDER BY entry_id DESC LIMIT %s",
                (acct, limit),
            ).fetchall()
        return balance, rows

    balance, rows = retried(pool, read)
    entries = [
        {
            "entry_id": r[0],
            "match_id": r[1],
            "seat": r[2],
            "kind": r[3],
            "amount": f"{r[4]:.2f}",
            "created_at": r[5],
        }
        for r in rows
    ]
    return {"player_id": player_id, "balance": f"{balance:.2f}", "entries": entries}


def booked(
    pool: ConnectionPool, match_id: uuid.UUID | None = None
) -> tuple[Decimal, int, list[str], dict[uuid.UUID, dict[Any, Decimal]]]:
    """What the ledger holds (or, given ``match_id``, holds for that match), read in one
    transaction: its total and number of entries, each movement that does not add to zero
    (described), and each settled match's amounts by seat and for the house (``"house"``)."""
    # Composed from constants only: the one value, the match, is a parameter.
    only = "" if match_id is None else " WHERE match_id = %(match)s"
    only_settlement = "" if match_id is None else " WHERE s.match_id = %(match)s"
    params = {"match": match_id}

    def read(conn: psycopg.Connection) -> tuple[tuple[Any, ...], _Rows, _Rows]:
        with conn.transaction():
            total = conn.execute(
                "SELECT coalesce(sum(amount), 0), count(*) FROM ledger_entries" + only, params
            ).fetchone()
            assert total is not None  # an aggregate has its row
            unbalanced = conn.execute(
                "SELECT match_id, movement, sum(amount) FROM ledger_entries"
                + only
                + " GROUP BY match_id, movement HAVING sum(amount) <> 0",
                params,
            ).fetchall()
            per_seat = conn.execute(
                "SELECT s.match_id, e.seat, e.account = 'house', coalesce(sum(e.amount), 0)"
                " FROM settlements s LEFT JOIN ledger_entries e ON e.match_id = s.match_id"
                + only_settlement
                + " GROUP BY s.match_id, e.seat, e.account = 'house'",
                params,
            ).fetchall()
        return total, unbalanced, per_seat

    total, unbalanced, per_seat = retried(pool, read)
    amounts: dict[uuid.UUID, dict[Any, Decimal]] = {}
    for match_id, seat, is_house, amount in per_seat:
        key = "house" if is_house else seat
        if key is not None:
            amounts.setdefault(match_id, {})[key] = amount
        else:
            amounts.setdefault(match_id, {})
    return (
        total[0],
        total[1],
        [f"match {m} movement {n} adds to {a:.2f}" for m, n, a in unbalanced],
        amounts,
    )


def settled_before(
    pool: ConnectionPool, before: datetime, after: uuid.UUID | None, limit: int
) -> list[tuple[uuid.UUID, datetime]]:
    """The matches settled before ``before``, by id from just after ``after``, ``limit``
    of them: (match, settled at)."""
    return retried(
        pool,
        lambda conn: conn.execute(
            "SELECT match_id, settled_at FROM settlements WHERE settled_at < %s"
            " AND match_id > %s ORDER BY match_id LIMIT %s",
            (before, after or uuid.UUID(int=0), limit),
        ).fetchall(),
    )


def entries_of(
    pool: ConnectionPool, match_ids: list[uuid.UUID]
) -> dict[uuid.UUID, list[tuple[int, str, int | None, str, Decimal]]]:
    """Each match's ledger entries: (movement, account, seat, kind, amount), in order."""
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT match_id, movement, account, seat, kind, amount FROM ledger_entries"
            " WHERE match_id = ANY(%s) ORDER BY match_id, movement, entry_id",
            (match_ids,),
        ).fetchall(),
    )
    found: dict[uuid.UUID, list[tuple[int, str, int | None, str, Decimal]]] = {
        m: [] for m in match_ids
    }
    for match_id, *entry in rows:
        found[match_id].append(tuple(entry))
    return found
