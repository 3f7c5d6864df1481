"""The connection pool every process uses."""

from __future__ import annotations

from psycopg_pool import ConnectionPool


def open_pool(url: str, max_size: int, name: str) -> ConnectionPool:
    """A pool of autocommit connections: most writes are one statement, which needs no
    BEGIN and COMMIT round trips around it; code that writes more takes
    ``conn.transaction()`` explicitly."""
    return ConnectionPool(url, min_size=1, max_size=max_size, open=True, name=name, kwargs={"autocommit": True})
