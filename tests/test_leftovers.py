"""No test leaves a process running (``tests/processes.py``): a session whose tests leave
processes behind fails, naming them, and stops them; one whose parent exited (an orphan)
is found too."""

from __future__ import annotations

import textwrap
import uuid

import psutil
import pytest
from processes import separate_session

# Slow: starts a pytest session that waits for what its tests left to stop.
pytestmark = pytest.mark.slow


SESSION = textwrap.dedent(
    """
    import os, shlex, subprocess, sys

    SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)", os.environ["MARK"]]

    def test_leaves_its_child_running():
        subprocess.Popen([*SLEEPER, "child"], start_new_session=True)

    def test_leaves_an_orphan_whose_parent_exited():
        command = shlex.join([*SLEEPER, "orphan"])
        subprocess.run(["sh", "-c", f"{command} & exit 0"], start_new_session=True, check=True)

    def test_leaves_nothing():
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    """
)


def marked(mark: str) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if mark in (p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE
    ]


def test_a_session_that_leaves_processes_running_fails_and_stops_them(tmp_path):
    (tmp_path / "test_session.py").write_text(SESSION)
    mark = uuid.uuid4().hex
    try:
        session = separate_session(
            tmp_path / "test_session.py", ["servers", "processes"], MARK=mark
        )
        out, _ = session.communicate(timeout=120)
        assert session.returncode == 1, out
        assert "3 passed, 1 error" in out, out
        assert "processes left running after the tests" in out, out
        assert f"{mark} child" in out and f"{mark} orphan" in out, out
        assert marked(mark) == []
    finally:
        for process in marked(mark):
            process.kill()
