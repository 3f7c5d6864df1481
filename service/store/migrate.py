"""Applies the SQL files of ``migrations/`` in order with yoyo, which records each one in
the database; an advisory lock makes two processes at once safe.

yoyo is handed connections that libpq made, never a URL to parse: its URLs take one
host and port, where ``DATABASE_URL`` may be any libpq connection string (several hosts
with ``target_session_attrs=read-write``, as a Patroni cluster is reached; a service
file; ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from yoyo import read_migrations
from yoyo.backends.core.postgresql import PostgresqlPsycopgBackend
from yoyo.connections import DatabaseURI
from yoyo.migrations import default_migration_table

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
_LOCK = 0x64647A6D  # "ddzm": one migrator at a time, even before yoyo's own tables exist


class _Connected(PostgresqlPsycopgBackend):  # type: ignore[misc]  # yoyo is untyped
    """yoyo's psycopg backend on a connection it is given; its copies (yoyo applies each
    migration on a connection of its own) connect with libpq to the same DSN."""

    def __init__(self, dsn: str, connection: psycopg.Connection[Any]):
        self._dsn, self._given = dsn, connection
        info = connection.info
        # yoyo reads the database's name from its URI, and keys a cache by it.
        uri = DatabaseURI(
            "postgresql+psycopg", info.user, None, info.host, info.port, info.dbname, {}
        )
        super().__init__(uri, default_migration_table)

    def connect(self, dburi: object) -> psycopg.Connection[Any]:
        return self._given

    def copy(self) -> _Connected:
        return _Connected(self._dsn, psycopg.connect(self._dsn, autocommit=True))


def backend(dsn: str, connection: psycopg.Connection[Any]) -> Any:
    """yoyo's backend on ``connection`` (autocommit: yoyo begins and commits itself), a
    connection to ``dsn``."""
    connected = _Connected(dsn, connection)
    connected.init_database()
    return connected


def migrate(dsn: str) -> list[str]:
    """Applies what is not applied yet; returns the ids applied now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK,))
        try:
            migrator = backend(dsn, conn)
            migrations = read_migrations(str(MIGRATIONS))
            with migrator.lock():
                pending = migrator.to_apply(migrations)
                migrator.apply_migrations(pending)
            return [m.id for m in pending]
        finally:
            if not conn.closed:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))
