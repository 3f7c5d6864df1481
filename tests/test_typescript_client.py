"""The TypeScript client (clients/typescript) by its own tests, run with Node's test runner
against the service as ``ddz serve`` runs it (the test process's shared service, whose
streams close every 2 s): a hand from the lobby against bots to its settlement over a bad
network (the stream dropped and resumed, a lost answer retried with the same key), the
retry policy, refusals as typed errors, and the committed generated files (the contract's
types, the web table's script) as their sources make them now.

Its packages are installed with ``npm ci`` from the committed package-lock.json, again
only when that file changes (npm keeps its own cache of what it downloaded)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import node_packages
import pytest
from servers import OPERATOR_TOKEN

# Slow: installs packages and starts Node against a served service.
pytestmark = pytest.mark.slow

PACKAGE = Path(__file__).resolve().parents[1] / "clients" / "typescript"


@pytest.fixture(scope="module")
def installed() -> Path:
    """clients/typescript with its node_modules as its package-lock.json says."""
    return node_packages.installed(PACKAGE)


def test_the_typescript_client_passes_its_tests_against_ddz_serve(installed, shared_service):
    environment = {
        **os.environ,
        "DDZ_URL": shared_service,
        "DDZ_OPERATOR_TOKEN": OPERATOR_TOKEN,
    }
    run = subprocess.run(
        [node_packages.npm(), "test"],
        cwd=installed,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    assert "# fail 0" in output and "# pass 0" not in output, output[-3000:]
