"""Every benchmark still runs: each script of benchmarks/, in its smoke mode (``--smoke``:
its code paths at tiny sizes, in seconds), as a process of its own on the test run's
PostgreSQL server and a Redis database of this test's own, exits 0 having printed its
figures. A script without a smoke mode fails here, so that none rots unseen. The figures
themselves mean nothing at that size: speed is measured by running the scripts in full,
never by the suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from servers import ROOT

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

SCRIPTS = sorted(path for path in (ROOT / "benchmarks").glob("*.py") if path.name != "common.py")
#: rlcard_bench measures another project's engine (noword/rlcard, which needs numpy), from
#: a checkout of it that this environment names, or not.
RLCARD = os.environ.get("DDZ_RLCARD")
#: A number, as a figure has (a "nan" is a figure of no samples: a code path that ran
#: empty).
NUMBER = re.compile(r"\d")
NAN = re.compile(r"\bnan\b", re.I)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_the_benchmark_runs_in_smoke_mode(script, postgres_admin_url, own_redis_url):
    arguments = []
    if script.stem == "rlcard_bench":
        if not RLCARD:
            pytest.skip("rlcard_bench needs a checkout of noword/rlcard: set DDZ_RLCARD to it")
        arguments.append(RLCARD)
    if script.stem == "failover_drill" and not (shutil.which("patroni") and shutil.which("etcd")):
        pytest.skip("failover_drill needs Debian's patroni and etcd-server (.ci/run installs them)")
    environment = {
        **os.environ,
        "DDZ_BENCH_ADMIN_URL": postgres_admin_url,
        "DDZ_BENCH_REDIS_URL": own_redis_url,
        "PYTHONUNBUFFERED": "1",
    }
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, str(script), "--smoke", *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - started
    output = f"{script.name} --smoke, {seconds:.1f} s:\n{run.stdout}\n{run.stderr[-4000:]}"
    assert run.returncode == 0, output
    lines = run.stdout.splitlines()
    assert lines and lines[0].startswith("smoke run:"), output
    assert any(NUMBER.search(line) for line in lines[1:]), output
    assert not NAN.search(run.stdout), output
