"""The restore drill: the service plays on a PostgreSQL cluster of the test's own that
archives its WAL; a base backup is taken while a hand is played; play goes on; the target
is a point in time between two commands of a hand. With pgBackRest (encrypted,
compressed, as deploy/ configures it; .ci/run installs Debian's), the drill follows the
restore runbook of docs/operations.md, every block of it run as written after
definitions of this cluster's: beside the live cluster first (it stops at the target,
archives nothing, promoted takes writes and still archives nothing), then in place (with
``--delta``, no warning). The restored database passes the full ledger check, every match
on it verifies, its read models equal its events, and the service started on it serves
every player everything up to that point, nothing after it, and plays the interrupted
hand on to its settlement. Elsewhere, the backup is ``pg_basebackup``'s and the WAL is
archived by ``cp`` and replayed to the same point beside the live cluster, with the same
checks of the data (the test's id says which)."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import psycopg
import pytest
import redis as redis_lib
from api_support import OP, bearer
from clusters import PGBACKREST, backed_up_cluster, defined, runbook
from handplay import environment, finish_hand, next_command, play_hand, run_jobs, seated_hand
from jobs import new_player
from servers import OPERATOR_TOKEN, embedded_redis

from service.api import create_app
from service.app.audit import check_ledger
from service.app.rebuild import rebuild
from service.config import Config
from service.store import EventStore, migrate, open_pool
from workers import sweeper

# Slow: starts two PostgreSQL clusters and plays hands through real workers.
pytestmark = pytest.mark.slow

TOOL = "pgbackrest" if PGBACKREST else "pg_basebackup"


def service(database_url: str, redis_url: str):
    return create_app(
        Config(
            database_url=database_url,
            redis_url=redis_url,
            operator_token=OPERATOR_TOKEN,
            rate_limits=False,
        )
    )


def database(cluster_url: str) -> str:
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE ddz")
    return cluster_url.replace("/postgres?", "/ddz?")


def at_the_target(database_url: str, target) -> None:
    """What the database restored to ``target`` holds: nothing after it, the three hands
    settled before it (the ledger check passes), the hand under way at it; every match's
    events fold, and the read models equal the events. Read-only."""
    pool = open_pool(database_url, 2, "drill")
    try:
        store = EventStore(pool)
        with pool.connection() as conn:
            (last,) = conn.execute("SELECT max(recorded_at) FROM events").fetchone()
            matches = [r[0] for r in conn.execute("SELECT match_id FROM matches")]
        assert last <= target  # nothing after the point
        check = check_ledger(pool, store)
        assert check["ok"] and check["total"] == "0.00", check["problems"]
        assert check["matches"] == 3  # the three hands settled before the point
        assert len(matches) == 4
        for match_id in matches:  # every match's events fold; the ended ones verify
            store.load(match_id)
        checked = rebuild(pool, store, write=False)  # read models equal the events
        assert checked.ok, checked.read_models.differences + checked.ledger
    finally:
        pool.close()


def follow_the_runbook(backups, target) -> None:
    """docs/operations.md's restore runbook, each block as written: beside the live
    cluster, then in place (the service's writers stopped)."""
    steps = runbook()
    assert list(steps) == ["Definitions", "In place", "Beside the live cluster"]
    (definitions,) = steps["Definitions"]
    # The runbook's definitions name what the drill defines, and nothing else.
    assert defined(definitions) == defined(backups.definitions(target)), definitions
    beside_up, look, promote, remove = steps["Beside the live cluster"]
    beside = backups.beside
    # The live cluster's queue of the WAL it pushes: a restore empties the stanza's spool,
    # so the one beside has a spool of its own, where it fetches the WAL it replays too.
    queue = backups.home / "spool" / "archive" / "ddz"
    pushing = (queue / "out").stat().st_ino
    said = backups.follow(beside_up, target)
    assert "WARN" not in said and "ERROR" not in said, said
    assert (queue / "out").stat().st_ino == pushing and not (queue / "in").exists()
    with psycopg.connect(beside.url(), autocommit=True) as conn:
        settings = conn.execute(
            "SELECT current_setting('archive_mode'), current_setting('port'), pg_is_in_recovery()"
        ).fetchone()
        assert settings == ("off", str(beside.port), True)  # at the target, read-only
    at_the_target(beside.url("ddz"), target)
    backups.follow(look, target)  # ddz rebuild --check: exit status 0
    backups.follow(promote, target)
    with psycopg.connect(beside.url("ddz"), autocommit=True) as conn:
        conn.execute("CREATE TABLE rehearsal AS SELECT * FROM events")
        conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")
        archiver = conn.execute(
            "SELECT archived_count, failed_count FROM pg_stat_archiver"
        ).fetchone()
        assert archiver == (0, 0)  # takes writes, archives nothing
    assert backups.archived_timelines() == set()  # its new timeline is not in the stanza
    backups.follow(remove, target)
    assert not beside.data.exists()
    assert not Path(f"{beside.data}-spool").exists()

    (in_place,) = steps["In place"]
    log = backups.home / "log" / "ddz-restore.log"  # pgBackRest's, file by file
    logged = log.stat().st_size
    said = backups.follow(in_place, target)
    # Nothing warned of, and --delta at work: most files were found right and kept.
    assert "WARN" not in said and "ERROR" not in said, said
    with open(log) as restore:
        restore.seek(logged)
        assert "exists and matches backup" in restore.read()
    assert backups.writers.read_text().split() == ["stop", "start"]
    # The restored live cluster archives its new timeline into the stanza: the second,
    # since the cluster restored beside pushed nothing.
    backups.archived()
    assert backups.archived_timelines() == {2}


@pytest.mark.parametrize("tool", [TOOL])
def test_a_backup_restored_to_a_point_between_two_commands(tool):
    with backed_up_cluster() as backups, embedded_redis() as redis_url:
        url = database(backups.primary.url())
        migrate(url)
        connection = redis_lib.Redis.from_url(redis_url)
        with environment(DATABASE_URL=url, REDIS_URL=redis_url):
            app = service(url, redis_url)
            client = app.test_client()
            settled = [play_hand(client, connection, "before")]
            # The base backup, taken while another hand is played (the jobs run in this
            # thread: RQ's worker wants the main one).
            backup = threading.Thread(target=backups.backup)
            backup.start()
            settled.append(play_hand(client, connection, "during", seed=5))
            backup.join()
            settled.append(play_hand(client, connection, "after", seed=7))
            # A hand under way: the point in time falls between the player's command and
            # the bots' turns that follow it.
            me, path = seated_hand(client, "interrupted")
            rng = random.Random(3)
            for _ in range(3):
                answer = next_command(client, connection, me, path, rng)
            assert answer is not None
            version = answer["version"]
            with psycopg.connect(url) as conn:
                (target,) = conn.execute("SELECT clock_timestamp()").fetchone()
            time.sleep(0.05)
            finish_hand(client, connection, me, path, rng)  # settled after the point
            _, late_token = new_player(client, "late")
            app.extensions["ddz"].close()  # the writers stop
            backups.archived()

        if PGBACKREST:
            follow_the_runbook(backups, target)
            restored_url = url
        else:
            restored_url = backups.restore(target).url("ddz")
        connection.flushdb()  # Redis lost with the rest: the workers find the work again
        at_the_target(restored_url, target)

        with environment(DATABASE_URL=restored_url, REDIS_URL=redis_url):
            app = service(restored_url, redis_url)
            client = app.test_client()
            for match_id in settled:
                r = client.get(f"/v1/matches/{match_id}/settlement", headers=OP)
                assert r.status_code == 200, r.json
            view = client.get(path, headers=me).json
            assert view["version"] == version and view["phase"] != "ended"
            mine = client.get("/v1/me/matches", headers=me).json
            assert [m["match_id"] for m in mine["matches"]] == [path.rsplit("/", 1)[1]]
            assert client.get("/v1/me/matches", headers=bearer(late_token)).status_code == 401
            # The service goes on: the bots' turn lost with Redis is found, the hand ends
            # and is settled once.
            sweeper.sweep()
            run_jobs(connection)
            finish_hand(client, connection, me, path, rng)
            r = client.get("/v1/admin/ledger/check", headers=OP)
            assert r.json["ok"] and r.json["matches"] == 4, r.json
            app.extensions["ddz"].close()
        connection.close()
