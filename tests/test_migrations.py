"""Migrations that change data: a database written by earlier code keeps working."""

from __future__ import annotations

import json
import uuid

import psycopg
from servers import fresh_database
from yoyo import get_backend, read_migrations
from yoyo.migrations import MigrationList

from service.store import Players, open_pool
from service.store.migrate import MIGRATIONS, migrate, yoyo_url
from service.store.players import Profile, token_hash


def migrate_before(url: str, first_not_applied: str) -> None:
    """Applies the migrations before ``first_not_applied`` only, as earlier code did."""
    backend = get_backend(yoyo_url(url))
    earlier = MigrationList(
        [m for m in read_migrations(str(MIGRATIONS)) if m.id < first_not_applied]
    )
    with backend.lock():
        backend.apply_migrations(backend.to_apply(earlier))


def test_idempotency_keys_written_before_0003_keep_their_versions(postgres_admin_url):
    with fresh_database(postgres_admin_url, "ddz_migrations", migrated=False) as url:
        migrate_before(url, "0003")
        player, match = uuid.uuid4(), uuid.uuid4()
        # A command's first response as 0001 stored it: two events, versions 7 and 8.
        body = {
            "version": 8,
            "events": [{"version": 7, "type": "played"}, {"version": 8, "type": "hand_ended"}],
            "view": {},
        }
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO players (player_id, name, token_hash) VALUES (%s, 'old', %s)",
                (player, b"h"),
            )
            conn.execute(
                "INSERT INTO idempotency_keys (player_id, key, match_id, request_hash, status, body)"
                " VALUES (%s, 'k1', %s, %s, 200, %s)",
                (player, match, b"digest", json.dumps(body)),
            )
        assert migrate(url)[0] == "0003_idempotency_by_versions"
        assert migrate(url) == []
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT request_hash, first_version, last_version FROM idempotency_keys WHERE key = 'k1'"
            ).fetchone()
        assert (bytes(row[0]), row[1], row[2]) == (b"digest", 7, 8)


def test_a_token_made_before_0005_still_works_and_0005_can_run_again(postgres_admin_url):
    with fresh_database(postgres_admin_url, "ddz_migrations", migrated=False) as url:
        migrate_before(url, "0005")
        player, token = uuid.uuid4(), "an-old-token"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO players (player_id, name, token_hash) VALUES (%s, 'old', %s)",
                (player, token_hash(token)),
            )
        assert migrate(url)[0] == "0005_tokens"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute((MIGRATIONS / "0005_tokens.sql").read_text())  # idempotent
        pool = open_pool(url, 1, "test")
        try:
            players = Players(pool)
            found = players.by_token(token)
            assert found.player_id == player and found.last4 is None and not found.expired()
            assert [t.token_id for t in players.tokens(player)] == [found.token_id]
        finally:
            pool.close()


def test_a_player_made_before_0009_is_a_person_and_0009_can_run_again(postgres_admin_url):
    with fresh_database(postgres_admin_url, "ddz_migrations", migrated=False) as url:
        migrate_before(url, "0009")
        player = uuid.uuid4()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO players (player_id, name) VALUES (%s, 'old')", (player,))
        assert migrate(url)[0] == "0009_bot_accounts"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute((MIGRATIONS / "0009_bot_accounts.sql").read_text())  # idempotent
        pool = open_pool(url, 1, "test")
        try:
            players = Players(pool)
            assert players.profiles([str(player)]) == {str(player): Profile("old", False)}
            made, _ = players.create("engine", bot_account=True)
            assert [p.player_id for p in players.registered(True, 10, None)] == [made]
        finally:
            pool.close()
