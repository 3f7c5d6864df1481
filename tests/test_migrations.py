"""Migrations that change data: a database written by earlier code keeps working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta

import psycopg
from ports import free_port
from psycopg.types.json import Jsonb
from servers import fresh_database
from yoyo import read_migrations
from yoyo.migrations import MigrationList

from service.game import MatchSettings
from service.game.events import DEFAULT_CLOSE_SECONDS
from service.store import EventStore, Players, open_pool
from service.store.migrate import MIGRATIONS, backend, migrate
from service.store.players import Profile, token_hash
from service.store.tables import TableStore


def migrate_before(url: str, first_not_applied: str) -> None:
    """Applies the migrations before ``first_not_applied`` only, as earlier code did."""
    earlier = MigrationList(
        [m for m in read_migrations(str(MIGRATIONS)) if m.id < first_not_applied]
    )
    with psycopg.connect(url, autocommit=True) as conn:
        migrator = backend(url, conn)
        with migrator.lock():
            migrator.apply_migrations(migrator.to_apply(earlier))


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


def test_a_table_that_waited_for_people_for_ever_before_0014_closes_after_it(
    postgres_admin_url,
):
    """Before 0014 a table of people only that lost one between hands waited for good: its
    events (of their old schema versions) and its row had nothing due. After it, the table
    has its settings for the lobby and closes after the default wait."""
    with fresh_database(postgres_admin_url, "ddz_migrations", migrated=False) as url:
        migrate_before(url, "0014")
        table_id, settings = uuid.uuid4(), MatchSettings.build(unit="2.00").to_json()
        players = [str(uuid.uuid4()) for _ in range(4)]
        old_events = [
            (
                "table_created",
                {
                    "table_id": str(table_id),
                    "table": settings,
                    "private": False,
                    "invite": None,
                    "bots_after": None,
                    "next_hand_seconds": 5,
                },
            ),
            *(
                ("player_joined", {"seat": seat, "player": player, "bot": False})
                for seat, player in enumerate(players)
            ),
            ("hand_started", {"number": 1, "match_id": str(uuid.uuid4())}),
            ("player_left", {"seat": 3, "player": players[3], "at_hand_end": True}),
            ("hand_settled", {"number": 1, "match_id": "m", "net": ["1.00", "0", "0", "-1.00"]}),
        ]
        seats = [{"player": p, "bot": False, "leaving": False} for p in players[:3]] + [None]
        with psycopg.connect(url, autocommit=True) as conn:
            for version, (kind, payload) in enumerate(old_events, start=1):
                conn.execute(
                    "INSERT INTO events (stream_id, version, type, schema_version, payload)"
                    " VALUES (%s, %s, %s, 1, %s)",
                    (table_id, version, kind, Jsonb(payload)),
                )
            conn.execute(
                "INSERT INTO tables (table_id, version, private, seats, match_id, hands)"
                " VALUES (%s, %s, false, %s, NULL, 1)",
                (table_id, len(old_events), Jsonb(seats)),
            )
        # 0014 alone: 0016 moves the row's times to its events' (see its own test).
        migrate_before(url, "0015")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute((MIGRATIONS / "0014_tables_refill.sql").read_text())  # idempotent
            row = conn.execute(
                "SELECT settings, due, due_at - updated_at FROM tables WHERE table_id = %s",
                (table_id,),
            ).fetchone()
        assert row == (settings, "close", timedelta(seconds=DEFAULT_CLOSE_SECONDS))
        pool = open_pool(url, 1, "test")
        try:
            loaded = TableStore(EventStore(pool)).load(table_id)
            assert loaded.state.close_after == DEFAULT_CLOSE_SECONDS
            assert loaded.state.seats[3] is None and loaded.state.scoreboard[players[0]] == 1
            assert loaded.last_recorded_at is not None
            assert loaded.waiting() == (
                "close",
                loaded.last_recorded_at + timedelta(seconds=DEFAULT_CLOSE_SECONDS),
            )
        finally:
            pool.close()


def test_rows_written_before_0016_take_their_events_times(postgres_admin_url):
    """Before 0016 a match's and a table's row had the times of their transactions; after
    it, their first and last events' (what the appends now write, and ddz rebuild makes)."""
    with fresh_database(postgres_admin_url, "ddz_migrations", migrated=False) as url:
        migrate_before(url, "0016")
        match_id, table_id = uuid.uuid4(), uuid.uuid4()
        with psycopg.connect(url, autocommit=True) as conn:
            for stream in (match_id, table_id):
                for version in (1, 2):
                    conn.execute(
                        "INSERT INTO events (stream_id, version, type, schema_version, payload)"
                        " VALUES (%s, %s, 'x', 1, '{}')",
                        (stream, version),
                    )
            conn.execute(
                "INSERT INTO matches (match_id, ruleset, turn_seconds, status, phase, version, seats,"
                " created_at, updated_at) VALUES (%s, 'r', 30, 'open', 'seating', 2, '[]',"
                " now() - interval '1 hour', now() - interval '1 hour')",
                (match_id,),
            )
            conn.execute(
                "INSERT INTO tables (table_id, version, private, seats, hands, created_at, updated_at)"
                " VALUES (%s, 2, false, '[]', 0, now() - interval '1 hour', now() - interval '1 hour')",
                (table_id,),
            )
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute((MIGRATIONS / "0016_read_model_times.sql").read_text())  # idempotent
            for table, key, stream in (
                ("matches", "match_id", match_id),
                ("tables", "table_id", table_id),
            ):
                times = conn.execute(
                    "SELECT min(recorded_at), max(recorded_at) FROM events WHERE stream_id = %s",
                    (stream,),
                ).fetchone()
                row = conn.execute(
                    f"SELECT created_at, updated_at FROM {table} WHERE {key} = %s", (stream,)
                ).fetchone()
                assert row == times, table


def test_ddz_migrate_takes_any_url_libpq_takes(postgres_admin_url, tmp_path):
    """Several hosts (the first one down, as a failed primary would be) with
    ``target_session_attrs=read-write``, as a Patroni cluster is reached; and a service
    file: ``ddz migrate`` finds the server that takes writes and migrates it."""
    with fresh_database(postgres_admin_url, "ddz_migrations", migrated=False) as url:
        info = psycopg.conninfo.conninfo_to_dict(url)
        host, port = str(info.get("host") or "localhost"), str(info.get("port") or 5432)
        multi_host = psycopg.conninfo.make_conninfo(
            **{**info, "host": f"127.0.0.1,{host}", "port": f"{free_port()},{port}"},
            target_session_attrs="read-write",
        )
        services = tmp_path / "pg_service.conf"
        services.write_text(
            "[ddz]\n" + "".join(f"{key}={value}\n" for key, value in info.items()) + "\n"
        )
        for dsn, env in (
            (multi_host, {}),
            ("service=ddz", {"PGSERVICEFILE": str(services)}),
        ):
            done = subprocess.run(
                [sys.executable, "-m", "service.cli", "migrate"],
                env={**os.environ, **env, "DATABASE_URL": dsn},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
        with psycopg.connect(url) as conn:
            (applied,) = conn.execute("SELECT count(*) FROM _yoyo_migration").fetchone()
        assert applied == len(read_migrations(str(MIGRATIONS)))
