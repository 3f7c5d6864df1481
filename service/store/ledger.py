"""The double-entry ledger of settlements: every point that moved, between a seat's
player (or the system's bots) and the house or another player."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
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


def correct(
    pool: ConnectionPool, player_id: uuid.UUID, amount: Decimal, operator: str, reason: str
) -> int:
    """Corrects the player's balance by ``amount`` (a credit when positive), the house
    taking the other side: an adjustment of its own with the operator and their reason,
    its two entries balancing. Its id."""
    with pool.connection() as conn, conn.transaction():
        row = conn.execute(
            "INSERT INTO ledger_adjustments (kind, operator, reason) VALUES ('correction', %s, %s)"
            " RETURNING adjustment_id",
            (operator, reason),
        ).fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO ledger_entries (adjustment_id, movement, account, seat, kind, amount)"
            " VALUES (%s, 0, %s, NULL, 'correction', %s), (%s, 0, %s, NULL, 'correction', %s)",
            (row[0], f"player:{player_id}", amount, row[0], HOUSE, -amount),
        )
    return int(row[0])


def void(pool: ConnectionPool, match_id: uuid.UUID, operator: str, reason: str) -> int | None:
    """Voids the settled hand: an adjustment whose entries undo each of the hand's, movement
    by movement (the hand's own entries stay as they were). Its id; None when the hand was
    voided already."""
    with pool.connection() as conn, conn.transaction():
        row = conn.execute(
            "INSERT INTO ledger_adjustments (kind, match_id, operator, reason)"
            " VALUES ('void', %s, %s, %s)"
            " ON CONFLICT (match_id) WHERE kind = 'void' DO NOTHING RETURNING adjustment_id",
            (match_id, operator, reason),
        ).fetchone()
        if row is None:
            return None
        conn.execute(
            "INSERT INTO ledger_entries (adjustment_id, movement, account, seat, kind, amount)"
            " SELECT %s, movement, account, seat, 'void', -amount FROM ledger_entries"
            " WHERE match_id = %s",
            (row[0], match_id),
        )
    return int(row[0])


def voided(pool: ConnectionPool, match_id: uuid.UUID) -> dict[str, Any] | None:
    """The hand's void (who, why, when), if it was voided."""
    row = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT adjustment_id, operator, reason, at FROM ledger_adjustments"
            " WHERE match_id = %s AND kind = 'void'",
            (match_id,),
        ).fetchone(),
    )
    keys = ("adjustment_id", "operator", "reason", "at")
    return None if row is None else dict(zip(keys, row))


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
                "SELECT e.entry_id, coalesce(e.match_id, a.match_id), e.seat, e.kind, e.amount,"
                " e.created_at, a.reason, a.operator FROM ledger_entries e"
                " LEFT JOIN ledger_adjustments a USING (adjustment_id)"
                " WHERE e.account = %s ORDER BY e.entry_id DESC LIMIT %s",
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
            "reason": r[6],
            "operator": r[7],
        }
        for r in rows
    ]
    return {"player_id": player_id, "balance": f"{balance:.2f}", "entries": entries}


@dataclass
class Booked:
    """What the ledger books for one settled match."""

    #: Its amounts by seat, and the house's (``"house"``).
    amounts: dict[Any, Decimal] = field(default_factory=dict)
    entries: int = 0
    #: What its entries add to (zero when they balance).
    total: Decimal = Decimal(0)
    #: Each of its movements that does not add to zero, described.
    unbalanced: list[str] = field(default_factory=list)


def booked(
    pool: ConnectionPool,
    match_ids: list[uuid.UUID] | None = None,
    conn: psycopg.Connection | None = None,
) -> dict[uuid.UUID, Booked]:
    """What the ledger books for each settled match of ``match_ids`` (every one when
    None); on ``conn`` when given (in the caller's transaction)."""
    # Composed from constants only: the one value, the matches, is a parameter.
    only = "" if match_ids is None else " WHERE s.match_id = ANY(%(matches)s)"
    rows = retried(
        pool,
        lambda c: c.execute(
            "SELECT s.match_id, e.movement, e.seat, e.account = 'house', e.amount"
            " FROM settlements s LEFT JOIN ledger_entries e ON e.match_id = s.match_id"
            + only
            + " ORDER BY s.match_id, e.movement",
            {"matches": match_ids},
        ).fetchall(),
        conn,
    )
    found: dict[uuid.UUID, Booked] = {}
    movements: dict[tuple[uuid.UUID, int], Decimal] = {}
    for match_id, movement, seat, is_house, amount in rows:
        booked = found.setdefault(match_id, Booked())
        if amount is None:
            continue  # a settlement where no point moved
        key = "house" if is_house else seat
        booked.amounts[key] = booked.amounts.get(key, Decimal(0)) + amount
        booked.entries += 1
        booked.total += amount
        movements[match_id, movement] = movements.get((match_id, movement), Decimal(0)) + amount
    for (match_id, movement), amount in movements.items():
        if amount:
            found[match_id].unbalanced.append(
                f"match {match_id} movement {movement} adds to {amount:.2f}"
            )
    return found


def write_verdicts(
    pool: ConnectionPool,
    verdicts: list[tuple[uuid.UUID, list[str], Booked]],
    conn: psycopg.Connection | None = None,
) -> None:
    """Stores each match's verdict (its problems, none when it checks out) with what its
    entries add to, replacing the one it had; on ``conn`` when given."""

    def write(c: psycopg.Connection) -> None:
        with c.cursor() as cur:
            cur.executemany(
                "INSERT INTO ledger_verdicts (match_id, problems, entries, total)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (match_id) DO UPDATE SET"
                " problems = excluded.problems, entries = excluded.entries,"
                " total = excluded.total, checked_at = now()",
                [(m, problems, b.entries, b.total) for m, problems, b in verdicts],
            )

    retried(pool, write, conn)


def settled_after(pool: ConnectionPool, after: uuid.UUID | None, limit: int) -> list[uuid.UUID]:
    """The settled matches by id from just after ``after``, ``limit`` of them."""
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT match_id FROM settlements WHERE match_id > %s ORDER BY match_id LIMIT %s",
            (after or uuid.UUID(int=0), limit),
        ).fetchall(),
    )
    return [r[0] for r in rows]


def unverdicted(pool: ConnectionPool, limit: int) -> list[uuid.UUID]:
    """The settled matches without a stored verdict (settled before verdicts were kept),
    by id, ``limit`` of them."""
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT s.match_id FROM settlements s WHERE NOT EXISTS"
            " (SELECT 1 FROM ledger_verdicts v WHERE v.match_id = s.match_id)"
            " ORDER BY s.match_id LIMIT %s",
            (limit,),
        ).fetchall(),
    )
    return [r[0] for r in rows]


#: A full check that has not moved on for this long is taken for lost.
STALLED_SECONDS = 600
#: A full check still running: neither finished nor stalled (its one parameter:
#: :data:`STALLED_SECONDS`).
_RUNNING = "finished_at IS NULL AND updated_at > now() - make_interval(secs => %s)"
#: The failing hands the summary of the verdicts lists (the rest are counted).
FAILING_SHOWN = 50


def verdicts(pool: ConnectionPool) -> dict[str, Any]:
    """The stored verdicts summed up, in one transaction: the settled hands, those checked,
    their entries and what they add to, the failing hands (the first :data:`FAILING_SHOWN`
    with their problems), the newest full check (``running`` unless it finished or
    stalled) and when the newest to finish did."""

    def read(conn: psycopg.Connection) -> dict[str, Any]:
        with conn.transaction():
            # Kept as they change (migrations/0033_ledger_totals.sql): a read of 16 rows,
            # not of every settlement and verdict of the history.
            totals = conn.execute(
                "SELECT coalesce(sum(settled), 0), coalesce(sum(checked), 0),"
                " coalesce(sum(entries), 0), coalesce(sum(total), 0), coalesce(sum(failing), 0)"
                " FROM ledger_totals"
            ).fetchone()
            failing = conn.execute(
                "SELECT match_id, problems FROM ledger_verdicts"
                " WHERE cardinality(problems) > 0 ORDER BY match_id LIMIT %s",
                (FAILING_SHOWN,),
            ).fetchall()
            last = conn.execute(
                _CHECK + " ORDER BY check_id DESC LIMIT 1", (STALLED_SECONDS,)
            ).fetchone()
            fully = conn.execute(
                "SELECT max(finished_at) FROM ledger_checks WHERE finished_at IS NOT NULL"
            ).fetchone()
        assert totals is not None and fully is not None  # aggregates have their row
        return {
            "settled": int(totals[0]),
            "checked": int(totals[1]),
            "entries": int(totals[2]),
            "total": totals[3],
            "failing": int(totals[4]),
            "failing_shown": [(m, problems) for m, problems in failing],
            "last_check": None if last is None else dict(zip(_CHECK_KEYS, last)),
            "fully_checked_at": fully[0],
        }

    return retried(pool, read)


#: A full check as :func:`verdicts` and :func:`full_check` read it (running: neither
#: finished nor stalled).
_CHECK = (
    "SELECT check_id, requested_by, requested_at, hands, done, failing, problems,"
    " finished_at, " + _RUNNING + " FROM ledger_checks"
)
_CHECK_KEYS = (
    "check_id",
    "requested_by",
    "requested_at",
    "hands",
    "done",
    "failing",
    "problems",
    "finished_at",
    "running",
)


def full_check(pool: ConnectionPool, check_id: int) -> dict[str, Any] | None:
    """The full check ``check_id`` and its progress, as :func:`verdicts` gives the newest."""
    row = retried(
        pool,
        lambda conn: conn.execute(
            _CHECK + " WHERE check_id = %s", (STALLED_SECONDS, check_id)
        ).fetchone(),
    )
    return None if row is None else dict(zip(_CHECK_KEYS, row))


def start_check(pool: ConnectionPool, requested_by: str) -> int | None:
    """A new full check, asked by ``requested_by``; its id. None while another runs."""

    def start(conn: psycopg.Connection) -> int | None:
        with conn.transaction():
            # One at a time: the lock is the transaction's, so two asks never both start.
            conn.execute("LOCK TABLE ledger_checks IN SHARE ROW EXCLUSIVE MODE")
            # A check that made no progress for a while was lost (its job with Redis, its
            # worker killed): it does not stand in the way of a new one.
            running = conn.execute(
                "SELECT 1 FROM ledger_checks WHERE " + _RUNNING,
                (STALLED_SECONDS,),
            ).fetchone()
            if running is not None:
                return None
            row = conn.execute(
                "INSERT INTO ledger_checks (requested_by) VALUES (%s) RETURNING check_id",
                (requested_by,),
            ).fetchone()
        assert row is not None
        return int(row[0])

    return retried(pool, start)


@dataclass(frozen=True)
class CheckPosition:
    """Where a full check is: the settled hands it checks (None until counted), the last
    settled match it checked (None before its first batch), and whether it has finished."""

    hands: int | None
    checked_to: uuid.UUID | None
    finished: bool


def check_position(pool: ConnectionPool, check_id: int) -> CheckPosition | None:
    """Where the full check ``check_id`` is; None if there is no such check."""
    row = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT hands, checked_to, finished_at IS NOT NULL FROM ledger_checks"
            " WHERE check_id = %s",
            (check_id,),
        ).fetchone(),
    )
    return None if row is None else CheckPosition(*row)


def checks_running(pool: ConnectionPool) -> list[tuple[int, int]]:
    """The full checks under way (neither finished nor stalled): (check, hands checked)."""
    rows = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT check_id, done FROM ledger_checks WHERE " + _RUNNING + " ORDER BY check_id",
            (STALLED_SECONDS,),
        ).fetchall(),
    )
    return [(int(check_id), int(done)) for check_id, done in rows]


def count_check(pool: ConnectionPool, check_id: int) -> None:
    """Records how many settled hands the full check has to check (at its start)."""
    retried(
        pool,
        lambda conn: conn.execute(
            "UPDATE ledger_checks SET hands = (SELECT count(*) FROM settlements),"
            " updated_at = now() WHERE check_id = %s AND hands IS NULL",
            (check_id,),
        ),
    )


def advance_check(
    pool: ConnectionPool,
    check_id: int,
    checked_to: uuid.UUID | None,
    last: uuid.UUID,
    checked: int,
    failing: int,
) -> int | None:
    """Records a batch of the full check: ``checked`` more hands up to ``last``, of which
    ``failing`` fail. Only from ``checked_to``, where the batch started: None when another
    job recorded that batch first (or the check finished); else the hands checked so far."""
    row = retried(
        pool,
        lambda conn: conn.execute(
            "UPDATE ledger_checks SET done = done + %s, failing = failing + %s,"
            " hands = greatest(hands, done + %s), checked_to = %s, updated_at = now()"
            " WHERE check_id = %s AND finished_at IS NULL"
            " AND checked_to IS NOT DISTINCT FROM %s RETURNING done",
            (checked, failing, checked, last, check_id, checked_to),
        ).fetchone(),
    )
    return None if row is None else int(row[0])


def finish_check(pool: ConnectionPool, check_id: int, problems: list[str]) -> None:
    """Records that the full check has finished, with what it found of the ledger as a
    whole."""
    retried(
        pool,
        lambda conn: conn.execute(
            "UPDATE ledger_checks SET problems = %s, finished_at = now(), updated_at = now()"
            " WHERE check_id = %s AND finished_at IS NULL",
            (problems, check_id),
        ),
    )


def whole(pool: ConnectionPool) -> tuple[Decimal, int]:
    """What every entry of the ledger adds to, and how many there are."""
    row = retried(
        pool,
        lambda conn: conn.execute(
            "SELECT coalesce(sum(amount), 0), count(*) FROM ledger_entries"
        ).fetchone(),
    )
    assert row is not None  # an aggregate has its row
    return row[0], row[1]


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
