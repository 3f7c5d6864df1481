"""What the store's tests share (test_store, test_db_faults, and the ledger checks of
test_console and test_ledger_verdicts); no tests here."""

from __future__ import annotations

import uuid

from service.app.commands import CommandRequest, Commands
from service.store import EventStore


def execute(store: EventStore, match_id: uuid.UUID, decide, **options):
    """The command path over this store (the application's, as the API and the workers run it)."""
    return Commands(store).execute(CommandRequest(match_id, decide, **options))


def book_wrong_movement(conn, match_id: str) -> None:
    """Ten moved from seat 1 to seat 0 of the match: the movement adds to zero, the
    ledger's total too; only the recomputation of the hand finds it."""
    conn.execute(
        "INSERT INTO ledger_entries (match_id, movement, account, seat, kind, amount)"
        " SELECT match_id, max(movement) + 1, min(account) FILTER (WHERE seat = s),"
        "  s, 'stake', CASE s WHEN 0 THEN 10 ELSE -10 END"
        " FROM ledger_entries, (VALUES (0), (1)) AS seats (s)"
        " WHERE match_id = %s GROUP BY match_id, s",
        (match_id,),
    )
