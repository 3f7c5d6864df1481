"""What callers hold open: event streams and long polls (requests that ``wait``), each an
:class:`OpenStream` from when it is admitted until it ends. Two things are kept of each.

**Its token.** A stream or long poll ends as soon as the token that opened it is revoked
(a player's token; an operator's, with every one of them when the operator is revoked or
removed) or expires, and sends nothing after that: its writer asks
:meth:`OpenStream.valid` before each write, which costs a flag and a clock. Every deletion
of a token is notified by PostgreSQL (a trigger: migrations/0020) to every API process's
listener, which calls :meth:`OpenStreams.revoked` before it wakes any reader for what was
appended after it: a listener gets notifications in the order their transactions
committed, so an event committed after the revocation finds the stream ended already.
After the listener reconnects (it may have missed some), the tokens of the open streams
are looked up again, in one query.

**Its places under the caller's bounds**, per token, per player (or operator) and per
client address, across every API process. Each bound is a Redis sorted set of leases, one
per open stream, scored by when the lease ends: a process takes a place in each of the
caller's sets or in none (one script), renews its leases every :data:`RENEW_SECONDS` and
removes them when its streams end. A process that dies leaves leases that lapse within
:data:`LEASE_SECONDS`: no place stays taken by a stream that is gone for longer than that.
While Redis does not answer, each process keeps the same bounds on what it holds itself
(one warning; Redis is tried again after a while), so that streams still open; what a
process admits then is not in Redis until it ends."""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import redis

from ..app.redis_client import connect
from ..config import Config

log = logging.getLogger(__name__)

#: How long a lease lasts unless renewed: what a dead process's streams keep of their
#: callers' places at most.
LEASE_SECONDS = 30.0
#: How often a process renews the leases of its open streams.
RENEW_SECONDS = LEASE_SECONDS / 3
#: How long a Redis call may take before the process bounds its streams by itself.
STORAGE_TIMEOUT = 1.0
#: After Redis failed, how long the process counts by itself before it asks Redis again.
RETRY_REDIS_SECONDS = 5.0
KEY_PREFIX = "ddz:open"
#: Takes a place in every set of KEYS or in none: drops the lapsed leases, refuses at the
#: first set at its bound (answering its position, from 1), else adds the lease to each.
#: ARGV: now, when the lease ends, the lease (its member), the sets' lifetime in seconds,
#: then each set's bound.
TAKE_SCRIPT = """
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1])
  if redis.call('ZCARD', key) >= tonumber(ARGV[4 + i]) then return i end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, ARGV[2], ARGV[3])
  redis.call('EXPIRE', key, ARGV[4])
end
return 0
"""


@dataclass(frozen=True)
class Bound:
    """One bound on a caller: what it counts (``per``: token, player, address), whose
    (``key``), and how many open streams it allows."""

    per: str
    key: str
    limit: int


class TooManyOpen(Exception):
    """The caller holds as many open streams as ``bound`` allows."""

    def __init__(self, bound: Bound):
        super().__init__(f"{bound.limit} open streams per {bound.per}")
        self.bound = bound


class OpenStream:
    """One open stream or long poll: its token (watched), its leases. Close it when the
    stream ends (idempotent)."""

    def __init__(
        self,
        streams: OpenStreams,
        credential: bytes | None,
        expires_at: float | None,
        lease: str,
        keys: list[str],
    ):
        self._streams, self.credential, self.expires_at = streams, credential, expires_at
        self.lease, self.keys = lease, keys
        self.revoked = False
        self._wakes: list[Callable[[], None]] = []
        self._closed = False

    def valid(self) -> bool:
        """The token that opened it is neither revoked nor expired: it may still send."""
        return not self.revoked and (self.expires_at is None or time.time() < self.expires_at)

    @property
    def expired(self) -> bool:
        return not self.revoked and not self.valid()

    def wait(self, seconds: float) -> float:
        """How long a wait of ``seconds`` may last: no later than the token's expiry."""
        if self.expires_at is None:
            return seconds
        return max(0.0, min(seconds, self.expires_at - time.time()))

    def on_revoked(self, wake: Callable[[], None]) -> None:
        """``wake`` is called (from the listener's thread: it must not block) when the
        token is revoked; at once if it is already."""
        self._wakes.append(wake)
        if self.revoked:
            wake()

    def _revoke(self) -> None:
        self.revoked = True
        for wake in list(self._wakes):
            wake()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._streams._close(self)


class OpenStreams:
    """The process's open streams, by token, and their leases in Redis (see the module's
    text). ``issued`` answers which of some token hashes are still issued (after the
    listener reconnects)."""

    def __init__(self, config: Config, issued: Callable[[list[bytes]], set[bytes]]):
        self.redis = connect(config, STORAGE_TIMEOUT)
        self._take = self.redis.register_script(TAKE_SCRIPT)
        self._issued = issued
        #: Unique across processes: a lease is ``<process>:<n>``.
        self._process = uuid.uuid4().hex[:12]
        self._next = 0
        self._lock = threading.Lock()
        self._by_credential: dict[bytes, set[OpenStream]] = {}
        #: Each set this process holds leases in, and those leases.
        self._held: dict[str, set[str]] = {}
        self._redis_back_at = 0.0
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, name="ddz-open-streams", daemon=True)
        self._renewer.start()

    def open(
        self, credential: bytes | None, expires_at: dt.datetime | None, bounds: Iterable[Bound]
    ) -> OpenStream:
        """A new open stream of the token whose hash is ``credential`` (None: one that is
        never revoked), until ``expires_at``, under ``bounds``; raises
        :class:`TooManyOpen` at the first bound reached."""
        bounds = [b for b in bounds if b.limit > 0]
        keys = [f"{KEY_PREFIX}:{b.per}:{b.key}" for b in bounds]
        with self._lock:
            self._next += 1
            lease = f"{self._process}:{self._next}"
        # Counted in this process alone while Redis does not answer.
        alone = bool(keys) and not self._took_in_redis(bounds, keys, lease)
        stream = OpenStream(
            self, credential, None if expires_at is None else expires_at.timestamp(), lease, keys
        )
        with self._lock:
            for bound, key in zip(bounds, keys):
                if alone and len(self._held.get(key, ())) >= bound.limit:
                    raise TooManyOpen(bound)
            for key in keys:
                self._held.setdefault(key, set()).add(lease)
            if credential is not None:
                self._by_credential.setdefault(credential, set()).add(stream)
        return stream

    def _took_in_redis(self, bounds: list[Bound], keys: list[str], lease: str) -> bool:
        """Takes the places in Redis (raises :class:`TooManyOpen` when one is refused);
        False when Redis does not answer."""
        now = time.time()
        if now < self._redis_back_at:
            return False
        args: list[str | float] = [now, now + LEASE_SECONDS, lease, math.ceil(LEASE_SECONDS)]
        try:
            refused = self._take(keys=keys, args=args + [b.limit for b in bounds])
        except redis.RedisError as exc:
            log.warning(
                "open streams' storage unreachable (%s): bounding them in this process for %.0f s",
                type(exc).__name__,
                RETRY_REDIS_SECONDS,
            )
            self._redis_back_at = now + RETRY_REDIS_SECONDS
            return False
        if refused:
            raise TooManyOpen(bounds[int(refused) - 1])
        return True

    def _close(self, stream: OpenStream) -> None:
        with self._lock:
            for key in stream.keys:
                held = self._held.get(key)
                if held is not None:
                    held.discard(stream.lease)
                    if not held:
                        del self._held[key]
            if stream.credential is not None:
                mine = self._by_credential.get(stream.credential, set())
                mine.discard(stream)
                if not mine:
                    self._by_credential.pop(stream.credential, None)
        if stream.keys and time.time() >= self._redis_back_at:
            try:
                with self.redis.pipeline(transaction=False) as pipe:
                    for key in stream.keys:
                        pipe.zrem(key, stream.lease)
                    pipe.execute()
            except redis.RedisError:
                pass  # the lease lapses by itself

    def revoked(self, digest_hex: str | None) -> None:
        """The listener's news: a token was deleted (its hash, hex), or, with None, any may
        have been (it reconnected). The streams it opened end now."""
        if digest_hex is None:
            ended = self._not_issued()
        else:
            with self._lock:
                ended = self._by_credential.pop(bytes.fromhex(digest_hex), set())
        for stream in ended:
            stream._revoke()

    def _not_issued(self) -> set[OpenStream]:
        """The open streams whose token is no longer issued, taken out."""
        with self._lock:
            held = list(self._by_credential)
        if not held:
            return set()
        try:
            issued = self._issued(held)
        except Exception as exc:  # noqa: BLE001 - the listener must go on
            log.warning("could not look the open streams' tokens up (%s)", type(exc).__name__)
            return set()
        with self._lock:
            return {
                stream
                for digest in set(held) - issued
                for stream in self._by_credential.pop(digest, set())
            }

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            with self._lock:
                held = {key: list(leases) for key, leases in self._held.items()}
            if not held or time.time() < self._redis_back_at:
                continue
            ends = time.time() + LEASE_SECONDS
            try:
                with self.redis.pipeline(transaction=False) as pipe:
                    for key, leases in held.items():
                        # Only leases still there: one removed meanwhile stays removed.
                        pipe.zadd(key, dict.fromkeys(leases, ends), xx=True)
                        pipe.expire(key, math.ceil(LEASE_SECONDS))
                    pipe.execute()
            except redis.RedisError as exc:
                log.warning("could not renew the open streams' leases (%s)", type(exc).__name__)

    def close(self) -> None:
        self._stop.set()
        self._renewer.join(timeout=3)
        self.redis.close()
