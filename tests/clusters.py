"""A PostgreSQL cluster of a test's own, archiving its WAL, and its backups with pgBackRest
(encrypted, as deploy/ configures it) or, where pgBackRest is not installed, with
``pg_basebackup`` and the WAL archived by ``cp``: taken, and restored to a point in time.
With pgBackRest, the restores follow the runbook of docs/operations.md ("Restore
(runbook)"): its shell blocks run as written, after definitions of this cluster's (the
same names as the runbook's own). The server's programs are this machine's (``pg_config
--bindir``, else ``/usr/lib/postgresql/*/bin``), else the ``pgserver`` package's.
PostgreSQL refuses to run as root: as root, the clusters and pgBackRest run as the user
``pgserver`` makes for that."""

from __future__ import annotations

import configparser
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import psycopg
from ports import free_port

#: pgBackRest's program, when installed (.ci/run installs Debian's).
PGBACKREST = shutil.which("pgbackrest")
ROOT = Path(__file__).resolve().parents[1]
#: pgBackRest's configuration in deploy/compose.yaml.
DEPLOYED = ROOT / "deploy" / "pgbackrest" / "pgbackrest.conf"
#: Where the restore runbook is, under its heading.
OPERATIONS = ROOT / "docs" / "operations.md"
RUNBOOK = "### Restore (runbook)"


def runbook() -> dict[str, list[str]]:
    """The ``sh`` blocks of the restore runbook of docs/operations.md, by the heading
    (``#### …``) each is under, in order."""
    text = OPERATIONS.read_text(encoding="utf-8")
    assert f"\n{RUNBOOK}\n" in text, f"docs/operations.md: no {RUNBOOK!r}"
    section = text.split(f"\n{RUNBOOK}\n", 1)[1]
    section = re.split(r"^#{2,3} ", section, flags=re.M)[0]  # to the next section
    parts = re.split(r"^#### (.+)$", section, flags=re.M)
    code = r"^```sh\n(.*?)^```$"
    assert not re.findall(code, parts[0], re.S | re.M), "a runbook block under no heading"
    return {
        heading: re.findall(code, body, re.S | re.M)
        for heading, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def defined(block: str) -> set[str]:
    """The shell variables and functions a block of definitions defines."""
    return set(re.findall(r"^([A-Za-z_]\w*)(?:=|\(\) )", block, re.M))


def server_programs() -> Path:
    """The directory of initdb, pg_ctl and pg_basebackup."""
    candidates = []
    if shutil.which("pg_config"):
        bindir = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=False
        ).stdout.strip()
        candidates.append(Path(bindir))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    import pgserver._commands

    return Path(pgserver._commands.POSTGRES_BIN_PATH)


def server_user() -> str | None:
    """Who runs the clusters: this process's user, or (as root) pgserver's."""
    if os.geteuid() != 0:
        return None
    import pgserver.utils

    return pgserver.utils.ensure_user_exists("pgserver").pw_name


class Cluster:
    """A cluster in ``data``, listening on a unix socket in ``sockets`` only, its settings
    in its own ``postgresql.conf`` (as a deployment's are, and a restored copy finds them)."""

    def __init__(self, home: Path, name: str, user: str | None, sockets: Path | None = None):
        self.data = home / name
        self.log = home / f"{name}.log"
        self.port = free_port()
        self.user = user
        if sockets is None:
            sockets = home / f"{name}-sockets"
            sockets.mkdir()
            if user:
                shutil.chown(sockets, user)
        self.sockets = sockets

    def run(self, *command: str | Path) -> str:
        done = subprocess.run(
            [str(c) for c in command],
            capture_output=True,
            text=True,
            user=self.user,
            group=self.user,
        )
        assert done.returncode == 0, f"{' '.join(map(str, command))}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.sockets}&port={self.port}"

    def configure(self, *settings: str) -> None:
        """Its port and socket, and ``settings``, at the end of its ``postgresql.conf``."""
        lines = [
            f"port = {self.port}",
            f"unix_socket_directories = '{self.sockets}'",
            "listen_addresses = ''",
            *settings,
        ]
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n".join(lines) + "\n")

    def start(self) -> None:
        self.run(server_programs() / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "start")

    def wait_promoted(self, timeout: float = 60) -> None:
        """Until recovery has ended and the cluster takes writes."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2) as conn:
                    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                    if row is not None and not row[0]:
                        return
            except psycopg.OperationalError:
                pass
            alive = (self.data / "postmaster.pid").exists()
            assert alive and time.monotonic() < deadline, self.log.read_text(errors="replace")[
                -3000:
            ]
            time.sleep(0.2)


class Backups:
    """A cluster that archives its WAL, its base backups, and its restores to a point in
    time: in place and beside it, by the runbook (with pgBackRest), or beside it from a
    base backup (without)."""

    def __init__(self, home: Path, user: str | None):
        self.home = home
        self.user = user
        self.tool = "pgBackRest" if PGBACKREST else "pg_basebackup and WAL replay"
        self.primary = Cluster(home, "primary", user)
        #: The cluster restored beside the primary: its settings are a copy of the
        #: primary's, its socket in the same directory, on a port of its own.
        self.beside = Cluster(home, "restored", user, sockets=self.primary.sockets)
        self.archive = home / "archive"
        self.config = home / "pgbackrest.conf"
        #: Where the runbook's ``writers stop|start`` are written down, in order.
        self.writers = home / "writers"

    def _own(self, *paths: Path) -> None:
        for path in paths:
            path.mkdir(exist_ok=True)
            if self.user:
                shutil.chown(path, self.user)

    def start(self) -> None:
        self.primary.run(
            server_programs() / "initdb",
            "-D",
            self.primary.data,
            "--auth=trust",
            "-U",
            "postgres",
            "--encoding=utf8",
        )
        if PGBACKREST:
            for sub in ("repo", "log", "lock", "spool"):
                self._own(self.home / sub)
            # The deployment's settings (encryption, retention, compression, asynchronous
            # archiving), with this cluster's places and a key of its own.
            deployed = configparser.ConfigParser()
            deployed.read(DEPLOYED)
            deployed["global"].update(
                {
                    "repo1-path": str(self.home / "repo"),
                    "repo1-cipher-pass": secrets.token_urlsafe(32),
                    "log-path": str(self.home / "log"),
                    "lock-path": str(self.home / "lock"),
                    "spool-path": str(self.home / "spool"),
                    "log-level-console": "warn",
                }
            )
            deployed["ddz"] = {
                "pg1-path": str(self.primary.data),
                "pg1-port": str(self.primary.port),
                "pg1-socket-path": str(self.primary.sockets),
                "pg1-user": "postgres",
            }
            with open(self.config, "w") as f:
                deployed.write(f, space_around_delimiters=False)
            if self.user:
                shutil.chown(self.config, self.user)
            archive = f"{PGBACKREST} --config={self.config} --stanza=ddz archive-push %p"
        else:
            self._own(self.archive)
            archive = f"test ! -f {self.archive}/%f && cp %p {self.archive}/%f"
        self.primary.configure(
            "wal_level = replica", "archive_mode = on", f"archive_command = '{archive}'"
        )
        self.primary.start()
        if PGBACKREST:
            self._pgbackrest("stanza-create")

    def _pgbackrest(self, *command: str) -> str:
        assert PGBACKREST is not None
        return self.primary.run(PGBACKREST, f"--config={self.config}", "--stanza=ddz", *command)

    def backup(self) -> None:
        """A full base backup, taken while the cluster runs. With pgBackRest, it returns a
        whole second after the backup's end: a target restores from the newest backup that
        ended before it, as pgBackRest counts, in whole seconds."""
        if PGBACKREST:
            self._pgbackrest("--type=full", "backup")
            (info,) = json.loads(self._pgbackrest("info", "--output=json"))
            time.sleep(max(0.0, info["backup"][-1]["timestamp"]["stop"] + 1.1 - time.time()))
        else:
            self.primary.run(
                server_programs() / "pg_basebackup",
                "-D",
                self.home / "base",
                "-X",
                "none",
                "-c",
                "fast",
                "-h",
                self.primary.sockets,
                "-p",
                str(self.primary.port),
                "-U",
                "postgres",
            )

    def archived(self) -> None:
        """Until the WAL written so far is in the archive."""
        if PGBACKREST:
            self._pgbackrest("check")  # switches to a new WAL segment and waits for it
            return
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            row = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
            assert row is not None
            deadline = time.monotonic() + 30
            while not (self.archive / row[0]).exists():
                assert time.monotonic() < deadline, "the WAL was not archived"
                time.sleep(0.1)

    def archived_timelines(self) -> set[int]:
        """The timelines whose history the repository holds (the first has none)."""
        named = re.compile(r"([0-9A-F]{8})\.history")
        found = (named.match(p.name) for p in (self.home / "repo" / "archive").rglob("*"))
        return {int(m[1], 16) for m in found if m}

    def definitions(self, target: datetime) -> str:
        """The runbook's definitions for this cluster: the primary is the live cluster,
        the runbook's commands run as its user, ``ddz`` is the command itself, and the
        writers (the test's, in its own process, stopped and started by the test) are
        written down."""
        quoted = shlex.quote
        as_user = f"runuser -u {self.user} -- " if self.user else ""
        log = quoted(str(self.primary.log))
        return "\n".join(
            [
                "STANZA=ddz",
                f"TARGET={quoted(target.isoformat(sep=' '))}",
                f"PGDATA={quoted(str(self.primary.data))}",
                f"LIVE_URL={quoted(self.primary.url('ddz'))}",
                f"RESTORED={quoted(str(self.beside.data))}",
                f"PORT={self.beside.port}",
                f"RESTORED_URL={quoted(self.beside.url('ddz'))}",
                f'as_postgres() {{ {as_user}"$@"; }}',
                'ddz() { command ddz "$@"; }',
                f'writers() {{ echo "$1" >> {quoted(str(self.writers))}; }}',
                f'database() {{ as_postgres pg_ctl -D "$PGDATA" -l {log} -m fast "$1"; }}',
            ]
        )

    def follow(self, block: str, target: datetime) -> str:
        """A block of the runbook, run as written after this cluster's definitions, in bash
        stopping at its first failure: what it wrote (stdout, then stderr)."""
        assert PGBACKREST is not None
        unset = ("DATABASE_URL", "PGDATA", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE")
        env = {k: v for k, v in os.environ.items() if k not in unset}
        # The cluster's programs, this virtualenv's ddz, and the test's configuration of
        # pgBackRest (an operator's is where pgBackRest looks by default).
        env["PATH"] = os.pathsep.join(
            [str(server_programs()), str(Path(sys.executable).parent), env.get("PATH", "")]
        )
        env["PGBACKREST_CONFIG"] = str(self.config)
        script = f"{self.definitions(target)}\n{block}"
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        said = f"{done.stdout}{done.stderr}"
        assert done.returncode == 0, f"{block}\nexit status {done.returncode}:\n{said[-4000:]}"
        return said

    def restore(self, target: datetime) -> Cluster:
        """The cluster beside the primary, restored up to ``target`` (the commits at that
        time or before it, none after) and promoted: by the runbook's steps with pgBackRest,
        else from the base backup with the WAL replayed by PostgreSQL."""
        if PGBACKREST:
            restore_and_start, _, promote, _ = runbook()["Beside the live cluster"]
            self.follow(restore_and_start, target)
            self.follow(promote, target)
        else:
            restored = self.beside
            self.primary.run("cp", "-a", self.home / "base", restored.data)
            (restored.data / "recovery.signal").touch()
            restored.configure(
                "archive_mode = off",
                f"restore_command = 'cp {self.archive}/%f %p'",
                f"recovery_target_time = '{target.isoformat(sep=' ')}'",
                "recovery_target_action = 'promote'",
            )
            restored.start()
        self.beside.wait_promoted()
        return self.beside


@contextmanager
def backed_up_cluster() -> Iterator[Backups]:
    """A started cluster that archives its WAL, in a directory of its own (removed at the end)."""
    user = server_user()
    home = Path(tempfile.mkdtemp(prefix="ddz-drill-"))
    if user:
        shutil.chown(home, user)
    backups = Backups(home, user)
    try:
        backups.start()
        yield backups
    finally:
        for cluster in (backups.beside, backups.primary):
            if (cluster.data / "postmaster.pid").exists():
                subprocess.run(
                    [
                        str(server_programs() / "pg_ctl"),
                        "-D",
                        str(cluster.data),
                        "-m",
                        "immediate",
                        "stop",
                    ],
                    capture_output=True,
                    user=user,
                    group=user,
                )
        shutil.rmtree(home, ignore_errors=True)
