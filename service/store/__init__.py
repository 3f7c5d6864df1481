"""PostgreSQL persistence: the event store (one stream per match), players, migrations."""

from .events import (
    STATUSES,
    Appended,
    Behind,
    ConnectionLost,
    EventStore,
    Idempotency,
    IdempotencyMismatch,
    Loaded,
    MatchNotFound,
    Outcome,
    Recent,
    StateCache,
    StoredEvent,
    StoreError,
    VersionConflict,
    request_hash,
    status,
)
from .fanout import Batch, Fanout, ReaderFailed, Slot, Subscription, TooManySubscriptions
from .migrate import migrate
from .notify import Announcer, Notifier
from .players import Players
from .pool import ATTEMPTS, DatabaseUnavailable, open_pool, pause, ping, retried

__all__ = [name for name in dir() if not name.startswith("_")]
