"""One reader per watched match per process, fanning each read out to every open stream
of the match in the process.

Without it each stream read the event table on its own when woken: a match watched by
1,900 streams in a process cost 1,900 reads per event, and the last stream got its event
441 ms after the commit. Now the notifier wakes one reader per match, which reads
the new events once and publishes them as a :class:`Batch`; the subscriptions take the
batches from the reader's log, and what a viewer sees of a batch is rendered once per
viewer (see :attr:`Batch.rendered`), not once per stream.

The fan-out also bounds the streams a process holds open (:class:`TooManySubscriptions`
beyond it), so that streams cannot take every connection and starve the commands."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .events import EventStore, Loaded, StoredEvent
from .notify import Notifier

log = logging.getLogger(__name__)


class TooManySubscriptions(Exception):
    """The process holds as many open subscriptions as it may."""


class ReaderFailed(Exception):
    """The match's reader could not read it: its subscriptions end (a client
    reconnects and gets a new reader)."""


@dataclass(frozen=True)
class Batch:
    """Events the reader found in one read, and the match's state after them."""

    events: list[StoredEvent]
    latest: Loaded
    #: What the consumers made of the batch, by viewer, so that the streams of one viewer
    #: share one rendering (the batch never changes, so neither does what is made of it).
    rendered: dict[Any, Any] = field(default_factory=dict, compare=False)


class MatchReader:
    """A match's reader (a thread: a greenlet under gevent) and the batches it read since
    it started. It lives while the match has subscriptions; a hand's events are a few
    hundred at most, so the log is kept whole."""

    def __init__(self, match_id: uuid.UUID, store: EventStore, notifier: Notifier):
        self.match_id = match_id
        self._store, self._notifier = store, notifier
        self.log: list[Batch] = []
        self.version = 0
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        #: Set (and replaced by a new one) when the reader has news. Not a Condition: its
        #: notify_all releases a lock per waiter, and each woken waiter takes the
        #: condition's lock again; with 5,000 streams that was a tenth of the fan-out's
        #: time. An Event wakes all its waiters at once (gevent's in one pass of its hub).
        self.news = threading.Event()
        self.primed = threading.Event()
        #: Called by the reader with each batch as it is read, and with None on any other
        #: news (the process stopping, the reader failing); see Subscription.listen.
        self.listeners: list[Callable[[Batch | None], None]] = []
        self.subscribers = 0
        self._stop = threading.Event()
        self._woken: threading.Event | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"ddz-reader-{match_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        with self._notifier.watch(self.match_id) as woken:
            self._woken = woken
            try:
                # Registered before this first read, so nothing after it is missed. A
                # subscription takes the log from where it joined and reads what came
                # before itself, after this read (see Fanout.subscribe).
                self.version = self._store.load(self.match_id).state.version
            except Exception as exc:  # noqa: BLE001 - the subscriptions report it
                self._fail(exc)
                return
            finally:
                self.primed.set()
            while not self._stop.is_set():
                woken.wait()
                woken.clear()
                if self._stop.is_set():
                    return
                try:
                    found, latest = self._store.since(self.match_id, self.version)
                except Exception as exc:  # noqa: BLE001 - the subscriptions report it
                    self._fail(exc)
                    return
                batch = Batch(found, latest) if found else None
                if batch is not None:
                    with self.lock:
                        self.log.append(batch)
                        self.version = latest.state.version
                # Also without news: a wake-up may be the process stopping, which the
                # streams see and end on.
                self._announce(batch)

    def _fail(self, exc: BaseException) -> None:
        # The type only: a message may hold what a log must not show.
        log.warning("the reader of a match failed (%s)", type(exc).__name__)
        with self.lock:
            self.error = exc
        self._announce(None)

    def _announce(self, batch: Batch | None) -> None:
        with self.lock:
            news, self.news = self.news, threading.Event()
            listeners = list(self.listeners)
        news.set()
        for listener in listeners:
            try:
                listener(batch)
            except Exception as exc:  # noqa: BLE001 - one stream's failure is its own
                log.warning("a stream's listener failed (%s)", type(exc).__name__)

    def stop(self) -> None:
        self._stop.set()
        if self._woken is not None:
            self._woken.set()


class Subscription:
    """A stream's place in its match's reader."""

    def __init__(self, fanout: Fanout, reader: MatchReader, index: int):
        self._fanout, self._reader, self._index = fanout, reader, index
        self._closed = False
        self._listener: Callable[[Batch | None], None] | None = None

    def next(self, timeout: float) -> list[Batch]:
        """The batches published since the last call, waiting up to ``timeout`` seconds
        for one; none when the wait ends without news (raises :class:`ReaderFailed`)."""
        reader = self._reader
        with reader.lock:
            news = reader.news
            idle = self._index == len(reader.log) and reader.error is None
        if idle:
            news.wait(timeout)
        with reader.lock:
            if reader.error is not None:
                raise ReaderFailed("the match could not be read") from reader.error
            batches = reader.log[self._index :]
            self._index = len(reader.log)
        return batches

    def listen(self, listener: Callable[[Batch | None], None]) -> list[Batch]:
        """From now on the reader hands ``listener`` each batch as it reads it (and None
        on other news), in the reader's thread: it must not block. Returns the batches
        published since the last :meth:`next`, which the listener will not get. Ends
        with :meth:`close`."""
        reader = self._reader
        with reader.lock:
            reader.listeners.append(listener)
            self._listener = listener
            batches = reader.log[self._index :]
            self._index = len(reader.log)
        return batches

    @property
    def failed(self) -> bool:
        return self._reader.error is not None

    def close(self) -> None:
        """Leaves the reader (idempotent: a response closes it once it ends, whether or not
        its stream started)."""
        if not self._closed:
            self._closed = True
            if self._listener is not None:
                with self._reader.lock:
                    self._reader.listeners.remove(self._listener)
            self._fanout._leave(self._reader)


class Slot:
    """A stream's place under the process's bound (see :meth:`Fanout.admit`)."""

    def __init__(self, fanout: Fanout):
        self._fanout: Fanout | None = fanout

    def close(self) -> None:
        """Idempotent, as :meth:`Subscription.close`."""
        fanout, self._fanout = self._fanout, None
        if fanout is not None:
            fanout._release()


class Fanout:
    """The process's readers, one per watched match, and its bound on subscriptions."""

    def __init__(self, store: EventStore, notifier: Notifier, limit: int):
        self._store, self._notifier, self.limit = store, notifier, limit
        self._readers: dict[uuid.UUID, MatchReader] = {}
        self._lock = threading.Lock()
        self.open = 0

    def subscribe(self, match_id: uuid.UUID) -> Subscription:
        """A subscription to the match's events from now on (raises
        :class:`TooManySubscriptions` at the bound). The caller reads the match after
        this returns: the reader has then read it already, so whatever the caller's read
        did not see comes in the subscription's batches. Close it when done."""
        with self._lock:
            if self.open >= self.limit:
                raise TooManySubscriptions(f"this process holds {self.open} open streams")
            self.open += 1
            reader = self._readers.get(match_id)
            if reader is None or reader.error is not None:
                reader = self._readers[match_id] = MatchReader(
                    match_id, self._store, self._notifier
                )
            reader.subscribers += 1
        reader.primed.wait()
        with reader.lock:
            return Subscription(self, reader, len(reader.log))

    def admit(self) -> Slot:
        """A place under the bound for a stream that has no match to follow (the player's
        own stream): raises :class:`TooManySubscriptions` at the bound. Close it when done."""
        with self._lock:
            if self.open >= self.limit:
                raise TooManySubscriptions(f"this process holds {self.open} open streams")
            self.open += 1
        return Slot(self)

    def _release(self) -> None:
        with self._lock:
            self.open -= 1

    def _leave(self, reader: MatchReader) -> None:
        with self._lock:
            self.open -= 1
            reader.subscribers -= 1
            if reader.subscribers == 0:
                if self._readers.get(reader.match_id) is reader:
                    del self._readers[reader.match_id]
                reader.stop()

    def watched(self) -> int:
        """How many matches have a reader."""
        with self._lock:
            return len(self._readers)
