"""Wakes readers waiting for new events of a match. Notifications only wake: a woken
reader reads the event table, so nothing is lost when a notification is. A notification
also carries its event when it fits, which keeps this process's cache of states current
for the command path (a hint: the append checks the version)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import ConnectionPool

from .events import NOTIFY_CHANNEL, Appended, EventStore
from .players import REVOKED_CHANNEL
from .pool import DatabaseUnavailable, retried

log = logging.getLogger(__name__)

#: How often the listener asks the ``matches`` table for the versions of the matches this
#: process watches. An append's notification follows its commit (see
#: ``EventStore.announce``), so a process that dies between the two leaves an event
#: unannounced; this finds it for the streams within a few seconds, for one indexed query
#: per process, whatever the number of matches watched.
CHECK_SECONDS = 5.0


class Notifier:
    """One LISTEN connection per process, in a daemon thread, fanning out to waiters and
    handing the events that notifications carry to ``on_event``, and revoked tokens (by
    hash; None after a reconnect, when any may have been missed) to ``on_revoked``."""

    def __init__(
        self,
        dsn: str,
        on_event: Callable[[uuid.UUID, int, str], None] | None = None,
        on_revoked: Callable[[str | None], None] | None = None,
        check_seconds: float = CHECK_SECONDS,
    ):
        self._dsn = dsn
        self._check_seconds = check_seconds
        #: The latest version announced or found of each watched match.
        self._versions: dict[uuid.UUID, int] = {}
        self._on_event = on_event
        self._on_revoked = on_revoked
        self._waiters: dict[uuid.UUID, set[threading.Event]] = {}
        #: Woken by every notification (a reader of every stream: the players' feed).
        self._every: set[threading.Event] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._draining = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddz-notifier", daemon=True)
        self._thread.start()

    @contextmanager
    def watch(self, match_id: uuid.UUID) -> Iterator[threading.Event]:
        """An event set when the match gets new events (or when the listener reconnects,
        since it may have missed some). Register before reading the table, then wait."""
        with self.watch_all([match_id]) as woken:
            yield woken

    @contextmanager
    def watch_all(self, stream_ids: Iterable[uuid.UUID]) -> Iterator[threading.Event]:
        """As :meth:`watch`, set when any of these streams (matches or tables) gets one."""
        woken = threading.Event()
        if self.draining:
            woken.set()
        watched = set(stream_ids)
        with self._lock:
            for stream_id in watched:
                self._waiters.setdefault(stream_id, set()).add(woken)
        try:
            yield woken
        finally:
            with self._lock:
                for stream_id in watched:
                    waiters = self._waiters.get(stream_id)
                    if waiters is not None:
                        waiters.discard(woken)
                        if not waiters:
                            del self._waiters[stream_id]

    @contextmanager
    def watch_every(self) -> Iterator[threading.Event]:
        """As :meth:`watch`, set when any stream gets an event (or a player is woken)."""
        woken = threading.Event()
        if self.draining:
            woken.set()
        with self._lock:
            self._every.add(woken)
        try:
            yield woken
        finally:
            with self._lock:
                self._every.discard(woken)

    @property
    def draining(self) -> bool:
        """The process is stopping: readers should send what they have and end."""
        return self._draining.is_set()

    def drain(self) -> None:
        """Wakes every waiter for good, so that open streams and long polls end now (the
        client reconnects to a process that is not stopping) rather than hold the
        process's exit back until they are cut off."""
        self._draining.set()
        self._wake(None)

    def _wake(self, match_id: uuid.UUID | None) -> None:
        with self._lock:
            if match_id is None:
                targets = [w for ws in self._waiters.values() for w in ws]
            else:
                targets = list(self._waiters.get(match_id, ()))
            targets += self._every
        for woken in targets:
            woken.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    if self._on_revoked is not None:
                        conn.execute(f"LISTEN {REVOKED_CHANNEL}")
                        self._on_revoked(None)
                    self._wake(None)
                    check_at = time.monotonic() + self._check_seconds
                    while not self._stop.is_set():
                        timeout = max(0.0, min(1.0, check_at - time.monotonic()))
                        for note in conn.notifies(timeout=timeout):
                            if note.channel == REVOKED_CHANNEL:
                                assert self._on_revoked is not None  # listened to with one only
                                self._on_revoked(note.payload)
                            else:
                                self._received(note.payload)
                        if time.monotonic() >= check_at:
                            self._check(conn)
                            check_at = time.monotonic() + self._check_seconds
            except psycopg.Error as exc:
                log.warning(
                    "event listener lost its connection (%s); reconnecting", type(exc).__name__
                )
                self._wake(None)
                time.sleep(0.5)

    def _received(self, payload: str) -> None:
        """``<match>:<version>[:<event>]``. The event, when the notification carries it,
        goes to ``on_event`` (the store's cache of states); then the match's waiters are
        woken, whatever became of the event."""
        match, _, rest = payload.partition(":")
        try:
            match_id = uuid.UUID(match)
        except ValueError:
            log.warning("ignoring a notification that names no match")
            return
        version, _, event = rest.partition(":")
        self._saw(match_id, int(version) if version.isdigit() else 0)
        if event and self._on_event is not None:
            try:
                self._on_event(match_id, int(version), event)
            except Exception as exc:  # noqa: BLE001 - only a cache misses it
                # The type only: the event may hold cards a log must not show.
                log.warning("could not read the event in a notification (%s)", type(exc).__name__)
        self._wake(match_id)

    def _saw(self, match_id: uuid.UUID, version: int) -> bool:
        """Records a watched match's version; whether it is news."""
        with self._lock:
            if match_id not in self._waiters:
                return False
            news = version > self._versions.get(match_id, -1)
            if news:
                self._versions[match_id] = version
            return news

    def _check(self, conn: psycopg.Connection) -> None:
        """Wakes the waiters of the watched matches whose version is past the latest
        announced (the first check of a match wakes its waiters once: a spare read), and
        the readers of every stream, whose read costs as little."""
        with self._lock:
            watched = list(self._waiters)
            for gone in self._versions.keys() - set(watched):
                del self._versions[gone]
        if watched:
            rows = conn.execute(
                "SELECT match_id, version FROM matches WHERE match_id = ANY(%s)", (watched,)
            ).fetchall()
            for match_id, version in rows:
                if self._saw(match_id, version):
                    self._wake(match_id)
        with self._lock:
            every = list(self._every)
        for woken in every:
            woken.set()

    def close(self, wait: bool = True) -> None:
        """Stops listening; ``wait``: until the thread has (within a second, its longest
        wait for a notification)."""
        self._stop.set()
        if wait:
            self._thread.join(timeout=3)


class Announcer:
    """Announces a process's committed appends (``EventStore.announce``) from a thread of
    its own, so that a command answers without waiting for its notification, and every
    append waiting when the thread gets to them goes in one statement: under load, one
    round trip announces many commands. An announcement lost with the process (or the
    database) is found by the listeners' check (:data:`CHECK_SECONDS`)."""

    def __init__(self, pool: ConnectionPool):
        self._pool = pool
        self._pending: list[Appended] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="ddz-announcer", daemon=True)
        self._thread.start()

    def __call__(self, appended: Appended) -> None:
        with self._lock:
            # Whoever found the list empty has woken the thread, which has not taken the
            # list yet: waking it again (a thread's wake on every command) would add nothing.
            first = not self._pending
            self._pending.append(appended)
        if first:
            self._ready.set()

    def _run(self) -> None:
        while True:
            self._ready.wait()
            with self._lock:
                self._ready.clear()
                batch, self._pending = self._pending, []
                closing = self._closing
            if batch:
                self._send(batch)
            if closing:
                return

    def _send(self, batch: list[Appended]) -> None:
        try:
            retried(self._pool, lambda conn: EventStore.announce(conn, batch))
        except (psycopg.Error, DatabaseUnavailable) as exc:
            log.warning(
                "could not announce %d appends (%s); the listeners' check will find them",
                len(batch),
                type(exc).__name__,
            )

    def close(self) -> None:
        """Sends what is waiting, then stops."""
        with self._lock:
            self._closing = True
        self._ready.set()
        self._thread.join(timeout=3)
