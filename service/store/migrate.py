"""Applies the SQL files of ``migrations/`` in order with yoyo, which records each one in
the database; an advisory lock makes two processes at once safe."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import psycopg
from yoyo import get_backend, read_migrations

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
_LOCK = 0x64647A6D  # "ddzm": one migrator at a time, even before yoyo's own tables exist


def yoyo_url(dsn: str) -> str:
    """yoyo's URL for a libpq DSN (it picks the driver from the scheme)."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    user = quote(str(info.get("user", "")), safe="")
    password = f":{quote(str(info['password']), safe='')}" if info.get("password") else ""
    host = str(info.get("host", ""))
    port = f":{info['port']}" if info.get("port") else ""
    auth = f"{user}{password}@" if user else ""
    query = ""
    if host.startswith("/"):
        query, host = f"?host={host}", ""
    return f"postgresql+psycopg://{auth}{host}{port}/{info.get('dbname', '')}{query}"


def migrate(dsn: str) -> list[str]:
    """Applies what is not applied yet; returns the ids applied now."""
    with psycopg.connect(dsn, autocommit=True) as lock_conn:
        lock_conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK,))
        try:
            backend = get_backend(yoyo_url(dsn))
            migrations = read_migrations(str(MIGRATIONS))
            with backend.lock():
                pending = backend.to_apply(migrations)
                backend.apply_migrations(pending)
            return [m.id for m in pending]
        finally:
            lock_conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))
