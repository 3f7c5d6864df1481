"""What the store's tests share (test_store, test_db_faults); no tests here."""

from __future__ import annotations

import uuid

from service.app.commands import CommandRequest, Commands
from service.store import EventStore


def execute(store: EventStore, match_id: uuid.UUID, decide, **options):
    """The command path over this store (the application's, as the API and the workers run it)."""
    return Commands(store).execute(CommandRequest(match_id, decide, **options))
