"""The soak's census (service/census.py): what a process holds, told from inside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from servers import ROOT

from service import census
from service.rules import moves


def test_a_census_counts_the_closures_a_process_keeps_and_its_caches():
    def made(n: int):
        return lambda: n

    before = census.take()
    kept = [made(n) for n in range(500)]
    moves._MASKS[(99,) * 15] = (0, 0, 0, 0)  # an entry no hand has
    try:
        after = census.take()
    finally:
        del moves._MASKS[(99,) * 15]
    name = f"{__name__}.{made.__qualname__}.<locals>.<lambda>"
    assert after["functions"][name] - before["functions"].get(name, 0) == len(kept)
    assert after["caches"]["rules.moves._MASKS"] == before["caches"]["rules.moves._MASKS"] + 1
    assert after["rss_kib"] > 0 and after["allocated_blocks"] > 0


def test_a_process_asked_for_its_census_writes_one_line_each_time(tmp_path):
    env = {**os.environ, "DDZ_CENSUS_DIR": str(tmp_path), "DDZ_CENSUS_SECONDS": "0.2"}
    code = "import time; from service import census; census.start_if_asked('api'); time.sleep(60)"
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 30  # a busy machine imports slowly
        lines: list[dict] = []
        while len(lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
            for path in tmp_path.glob("census-*.jsonl"):
                written = path.read_text()
                lines = [
                    json.loads(line)
                    for line in written.splitlines(keepends=True)
                    if line.endswith("\n")
                ]
    finally:
        process.kill()
        process.wait()
    assert len(lines) >= 3
    assert {line["role"] for line in lines} == {"api"}
    assert [path.name for path in tmp_path.glob("census-*.jsonl")] == [
        f"census-{process.pid}.jsonl"
    ]
    assert all(line["pid"] == process.pid for line in lines)


def test_a_process_not_asked_writes_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DDZ_CENSUS_DIR"}
    code = "import threading; from service import census; census.start_if_asked('api');"
    code += " assert not any(t.name == 'ddz-census' for t in threading.enumerate())"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
