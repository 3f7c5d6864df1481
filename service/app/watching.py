"""Watching a public table (docs/tables.md, "Watching"): its events and its hands' events,
each as the table's onlookers may see it — a match's event as a seat without a seat sees
it (:func:`~service.game.visible` for no seat: no hand, no bottom, no seed before the end),
a table's event without its invite code — in the feed's order (``service.store.feed``),
each some seconds behind the table when the server is told so.

An item's id is ``<xid>-<position>-0`` (:class:`~service.app.feed.Cursor`): resuming after
it misses nothing and repeats nothing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..game import visible
from ..store.feed import Feed, FeedEvent
from .feed import BATCH, Cursor

#: What a table's event says that its watchers may not see.
_PRIVATE = frozenset({"invite"})


@dataclass(frozen=True)
class Watched:
    """What a read found: the items, whether more may be held back behind a running
    transaction, where the next read starts, and when the first item held back for the
    delay is due (None: none is)."""

    items: list[dict[str, Any]]
    more: bool
    resume: Cursor
    due: datetime | None


class Watching:
    def __init__(self, feed: Feed):
        self.feed = feed

    def start(self, table_id: uuid.UUID) -> Cursor:
        """Where a watcher starts: at its latest hand (a table that dealt none: at its
        start)."""
        xid = self.feed.table_start(table_id)
        return Cursor(xid if xid is not None else self.feed.horizon(), 0, 0)

    def items(self, table_id: uuid.UUID, after: Cursor, delay: float, now: datetime) -> Watched:
        """The items after ``after`` that happened ``delay`` seconds before ``now`` or
        earlier."""
        found, held, horizon = self.feed.read_table(table_id, after.xid, after.position, BATCH)
        cutoff = now - timedelta(seconds=delay)
        items: list[dict[str, Any]] = []
        for fe in found:
            at = Cursor(fe.xid, fe.stored.position, 0)
            if not after < at:
                continue  # the cursor's own event, sent already
            if fe.stored.recorded_at > cutoff:
                # Held back, and everything after it: a watcher sees the table in order.
                due = fe.stored.recorded_at + timedelta(seconds=delay)
                return Watched(items, True, Cursor(at.xid, at.position - 1, 0), due)
            items.append(item(str(table_id), fe, at))
        if len(found) == BATCH:
            last = found[-1]
            return Watched(items, True, Cursor(last.xid, last.stored.position, 0), None)
        resume = max(after, Cursor(horizon, 0, 0))
        return Watched(items, held, resume, None)


def item(table_id: str, fe: FeedEvent, at: Cursor) -> dict[str, Any]:
    """A watcher's item of the event: a table's, or a match's (with its hand's number)."""
    event = fe.stored.event
    if fe.of_table:
        payload = {k: v for k, v in event.payload().items() if k not in _PRIVATE}
        match_id, hand_number = None, None
    else:
        payload = visible(event, None)
        del payload["type"], payload["version"]
        match_id, hand_number = str(fe.stream_id), fe.hand_number
    return {
        "id": str(at),
        "at": fe.stored.recorded_at,
        "table_id": table_id,
        "match_id": match_id,
        "hand_number": hand_number,
        "type": event.type,
        "version": fe.stored.version,
        "payload": payload,
    }
