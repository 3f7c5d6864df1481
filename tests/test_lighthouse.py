"""The web table kept at Lighthouse's top: the user flows of benchmarks/lighthouse/flow.mjs
(Lighthouse with puppeteer-core driving Debian's headless Chromium as a phone) against
the service as ``ddz serve`` runs it: the first load, the lobby, the table in play and the
settlement each score 100 in accessibility (axe-core's rules, and Lighthouse's own) and in
best practices (no console error, no deprecated API, no permission asked unprompted).
Performance depends on the machine's load: the flow prints it, this test does not judge it
(benchmarks measure speed, docs/web-table.md has the figures).

The flow's packages are installed with ``npm ci`` from its committed package-lock.json
(tests/node_packages.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import node_packages
import pytest
from servers import lobby_service

# Slow: installs packages, starts a service and a browser, plays a hand.
pytestmark = pytest.mark.slow

FLOW = Path(__file__).resolve().parents[1] / "benchmarks" / "lighthouse"


@pytest.fixture(scope="module")
def installed() -> Path:
    return node_packages.installed(FLOW)


@pytest.fixture(scope="module")
def base_url(postgres_admin_url, redis_server, tmp_path_factory):
    # A table rests 30 s between hands: the settlement stays on screen for its snapshot.
    with lobby_service(
        postgres_admin_url,
        redis_server,
        tmp_path_factory.mktemp("lighthouse"),
        "lighthouse",
        DDZ_TABLE_NEXT_HAND_SECONDS="30",
    ) as base:
        yield base


def test_every_state_of_the_table_scores_100_in_accessibility_and_best_practices(
    installed, base_url, tmp_path
):
    scores = tmp_path / "scores.json"
    run = subprocess.run(
        ["node", "flow.mjs", base_url, "--json", str(scores)],
        cwd=installed,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    steps = json.loads(scores.read_text())
    assert [s["step"] for s in steps] == ["navigation", "lobby", "table in play", "settlement"]
    for step in steps:
        assert step["accessibility"] == 100, (step, run.stdout)
        assert step["best-practices"] == 100, (step, run.stdout)
    print(run.stdout)
