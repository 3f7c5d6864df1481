"""Two test runs on one machine at once do not touch each other's Redis data: each
claims a database of its own (``servers.claimed_redis_db``) and flushes only that one; and
``DDZ_TEST_REDIS_URL`` keeps a run on the Redis server it names, every fixture's database
claimed there."""

from __future__ import annotations

import subprocess
import textwrap
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis as redis_lib
import servers
from processes import separate_session
from servers import claimed_redis_db, embedded_redis, redis_db_url

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


SESSION = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    import redis

    def test_keeps_its_data_while_another_session_runs(redis_url, own_redis_url):
        mine = redis.Redis.from_url(redis_url)
        mine.set("key", os.environ["NAME"])
        Path(os.environ["URL_FILE"]).write_text(f"{redis_url} {own_redis_url}")
        go = os.environ.get("WAIT_FOR")
        stop_at = time.monotonic() + 60
        while go and not Path(go).exists():
            assert time.monotonic() < stop_at
            time.sleep(0.05)
        assert mine.get("key") == os.environ["NAME"].encode(), "another session flushed this one's data"
    """
)


def session(
    tmp_path: Path, name: str, redis_server: str, wait_for: Path | None = None
) -> subprocess.Popen:
    """A pytest session with the suite's fixtures, told to use ``redis_server``."""
    env = dict(DDZ_TEST_REDIS_URL=redis_server, NAME=name, URL_FILE=str(tmp_path / f"{name}.url"))
    if wait_for is not None:
        env["WAIT_FOR"] = str(wait_for)
    return separate_session(tmp_path / "test_session.py", ["servers"], **env)


def test_two_concurrent_test_sessions_keep_to_their_own_redis_data(tmp_path):
    """Two sessions told to use one Redis server (a server of this test's own: nothing
    else claims there) each claim their databases there, and never the same one."""
    (tmp_path / "test_session.py").write_text(SESSION)
    done = tmp_path / "second.done"
    with embedded_redis() as redis_server:
        urls = run_two_sessions(tmp_path, redis_server, done)
    socket = urlsplit(redis_server).path
    assert all(urlsplit(url).path == socket for url in urls), (redis_server, urls)
    assert len(set(urls)) == 4, urls


def run_two_sessions(tmp_path: Path, redis_server: str, done: Path) -> list[str]:
    """The second session starts (and would flush a shared database) while the first
    holds its data; the Redis URLs each used (its session's, then a test's own)."""
    first = session(tmp_path, "first", redis_server, wait_for=done)
    try:
        stop_at = time.monotonic() + 60
        while not (tmp_path / "first.url").exists():
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < stop_at, "the first session did not start"
            time.sleep(0.05)
        second = session(tmp_path, "second", redis_server)
        out, _ = second.communicate(timeout=120)
        assert second.returncode == 0, out
    finally:
        done.touch()
        out, _ = first.communicate(timeout=120)
    assert first.returncode == 0, out
    return [
        url
        for name in ("first", "second")
        for url in (tmp_path / f"{name}.url").read_text().split()
    ]


def test_a_claim_skips_claimed_databases_and_other_data_and_is_released(redis_server):
    with claimed_redis_db(redis_server) as first, claimed_redis_db(redis_server) as second:
        assert first != second
        mine = redis_lib.Redis.from_url(first)
        mine.set("first-key", "kept")
        # The next database a claim would take holds data no test run left (a service's,
        # a developer's): it is skipped, and kept.
        admin = redis_lib.Redis.from_url(redis_db_url(redis_server, 0))
        foreign_url = next(
            url
            for db in range(15, 0, -1)
            if (url := redis_db_url(redis_server, db)) not in (first, second)
            and not admin.exists(f"ddz-test:claim:{db}")
            and redis_lib.Redis.from_url(url).dbsize() == 0
        )
        foreign = redis_lib.Redis.from_url(foreign_url)
        foreign.set("someone-elses", "data")
        try:
            with claimed_redis_db(redis_server) as third:
                assert third not in (first, second, foreign_url)
            assert foreign.get("someone-elses") == b"data"
        finally:
            foreign.delete("someone-elses")
        assert mine.get("first-key") == b"kept", "another claim flushed this run's database"
    # Released, and left flushed.
    assert redis_lib.Redis.from_url(first).dbsize() == 0
    dbs = [
        redis_lib.Redis.from_url(url).connection_pool.connection_kwargs["db"]
        for url in (first, second)
    ]
    assert not admin.exists(*(f"ddz-test:claim:{db}" for db in dbs))


def test_a_held_claim_is_renewed_though_its_lease_is_short(redis_server, monkeypatch):
    # A short lease, kept alive while held: a run killed mid-way (CI stopped, a laptop
    # closed) must not keep its databases from the next run for long.
    monkeypatch.setattr(servers, "CLAIM_SECONDS", 1.5)
    admin = redis_lib.Redis.from_url(redis_db_url(redis_server, 0))
    with claimed_redis_db(redis_server) as url:
        db = redis_lib.Redis.from_url(url).connection_pool.connection_kwargs["db"]
        time.sleep(4)
        assert admin.exists(f"ddz-test:claim:{db}"), "a held claim lapsed"
        assert 0 < admin.pttl(f"ddz-test:claim:{db}") <= 1500
    assert not admin.exists(f"ddz-test:claim:{db}")
