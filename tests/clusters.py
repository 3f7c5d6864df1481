"""A PostgreSQL cluster of a test's own, archiving its WAL, and its backups with pgBackRest
(encrypted, as deploy/ configures it) or, where pgBackRest is not installed, with
``pg_basebackup`` and the WAL archived by ``cp``: taken, and restored to a point in time
into a second cluster. The server's programs are this machine's (``pg_config --bindir``,
else ``/usr/lib/postgresql/*/bin``), else the ``pgserver`` package's. PostgreSQL refuses
to run as root: as root, the clusters and pgBackRest run as the user ``pgserver`` makes
for that."""

from __future__ import annotations

import configparser
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import psycopg

#: pgBackRest's program, when installed (.ci/run installs Debian's).
PGBACKREST = shutil.which("pgbackrest")
#: pgBackRest's configuration in deploy/compose.yaml.
DEPLOYED = Path(__file__).resolve().parents[1] / "deploy" / "pgbackrest" / "pgbackrest.conf"


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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A cluster in ``data``, listening on a unix socket in ``sockets`` only."""

    def __init__(self, home: Path, name: str, user: str | None):
        self.data = home / name
        self.sockets = home / f"{name}-sockets"
        self.log = home / f"{name}.log"
        self.port = free_port()
        self.user = user
        self.sockets.mkdir()
        if user:
            shutil.chown(self.sockets, user)

    def run(self, *command: str | Path) -> str:
        done = subprocess.run(
            [str(c) for c in command], capture_output=True, text=True, user=self.user
        )
        assert done.returncode == 0, f"{' '.join(map(str, command))}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.sockets}&port={self.port}"

    def start(self, *settings: str) -> None:
        options = " ".join(
            [f"-p {self.port}", f"-k {self.sockets}", "-c listen_addresses=''"]
            + [f"-c {s}" for s in settings]
        )
        self.run(
            server_programs() / "pg_ctl",
            "-D",
            self.data,
            "-l",
            self.log,
            "-o",
            options,
            "-w",
            "start",
        )

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
    """A cluster that archives its WAL, its base backups, and restores to a point in time."""

    def __init__(self, home: Path, user: str | None):
        self.home = home
        self.user = user
        self.tool = "pgBackRest" if PGBACKREST else "pg_basebackup and WAL replay"
        self.primary = Cluster(home, "primary", user)
        self.archive = home / "archive"
        self.config = home / "pgbackrest.conf"

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
        self.primary.start("wal_level=replica", "archive_mode=on", f"archive_command='{archive}'")
        if PGBACKREST:
            self._pgbackrest("stanza-create")

    def _pgbackrest(self, *command: str) -> str:
        assert PGBACKREST is not None
        return self.primary.run(PGBACKREST, f"--config={self.config}", "--stanza=ddz", *command)

    def backup(self) -> None:
        """A full base backup, taken while the cluster runs."""
        if PGBACKREST:
            self._pgbackrest("--type=full", "backup")
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

    def restore(self, target: datetime) -> Cluster:
        """A second cluster from the base backup, its WAL replayed up to ``target`` (the
        commits at that time or before it, none after), promoted and started."""
        restored = Cluster(self.home, "restored", self.user)
        at = target.isoformat(sep=" ")
        if PGBACKREST:
            # The latest backup, named: left to choose by the target, pgBackRest takes only a
            # backup that ended a whole second before it.
            (info,) = json.loads(self._pgbackrest("info", "--output=json"))
            self._pgbackrest(
                f"--set={info['backup'][-1]['label']}",
                f"--pg1-path={restored.data}",
                "--type=time",
                f"--target={at}",
                "--target-action=promote",
                "restore",
            )
        else:
            self.primary.run("cp", "-a", self.home / "base", restored.data)
            (restored.data / "recovery.signal").touch()
            with open(restored.data / "postgresql.auto.conf", "a") as conf:
                conf.write(
                    f"restore_command = 'cp {self.archive}/%f %p'\n"
                    f"recovery_target_time = '{at}'\n"
                    "recovery_target_action = 'promote'\n"
                )
        restored.start("archive_mode=off")
        restored.wait_promoted()
        return restored


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
        for cluster in ("restored", "primary"):
            data = home / cluster
            if (data / "postmaster.pid").exists():
                subprocess.run(
                    [str(server_programs() / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                    capture_output=True,
                    user=user,
                )
        shutil.rmtree(home, ignore_errors=True)
