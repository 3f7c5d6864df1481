"""The restore drill: the service plays on a PostgreSQL cluster of the test's own that
archives its WAL; a base backup is taken while a hand is played; play goes on; the backup
is restored, into a second cluster, to a point in time between two commands of a hand. The
restored database passes the full ledger check, every match on it verifies, its read
models equal its events, and the service started on it serves every player everything
up to that point, nothing after it, and plays the interrupted hand on to its settlement.

With pgBackRest (encrypted, compressed, as deploy/ configures it) where it is installed
(.ci/run installs Debian's); elsewhere with ``pg_basebackup`` and the WAL archived by
``cp``, replayed to the same point, with the same checks (the test's id says which)."""

from __future__ import annotations

import random
import threading
import time

import psycopg
import pytest
import redis as redis_lib
from api_support import OP, bearer
from clusters import PGBACKREST, backed_up_cluster
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
            app.extensions["ddz"].close()
            backups.archived()

        restored = backups.restore(target)
        restored_url = restored.url("ddz")
        connection.flushdb()  # Redis lost with the rest: the workers find the work again
        pool = open_pool(restored_url, 2, "drill")
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
