"""The connection pool every process uses, and the retry of work whose connection broke."""

from __future__ import annotations

import _socket
import time
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar, cast

import orjson
import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool, PoolTimeout

T = TypeVar("T")

#: Tries of work whose connection broke, each on another connection (with pauses of
#: 20, 80 and 320 ms between them).
ATTEMPTS = 4


class DatabaseUnavailable(Exception):
    """PostgreSQL did not answer: no connection came within the pool's timeout, or the
    connection broke on every try."""


def open_pool(url: str, max_size: int, name: str, timeout: float = 30.0) -> ConnectionPool:
    """A pool of autocommit connections: most writes are one statement, which needs no
    BEGIN and COMMIT round trips around it; code that writes more takes
    ``conn.transaction()`` explicitly. ``timeout`` is how long a caller waits for a
    connection. Its connections are each a :class:`StoreConnection`."""
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        open=True,
        name=name,
        connection_class=StoreConnection,
        kwargs={"autocommit": True},
        timeout=timeout,
        configure=_json_by_orjson,
    )
    # Typed as a pool of psycopg's connections, as its callers take them: only
    # kept_cursor() needs to know better, and asks.
    return cast(ConnectionPool, pool)


class StoreConnection(psycopg.Connection[TupleRow]):
    """The pool's connections: psycopg's, with one cursor kept for the statements run
    most (:func:`kept_cursor`). The cursor goes with its connection: one the pool replaces
    (broken, or too old) takes it along, and the new one makes its own."""

    _kept: psycopg.Cursor[TupleRow] | None = None

    def kept_cursor(self) -> psycopg.Cursor[TupleRow]:
        if self._kept is None:
            self._kept = self.cursor()
        return self._kept


def kept_cursor(conn: psycopg.Connection) -> psycopg.Cursor[TupleRow]:
    """A cursor of ``conn`` for the statements run most (the event store's append, read
    and announcement), whose rows the caller fetches before its next statement on it: the
    one the connection keeps when it is a pool's, else a new one. A cursor picks the dumper
    of each parameter's type and the loader of each column's type on its first statement,
    and keeps them; ``conn.execute()`` makes a new cursor, which picks them all again each
    time: for an append, making the loaders of its seven columns cost more than dumping
    its parameters, and an announcement (three arrays) spent a third of its client's
    work on it. (psycopg's preparing of a statement after its fifth run is the
    connection's, whatever the cursor.)"""
    return conn.kept_cursor() if isinstance(conn, StoreConnection) else conn.cursor()


def _json_by_orjson(conn: psycopg.Connection) -> None:
    """json and jsonb values read by orjson: an append reads back the events it wrote, and
    the standard library's parser took several times as long."""
    set_json_loads(orjson.loads, conn)


#: recv() flags of the peek (``_socket``'s plain ints: ``socket``'s are flags whose ``|``
#: runs Python code).
_PEEK = _socket.MSG_PEEK | _socket.MSG_DONTWAIT


def _has_input(conn: psycopg.Connection) -> bool:
    """Whether the connection's server said something (or hung up): a peek at its socket
    that never waits. Not ``select()``: it refuses a descriptor above 1023, which a process
    holding a thousand streams has; and not a ``socket.socket``, which gevent makes wait.
    The family, type and protocol are given, or Python would ask the kernel for the type
    and the protocol (two system calls on every checkout, besides the ``getsockname`` it
    checks the descriptor with); they only say how Python shows the socket's addresses,
    which a peek never asks for."""
    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, conn.fileno())
    try:
        probe.recv(1, _PEEK)
    except BlockingIOError:
        return False
    except OSError:
        return True  # an error to read
    finally:
        probe.detach()
    return True  # a message, or the end of the stream


class Checkout:
    """A connection from the pool that its server has not dropped, for a ``with`` block.
    An idle connection has nothing to read unless its server said something: a terminated
    backend's last error, or the end of the stream. So only a connection with input
    waiting costs the round trip of a check; the others cost one poll of their socket. A
    dead one is closed (the pool replaces it) and the next taken at once. (The pool's own
    ``check`` would spend a round trip on every connection, and waits a second or more
    after each dead one.)

    On the way out, what the pool's ``connection()`` does: psycopg's ``with conn`` (a
    transaction left open committed, or rolled back after an error), then the connection
    back to the pool; but an idle connection, the usual, skips the former, whose commit
    and rollback are no-ops then that take the connection's lock all the same. A class,
    not generator context managers nested three deep: every statement runs in one."""

    __slots__ = ("_pool", "_timeout", "_conn")

    def __init__(self, pool: ConnectionPool, timeout: float | None = None):
        self._pool = pool
        self._timeout = timeout

    def __enter__(self) -> psycopg.Connection:
        pool = self._pool
        while True:
            conn = pool.getconn(self._timeout)
            try:
                if _has_input(conn):
                    ConnectionPool.check_connection(conn)
                break
            except psycopg.Error:
                conn.close()
                pool.putconn(conn)
            except BaseException:
                # A greenlet's timeout, say, during the check's round trip.
                pool.putconn(conn)
                raise
        self._conn = conn
        return conn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        conn = self._conn
        try:
            if conn.pgconn.transaction_status != TransactionStatus.IDLE:
                conn.__exit__(exc_type, exc, traceback)
        finally:
            self._pool.putconn(conn)


def connection_lost(exc: BaseException) -> bool:
    """The connection broke (its backend was terminated, the server shut down or could not
    be reached), as opposed to a statement failing on a live connection."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    # No SQLSTATE: libpq's own "server closed the connection unexpectedly" and the like.
    return exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P"))


def retried(
    pool: ConnectionPool,
    work: Callable[[psycopg.Connection], T],
    conn: psycopg.Connection | None = None,
    timeout: float | None = None,
) -> T:
    """``work(conn)`` on the caller's connection when it has one (its transaction: the
    caller retries the whole), else on one from the pool, again on another one when the
    connection broke, up to :data:`ATTEMPTS` tries. Only for work that may run twice:
    reads, and writes that a second run leaves as the first did."""
    if conn is not None:
        return work(conn)
    for attempt in range(ATTEMPTS):
        try:
            with Checkout(pool, timeout) as c:
                return work(c)
        except PoolTimeout as exc:
            raise DatabaseUnavailable("no database connection could be had") from exc
        except psycopg.OperationalError as exc:
            if not connection_lost(exc):
                raise
            if attempt == ATTEMPTS - 1:
                raise DatabaseUnavailable("the database connection broke on every try") from exc
            pause(attempt)
    raise AssertionError("unreachable")


def ping(pool: ConnectionPool, timeout: float) -> None:
    """Raises unless the database answers within ``timeout`` seconds (for readiness)."""
    retried(pool, lambda conn: conn.execute("SELECT 1"), timeout=timeout)


def pause(attempt: int) -> None:
    """Waits a little before the next try: the pool's other connections may have been
    terminated with this one, and a backend told to end takes a moment to say so (its
    connection looks alive until then)."""
    time.sleep(0.02 * 4**attempt)
