"""One reader of every event per process, handing each player's stream open in the process
the items of its player (what :mod:`service.store.fanout` does for the match streams).

Without it each player's stream read the feed on its own when woken, four queries a
wake-up (its streams to watch, the horizon, its events, whether any were held back): with
1,000 streams open on one process "your turn" reached the player 150-200 ms (p50) after its
event was recorded, 35-45 ms with it (the tail is the horizon's: docs/scaling.md). Now
one reader, woken by every notification, reads what was appended
since its last read once, below the horizon (:mod:`service.store.feed`), renders each
event once per player concerned who has a stream here, and hands the items to that
player's streams.

A stream joins the reader where it is (:attr:`PlayerSubscription.start`, a horizon): the
reader hands it every item from there on, and the stream reads what comes before (from its
``Last-Event-ID``) itself, up to that horizon. So the order, the gaps (none) and the
resumption are the per-player read's: the items and their ids are the same.

The reader also keeps the last :data:`KEPT_EVENTS` events it read, by player, so that a
stream resuming from a ``Last-Event-ID`` in that stretch takes what it missed from
there instead of reading the feed itself (:meth:`PlayerSubscription.kept`). When an API
process stops, its streams all reconnect to the others at once, each with a cursor a few
seconds or minutes old: read from the database, each such read scanned every event of
its stretch, and together they kept PostgreSQL busy for the ten seconds that the
restart's commands waited (docs/scaling.md, "A restart's seconds, measured again")."""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict, deque
from typing import Any

from ..game import State
from ..game.events import Settled
from ..store import Notifier, ReaderFailed
from ..store.feed import FeedEvent
from .feed import Cursor, PlayerFeed

log = logging.getLogger(__name__)

#: How long the reader waits before reading again when committed events are held back
#: behind an older transaction still running: shorter than a long poll's wait
#: (service.app.feed.HELD_SECONDS), since this is one reader for the whole process.
HELD_SECONDS = 0.005
#: Events the reader keeps after handing them out (each read's, the oldest dropped first):
#: about a minute of 1,750 players' play, whose streams resume from their last item.
KEPT_EVENTS = 10_000


class PlayerSubscription:
    """A player's stream's place in the process's reader."""

    def __init__(self, fanout: FeedFanout, reader: FeedReader, player: str):
        self._fanout, self._reader, self.player = fanout, reader, player
        #: The reader hands over the items after this (None: the reader failed first).
        self.start: Cursor | None = reader.position
        self._pending: list[dict[str, Any]] = []
        self._news = threading.Event()
        self._closed = False

    def next(self, timeout: float) -> list[dict[str, Any]]:
        """The items handed over since the last call, in order, waiting up to ``timeout``
        seconds for some (none when the wait ends without; raises :class:`ReaderFailed`
        when the reader could not read: the client reconnects and gets a new one)."""
        self._news.wait(timeout)
        reader = self._reader
        with reader.lock:
            self._news.clear()
            if reader.error is not None:
                raise ReaderFailed("the feed could not be read") from reader.error
            items, self._pending = self._pending, []
        return items

    def kept(self, after: Cursor) -> list[FeedEvent] | None:
        """The player's events from ``after``'s own up to :attr:`start`, as the reader
        read them, if it still keeps everything from there (else None: the stream reads
        them itself)."""
        reader, start = self._reader, self.start
        assert start is not None
        since = (after.xid, after.position)
        with reader.lock:
            origin = reader.kept_from
            if origin is None or since < (origin.xid, origin.position):
                return None
            found = []
            for fe in reversed(reader.kept_by_player.get(self.player, ())):
                if (fe.xid, fe.stored.position) < since:
                    break
                if (fe.xid, fe.stored.position) < (start.xid, start.position):
                    found.append(fe)
        found.reverse()
        return found

    def wake(self) -> None:
        """Ends the stream's wait now, with or without items (its token ended)."""
        self._news.set()

    def _hand(self, items: list[dict[str, Any]]) -> None:
        """Called by the reader, holding its lock."""
        self._pending += items
        self._news.set()

    @property
    def failed(self) -> bool:
        return self._reader.error is not None

    def close(self) -> None:
        """Leaves the reader (idempotent)."""
        if not self._closed:
            self._closed = True
            self._fanout._leave(self._reader, self)


class FeedReader:
    """The process's reader of every event (a thread: a greenlet under gevent). It lives
    while a player's stream is open in the process."""

    def __init__(self, feed: PlayerFeed, notifier: Notifier):
        self._feed, self._notifier = feed, notifier
        self.lock = threading.Lock()
        #: Everything before it has been handed to the subscriptions.
        self.position: Cursor | None = None
        self.error: BaseException | None = None
        #: Reads of the feed so far.
        self.reads = 0
        self.subscribers = 0
        self.primed = threading.Event()
        self._subscriptions: dict[str, set[PlayerSubscription]] = defaultdict(set)
        #: Every event from here up to :attr:`position` is kept (None: nothing read yet).
        self.kept_from: Cursor | None = None
        #: The events kept, of each player they concern, in the feed's order.
        self.kept_by_player: dict[str, deque[FeedEvent]] = {}
        #: Each read's events kept (how many, and how many of each player), the oldest
        #: first: what goes when the events kept are more than :data:`KEPT_EVENTS`.
        self._reads_kept: deque[tuple[Cursor, int, dict[str, int]]] = deque()
        self._events_kept = 0
        #: The matches' states, as far as the reader rendered them (a match no stream
        #: here follows is not kept: its state is replayed if one comes to follow it).
        self._states: dict[uuid.UUID, State] = {}
        self._stop = threading.Event()
        self._woken: threading.Event | None = None
        self._thread = threading.Thread(target=self._run, name="ddz-feed-reader", daemon=True)
        self._thread.start()

    def join(self, fanout: FeedFanout, player: str) -> PlayerSubscription:
        with self.lock:
            subscription = PlayerSubscription(fanout, self, player)
            self._subscriptions[player].add(subscription)
            return subscription

    def _run(self) -> None:
        with self._notifier.watch_every() as woken:
            self._woken = woken
            try:
                # Watching before this: whatever commits from here on wakes the reader.
                start = self._feed.now()
                with self.lock:
                    self.position = self.kept_from = start
            except Exception as exc:  # noqa: BLE001 - the subscriptions report it
                self._fail(exc)
                return
            finally:
                self.primed.set()
            held = False
            while not self._stop.is_set():
                woken.wait(HELD_SECONDS if held else None)
                woken.clear()
                if self._stop.is_set():
                    return
                try:
                    held = self._read()
                except Exception as exc:  # noqa: BLE001 - the subscriptions report it
                    self._fail(exc)
                    return
                if self._notifier.draining:
                    self._wake_all()

    def _read(self) -> bool:
        """Reads what was appended since the last read and hands it out; whether events
        are held back behind an older transaction still running."""
        assert self.position is not None
        found, held, horizon = self._feed.feed.read_all(self.position.xid, self.position.position)
        self.reads += 1
        # Under the lock from the rendering to the new position: a stream joining meanwhile
        # must either get these items or read them itself.
        with self.lock:
            handed: dict[PlayerSubscription, list[dict[str, Any]]] = defaultdict(list)
            for fe, players in found:
                concerned = [p for p in players if self._subscriptions.get(p)]
                if concerned:
                    step = self._feed.step_at(fe, self._states)
                    for player in concerned:
                        items = self._feed.items_of(player, fe, step)
                        if items:
                            for subscription in self._subscriptions[player]:
                                handed[subscription] += items
                if isinstance(fe.stored.event, Settled):
                    self._states.pop(fe.stream_id, None)
            self.position = max(self.position, Cursor(horizon, 0, 0))
            self._keep(found, self.position)
            for subscription, items in handed.items():
                subscription._hand(items)
        return held

    def _keep(self, found: list[tuple[FeedEvent, frozenset[str]]], until: Cursor) -> None:
        """Keeps a read's events (under the lock), and lets the oldest go beyond
        :data:`KEPT_EVENTS`."""
        if found:
            counts: dict[str, int] = defaultdict(int)
            for fe, players in found:
                for player in players:
                    self.kept_by_player.setdefault(player, deque()).append(fe)
                    counts[player] += 1
            self._reads_kept.append((until, len(found), counts))
            self._events_kept += len(found)
        while self._events_kept > KEPT_EVENTS:
            ended, count, counts = self._reads_kept.popleft()
            for player, n in counts.items():
                mine = self.kept_by_player[player]
                for _ in range(n):
                    mine.popleft()
                if not mine:
                    del self.kept_by_player[player]
            self._events_kept -= count
            self.kept_from = ended

    def _fail(self, exc: BaseException) -> None:
        # The type only: a message may hold what a log must not show.
        log.warning("the reader of the players' feed failed (%s)", type(exc).__name__)
        with self.lock:
            self.error = exc
        self._wake_all()

    def _wake_all(self) -> None:
        with self.lock:
            for subscriptions in self._subscriptions.values():
                for subscription in subscriptions:
                    subscription._news.set()

    def leave(self, subscription: PlayerSubscription) -> None:
        with self.lock:
            mine = self._subscriptions.get(subscription.player)
            if mine is not None:
                mine.discard(subscription)
                if not mine:
                    del self._subscriptions[subscription.player]

    def stop(self) -> None:
        self._stop.set()
        if self._woken is not None:
            self._woken.set()


class FeedFanout:
    """The process's reader of the feed, started by the first player's stream and stopped
    when the last one closes."""

    def __init__(self, feed: PlayerFeed, notifier: Notifier):
        self._feed, self._notifier = feed, notifier
        self._lock = threading.Lock()
        self.reader: FeedReader | None = None

    def subscribe(self, player: str) -> PlayerSubscription:
        """The player's items from :attr:`PlayerSubscription.start` on. Close it when done."""
        with self._lock:
            reader = self.reader
            if reader is None or reader.error is not None:
                reader = self.reader = FeedReader(self._feed, self._notifier)
            reader.subscribers += 1
        reader.primed.wait()
        return reader.join(self, player)

    def _leave(self, reader: FeedReader, subscription: PlayerSubscription) -> None:
        reader.leave(subscription)
        with self._lock:
            reader.subscribers -= 1
            if reader.subscribers == 0:
                if self.reader is reader:
                    self.reader = None
                reader.stop()
