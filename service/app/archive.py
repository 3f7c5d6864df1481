"""The archive of finished hands (``ddz archive``, docs/operations.md): each hand settled
before a date exported as one line of a JSON-lines file (``ddz-archive/1``): its hand record
(``ddz-hand/1``, docs/hand-record.md) and its ledger entries. ``ddz verify`` checks such a
file on its own, as it checks a record, and the ledger check besides: each movement adds
to zero, the whole file too, and each hand's entries equal its settlement recomputed from
the record. The database keeps every event and entry (they refuse deletes): the archive is
a copy to keep apart, readable without the service."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from psycopg_pool import ConnectionPool

from ..game.record import Discrepancy, NotARecord, export, verify
from ..store import EventStore, ledger
from .audit import compare

FORMAT = "ddz-archive/1"
#: Hands read at a time.
BATCH = 200


def export_hands(
    pool: ConnectionPool,
    store: EventStore,
    before: datetime,
    out: IO[str],
    progress: Callable[[int], None] | None = None,
) -> int:
    """Writes a line for each hand settled before ``before``, in the order of their ids;
    how many."""
    written = 0
    after = None
    while True:
        settled = ledger.settled_before(pool, before, after, BATCH)
        if not settled:
            return written
        entries = ledger.entries_of(pool, [m for m, _ in settled])
        for match_id, settled_at in settled:
            line = {
                "format": FORMAT,
                "match_id": str(match_id),
                "settled_at": settled_at.isoformat(),
                "record": export(e.event for e in store.read(match_id)),
                "ledger": [
                    {
                        "movement": n,
                        "account": a,
                        "seat": seat,
                        "kind": k,
                        "amount": f"{amount:.2f}",
                    }
                    for n, a, seat, k, amount in entries[match_id]
                ],
            }
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
            written += 1
        after = settled[-1][0]
        if progress is not None:
            progress(written)


def is_archive(path: Path) -> bool:
    """Whether the file's first line is an archived hand (else it may be a hand record)."""
    with open(path, "rb") as f:
        first = f.readline()
    try:
        line = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(line, dict) and line.get("format") == FORMAT


def verify_archive(path: Path) -> tuple[list[str], str]:
    """The problems of an archive (none: every hand verifies, its ledger entries balance
    and equal its recomputed settlement, and the whole adds to zero), and a line saying
    how many hands and entries it holds and what they add to."""
    problems: list[str] = []
    hands = entries = 0
    total = Decimal(0)
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, start=1):
            hands += 1
            try:
                line = json.loads(text)
                found = _check(line)
                amounts = [Decimal(e["amount"]) for e in line["ledger"]]
            except (ValueError, KeyError, TypeError, ArithmeticError, NotARecord) as exc:
                problems.append(f"line {number}: not an archived hand: {exc!r}")
                continue
            entries += len(amounts)
            total += sum(amounts, Decimal(0))
            problems += [f"line {number}: {problem}" for problem in found]
    if total != 0:
        problems.append(f"the ledger of the archive adds to {total:.2f}, not 0.00")
    return problems, f"{hands} hands, {entries} ledger entries adding to {total:.2f}"


def _check(line: dict[str, Any]) -> list[str]:
    match_id = line["match_id"]
    try:
        state = verify(line["record"])
    except Discrepancy as exc:
        return [f"match {match_id}: its record does not verify: {exc}"]
    movements: dict[int, Decimal] = {}
    booked: dict[Any, Decimal] = {}
    for entry in line["ledger"]:
        amount = Decimal(entry["amount"])
        movements[entry["movement"]] = movements.get(entry["movement"], Decimal(0)) + amount
        key = "house" if entry["account"] == ledger.HOUSE else entry["seat"]
        booked[key] = booked.get(key, Decimal(0)) + amount
    problems = [
        f"match {match_id} movement {n} adds to {a:.2f}" for n, a in movements.items() if a != 0
    ]
    return problems + compare(match_id, state, booked)
