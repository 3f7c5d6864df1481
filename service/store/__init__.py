"""PostgreSQL persistence: the event store (one stream per match), players, migrations."""

from .events import (
    EventStore,
    IdempotencyMismatch,
    Loaded,
    MatchNotFound,
    Outcome,
    StoredEvent,
    StoreError,
    VersionConflict,
    request_hash,
    status,
)
from .migrate import migrate
from .notify import Notifier
from .players import Players
from .pool import ATTEMPTS, DatabaseUnavailable, open_pool, pause, retried

# Spelled out: type checkers (mypy --strict: no implicit re-export) read only a literal list.
__all__ = [
    "ATTEMPTS",
    "DatabaseUnavailable",
    "EventStore",
    "IdempotencyMismatch",
    "Loaded",
    "MatchNotFound",
    "Notifier",
    "Outcome",
    "Players",
    "StoreError",
    "StoredEvent",
    "VersionConflict",
    "migrate",
    "open_pool",
    "pause",
    "request_hash",
    "retried",
    "status",
]
