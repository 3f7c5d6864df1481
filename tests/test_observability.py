"""Metrics and logs (docs/operations.md): /metrics moves with a hand played, every log line
is a JSON object naming its request or job, and none carries a card, token or password."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from api_support import OP
from handplay import play_hand, run_jobs
from jobs import new_player
from ports import free_port
from prometheus_client.parser import text_string_to_metric_families
from servers import fresh_database, wait_until_ready

from service.app import logs, metrics

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


def scrape(client) -> dict[tuple[str, tuple], float]:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.mimetype == "text/plain"
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(r.get_data(as_text=True))
        for sample in family.samples
    }


def moved(before: dict, after: dict, name: str, **labels) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


ROOT = Path(__file__).resolve().parents[1]
COMMANDS_ROUTE = "/v1/matches/<uuid:match_id>/commands"


def test_metrics_move_when_a_hand_is_played(ops):
    app, connection, _ = ops
    client = app.test_client()
    before = scrape(client)
    match_id = play_hand(client, connection)
    r = client.post(
        f"/v1/matches/{match_id}/commands",
        json={"action": "pass"},
        headers={"Authorization": f"Bearer {new_player(client, 'late')[1]}"},
    )
    assert r.status_code == 403 and r.json["code"] == "not_seated"
    assert client.get("/v1/admin/ledger/check", headers=OP).json["ok"] is True
    after = scrape(client)

    played = sum(
        moved(before, after, "ddz_commands_total", action=action, outcome="ok")
        for action in ("bid", "play", "pass", "show_hand", "report")
    )
    assert played >= 1
    assert moved(before, after, "ddz_commands_total", action="pass", outcome="not_seated") == 1
    assert (
        moved(
            before,
            after,
            "ddz_http_request_duration_seconds_count",
            method="POST",
            route=COMMANDS_ROUTE,
            status="200",
        )
        == played
    )
    # Every command of the player and the bots, the seats and the settlement appended.
    assert moved(before, after, "ddz_append_duration_seconds_count") > played
    assert moved(before, after, "ddz_job_duration_seconds_count", kind="bot_turn") >= 1
    assert moved(before, after, "ddz_job_duration_seconds_count", kind="settle_match") == 1
    assert moved(before, after, "ddz_settlement_lag_seconds_count") == 1
    assert moved(before, after, "ddz_settlements_total") == 1
    settlement = client.get(f"/v1/matches/{match_id}/settlement", headers=OP).json
    for kind in ("rake", "penalty"):
        taken = sum(float(a) for a in settlement[kind])
        assert moved(before, after, "ddz_house_takings_total", kind=kind) == pytest.approx(taken)
    penalised = any(float(a) for a in settlement["penalty"])
    assert moved(before, after, "ddz_penalties_total") == (1 if penalised else 0)
    assert after[("ddz_ledger_check_ok", ())] == 1
    assert after[("ddz_ledger_check_problems", ())] == 0
    assert after[("ddz_unsettled_hands", ())] == 0
    assert after[("ddz_queue_jobs", (("state", "queued"),))] == 0
    assert ("ddz_open_streams", ()) in after


def test_any_method_or_path_a_client_makes_up_adds_no_series(ops):
    app, _, _ = ops
    client = app.test_client()

    def invent(word: str) -> dict:
        for n in range(5):
            client.open("/healthz", method=f"{word}{n}")
            client.get(f"/no/such/{word}/{n}")
        return scrape(client)

    scrape(client)  # the scrape's own series, there from now on
    first = invent("XONE")
    again = invent("XTWO")
    # The second lot of made-up methods and paths lands in the series the first made.
    assert {key for key in again if key[0].startswith("ddz_http")} == {
        key for key in first if key[0].startswith("ddz_http")
    }
    methods = {dict(labels).get("method") for _, labels in again} - {None}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
    count = "ddz_http_request_duration_seconds_count"
    assert moved(first, again, count, method="other", route="unmatched", status="405") == 5
    assert moved(first, again, count, method="GET", route="unmatched", status="404") == 5


def test_a_request_id_is_taken_or_made_and_sent_back(ops):
    client = ops[0].test_client()
    r = client.get("/healthz", headers={"X-Request-ID": "lb-7f3a.1"})
    assert r.headers["X-Request-ID"] == "lb-7f3a.1"
    made = client.get("/healthz", headers={"X-Request-ID": "bad id; <script>"}).headers[
        "X-Request-ID"
    ]
    assert re.fullmatch(r"[0-9a-f]{32}", made)


CARD = re.compile(r"\b(?:[SHCD][2-9TJQKA]|BJ|RJ)\b")


def test_every_log_line_is_json_with_its_request_or_job_and_no_secret(ops):
    app, connection, _ = ops
    client = app.test_client()
    out = io.StringIO()
    handler = logs.handler(out)
    root = logging.getLogger()
    root.addHandler(handler)
    level, root.level = root.level, logging.INFO
    try:
        player_token = new_player(client, "logged")[1]
        match_id = play_hand(client, connection, "logged-too")
        client.get(f"/v1/admin/matches/{match_id}/events", headers=OP)
        client.get("/v1/players/none", headers={"Authorization": f"Bearer {player_token}"})
        # A line that names a secret by mistake is scrubbed all the same.
        logging.getLogger("ddz").warning("retrying with Authorization: Bearer %s", player_token)
        run_jobs(connection)
    finally:
        root.removeHandler(handler)
        root.level = level
    lines = out.getvalue().splitlines()
    documents = [json.loads(line) for line in lines]  # each line is one JSON object
    assert {"ddz.access", "workers.jobs", "ddz"} <= {d["logger"] for d in documents}
    for d in documents:
        assert {"time", "level", "logger", "message"} <= d.keys()
    access = [d for d in documents if d["logger"] == "ddz.access"]
    assert access and all(re.fullmatch(r"[0-9a-f]{32}", d["request_id"]) for d in access)
    jobs = [d for d in documents if d["logger"] == "workers.jobs"]
    assert jobs and all(d["job_id"].startswith(("bot-turn-", "settle-")) for d in jobs)
    text = out.getvalue()
    assert player_token not in text and OP["Authorization"].split()[1] not in text
    assert not CARD.findall(text), CARD.findall(text)[:5]


SECRET = b"s3cr3t-in-a-malformed-header"


def healthz_lines(log: Path) -> list[dict]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [d for d in lines if d["logger"] == "ddz.access" and d["path"] == "/healthz"]


def test_gunicorn_workers_add_up_in_metrics_and_log_json(config, tmp_path):
    """Two gunicorn workers behind one port: /metrics counts every request, whichever
    worker served it; every line gunicorn and the app write is JSON; the metrics
    directory goes when gunicorn does."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
        "DATABASE_URL": config.database_url,
        "REDIS_URL": config.redis_url,
        "DDZ_OPERATOR_TOKEN": config.operator_token,
        "WEB_CONCURRENCY": "2",
        "TMPDIR": str(tmp_path),
    }
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_conf"]
            + ["--bind", f"127.0.0.1:{port}", "service.api.wsgi:app"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, server, log, 60, path="/healthz")
        # New connections until both workers have served some (the second may still be
        # starting on a busy machine).
        deadline = time.monotonic() + 60
        while len({d["process"] for d in healthz_lines(log)}) < 2:
            assert time.monotonic() < deadline, "one worker served every request"
            r = requests.get(base + "/healthz", headers={"Connection": "close"}, timeout=10)
            assert r.status_code == 200
        # A malformed header line, a credential in it: gunicorn logs the line it refuses.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Auth " + SECRET + b"\r\n\r\n")
            assert raw.recv(1024).startswith(b"HTTP/1.1 400")
        families = list(
            text_string_to_metric_families(requests.get(base + "/metrics", timeout=10).text)
        )
        healthz = [
            sample.value
            for family in families
            for sample in family.samples
            if sample.name == "ddz_http_request_duration_seconds_count"
            and sample.labels["route"] == "/healthz"
        ]
        # Each worker's CPU, memory, descriptors and start, labelled by its pid (the
        # multiprocess mode exports no process_* of its own).
        workers = {str(d["process"]) for d in healthz_lines(log)}
        processes = {
            family.name: (family.type, family.samples)
            for family in families
            if family.name.startswith("process_")
        }
    finally:
        server.terminate()
        server.wait(timeout=30)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert {"gunicorn.error", "ddz.access"} <= {d["logger"] for d in lines}
    assert sum(1 for d in lines if "Booting worker" in d["message"]) == 2
    # /metrics counted every request of both workers: one worker's own count is a part.
    assert healthz == [len(healthz_lines(log))]
    assert {
        name: kind for name, (kind, _) in processes.items()
    } == {  # the parser names a counter's family without its _total
        "process_cpu_seconds": "counter",
        "process_resident_memory_bytes": "gauge",
        "process_open_fds": "gauge",
        "process_start_time_seconds": "gauge",
    }
    for name, (_, samples) in processes.items():
        by_pid = {s.labels["pid"]: s for s in samples}
        assert workers <= set(by_pid), (name, workers, by_pid.keys())
        assert {s.name for s in samples} == {
            name + "_total" if name == "process_cpu_seconds" else name
        }
        assert all(s.value > 0 for s in samples), name
    started = {s.labels["pid"]: s.value for s in processes["process_start_time_seconds"][1]}
    assert all(time.time() - 600 < started[pid] <= time.time() for pid in workers)
    resident = {s.labels["pid"]: s.value for s in processes["process_resident_memory_bytes"][1]}
    assert all(resident[pid] > 10 * 2**20 for pid in workers)  # a Python process with Flask
    assert list(tmp_path.glob("ddz-metrics-*")) == []
    refused = [d["message"] for d in lines if "Invalid HTTP Header" in d["message"]]
    assert refused and all("'X-Auth' [redacted]" in message for message in refused), refused
    assert SECRET.decode() not in log.read_text()


def test_a_worker_serves_its_own_metrics_when_told_where(
    postgres_admin_url, own_redis_url, tmp_path
):
    """DDZ_WORKER_METRICS: a worker on a machine of its own is scraped there."""
    port = free_port()
    with fresh_database(postgres_admin_url, "ddz_worker_metrics") as database_url:
        env = {
            **{k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
            "DATABASE_URL": database_url,
            "REDIS_URL": own_redis_url,
            "DDZ_WORKER_METRICS": f"127.0.0.1:{port}",
        }
        log = tmp_path / "worker.log"
        with open(log, "wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "service.cli", "worker"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until_ready(f"http://127.0.0.1:{port}", worker, log, 60, path="/metrics")
            text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            names = {f.name for f in text_string_to_metric_families(text)}
            assert {"ddz_job_duration_seconds", "ddz_settlement_lag_seconds"} <= names
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    assert all(json.loads(line) for line in log.read_text().splitlines() if line.strip())


def test_process_metrics_skip_dead_processes_and_a_pid_taken_since(tmp_path):
    """A dead process's files stay (its counters still add up): it has no process_*, nor
    does a live process that took its pid after it died."""
    mine = tmp_path / f"counter_{os.getpid()}.db"
    mine.write_bytes(b"")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    (tmp_path / f"histogram_{dead.stdout.strip()}.db").write_bytes(b"")
    # pid 1 (init) started long after this file was last written.
    reused = tmp_path / "gauge_livesum_1.db"
    reused.write_bytes(b"")
    os.utime(reused, (0, 0))
    pids = {
        family.name: {sample.labels["pid"] for sample in family.samples}
        for family in metrics.Processes(str(tmp_path)).collect()
    }
    assert pids == {
        name: {str(os.getpid())}
        for name in (
            "process_cpu_seconds",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        )
    }
