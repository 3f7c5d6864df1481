"""The soak's census (service/census.py): what a process holds, told from inside it; and
the free memory a process gives back (service/memory.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
    code = "import time; from service import census; census.start_if_asked('api'); time.sleep(1.5)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.glob("census-*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) >= 3
    assert {line["role"] for line in lines} == {"api"}
    assert path.name == f"census-{lines[0]['pid']}.jsonl"


def test_a_process_not_asked_writes_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DDZ_CENSUS_DIR"}
    code = "import threading; from service import census; census.start_if_asked('api');"
    code += " assert not any(t.name == 'ddz-census' for t in threading.enumerate())"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_freed_memory_given_back_leaves_the_processs_rss():
    """What a busy moment allocated and freed stays in the RSS until it is given back."""
    code = (
        "from service import memory\n"
        "held = [bytearray(1000) for _ in range(100_000)]\n"
        "del held\n"
        "before = memory.rss_kib()\n"
        "assert memory.give_back()\n"
        "print(before - memory.rss_kib())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 50_000  # KiB: most of the 100 MB freed
