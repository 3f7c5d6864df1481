"""The README's walkthroughs, each fenced block run as written, with bash, curl and jq, as
a newcomer runs them: against one ``bin/run serve`` started in a directory that stands for
the project's root (its ``bin/`` and ``examples/`` linked there), with neither
DATABASE_URL nor REDIS_URL set, so on the embedded servers under its ``.ddz-data/``. Only
settings the README names are changed, in serve's environment: the lobby seats bots after
a second (``DDZ_LOBBY_BOTS_AFTER``) and a table deals its next hand after one
(``DDZ_TABLE_NEXT_HAND_SECONDS``). Each block must end well, with no request of the
service answered 4xx or 5xx (but a 429 the Python client waits out and sends again); the
operators' block must let the operator sign in to the console. ``bin/test``, the Quick start's other line, is this suite. And the install that
``bin/run`` makes first: with the Python client, telling its progress."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from servers import ROOT, free_port, wait_until_ready
from terminal import at_a_terminal

from service import embedded

README = (ROOT / "README.md").read_text(encoding="utf-8")
PASSWORD = "a password of ada's"

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


def blocks(heading: str) -> list[str]:
    """The fenced ``sh`` blocks of the README's section under that heading (to the next
    heading)."""
    section = re.split(r"^#{2,} ", README.split(f"\n{heading}\n", 1)[1], flags=re.M)[0]
    found = re.findall(r"^ *```sh\n(.*?)^ *```$", section, re.S | re.M)
    assert found, f"README.md: no sh block under {heading!r}"
    return found


#: What the walkthroughs after the first take from it "in the same shell": the address of
#: the service and the ``api`` function.
API_FUNCTION = re.search(r"^API=.*?^}\n", blocks("### A whole hand with curl")[0], re.S | re.M)
assert API_FUNCTION, "README.md: the first walkthrough defines API and api()"


@dataclass
class Newcomer:
    home: Path
    base: str
    env: dict[str, str]
    log: Path

    def run(
        self, script: str, typed: list[tuple[str, str]] | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """The script in bash at the project's root, stopping at the first failure; in a
        session of its own, with no terminal; or, given what is ``typed`` at which prompt,
        at a terminal. ``env``: variables the reader has set."""
        before = self.log.stat().st_size
        argv = ["bash", "-e", "-o", "pipefail", "-c", script]
        env = {**self.env, "API": self.base, **env}
        if typed is None:
            done = subprocess.run(
                argv,
                cwd=self.home,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=300,
                start_new_session=True,
            )
        else:
            done = at_a_terminal(argv, typed, cwd=self.home, env=env, timeout=300)
        output = f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
        assert done.returncode == 0, output
        assert "failed:" not in done.stderr, output  # the api function's words for a 4xx/5xx
        # But 429: a fast engine's bridge may meet the command limit, and the Python client
        # sends again after Retry-After, as it promises (with curl, api would have failed).
        assert [r for r in self.refused(before) if r[1] != 429] == [], output
        return done

    def refused(self, since: int) -> list[tuple[str, int]]:
        """The requests answered 4xx or 5xx since that offset of serve's log."""
        with open(self.log, "rb") as log:
            log.seek(since)
            lines = log.read().decode(errors="replace").splitlines()
        answered = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("status"), int):
                answered.append((entry.get("path", "?"), entry["status"]))
        return [(path, status) for path, status in answered if status >= 400]


@pytest.fixture(scope="module")
def newcomer() -> Iterator[Newcomer]:
    for tool in ("bash", "curl", "jq"):
        assert shutil.which(tool), f"the README's walkthroughs need {tool} (.ci/run installs jq)"
    # Not under pytest's temporary directory, closed to other users (0700): as root, the
    # embedded PostgreSQL runs as a user of its own.
    home = Path(tempfile.mkdtemp(prefix="ddz-readme-"))
    for linked in ("bin", "examples"):
        (home / linked).symlink_to(ROOT / linked)
    unset = ("DATABASE_URL", "REDIS_URL", "DDZ_OPERATOR_TOKEN")
    env = {k: v for k, v in os.environ.items() if k not in unset and not k.startswith("DDZ_TEST_")}
    port = free_port()
    log = home / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen(
            ["bin/run", "serve", "--port", str(port)],
            cwd=home,
            env={
                **env,
                "DDZ_LOBBY_BOTS_AFTER": "1",
                "DDZ_TABLE_NEXT_HAND_SECONDS": "1",
                "PYTHONUNBUFFERED": "1",
            },
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, serve, log, timeout=120)
        yield Newcomer(home, base, env, log)
    finally:
        # bin/run execs ddz: serve itself, which stops what it started (Ctrl-C's way).
        embedded.stop([embedded.Child("ddz serve", serve, signal.SIGINT)], timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def test_a_whole_hand_with_curl(newcomer):
    done = newcomer.run(blocks("### A whole hand with curl")[0])
    assert "OK" in done.stdout.splitlines()  # bin/run verify hand.json
    assert "event: hand_ended" in done.stdout and "event: settled" in done.stdout
    result = json.loads(re.search(r"^\{\n  \"winner\".*?^\}$", done.stdout, re.S | re.M)[0])
    assert result["winner"] in ("landlord", "farmers") and len(result["net"]) == 4


def test_a_quick_match_against_bots_from_your_own_stream(newcomer):
    (script,) = blocks("### A quick match against bots, from your own stream")
    done = newcomer.run(API_FUNCTION[0] + script)
    assert '"type":"your_turn"' in done.stdout and '"type":"settled"' in done.stdout
    assert '{"status":"seated",' in done.stdout
    # Left in the table's rest after the hand: no second hand was dealt to bob (whose seat
    # the system would have played, at a penalty), one match in its list.
    assert done.stdout.count('"role":') == 1, done.stdout


def test_an_engine_in_the_arena_then_on_the_service_through_the_bridge(newcomer):
    arena, bridge = blocks("### Write a bot")
    done = newcomer.run(arena)
    assert "100 deals, each played twice with the seats swapped (200 hands)" in done.stdout
    assert len(list((newcomer.home / "hands").glob("*.json"))) == 200
    done = newcomer.run(API_FUNCTION[0] + bridge)
    last = done.stderr.rstrip().splitlines()[-1]
    assert re.fullmatch(r"ddz bridge: 1 hand played, net [+-]\d+\.\d\d", last), done.stderr


def test_operators_and_the_console(newcomer):
    add, add_in_a_script, token = blocks("### Operators and the console")
    # The password, typed twice at the prompt of a terminal; without one, the command
    # says to give it on stdin, and the README's next block does.
    typed = [("password for ada: ", PASSWORD), ("again: ", PASSWORD)]
    done = newcomer.run(add, typed)
    assert done.stdout == "operator ada added (admin)\n"
    refused = subprocess.run(
        ["bash", "-c", add],
        cwd=newcomer.home,
        env=newcomer.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        start_new_session=True,
    )
    assert refused.returncode == 2 and "--password-stdin" in refused.stderr, refused.stderr
    done = newcomer.run(add_in_a_script, PASSWORD="otto's own password")
    assert done.stdout == "operator otto added (auditor)\n"
    browser = requests.Session()
    page = browser.get(f"{newcomer.base}/console/sign-in", timeout=10).text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)[1]
    signed_in = browser.post(
        f"{newcomer.base}/console/sign-in",
        data={"csrf_token": csrf, "name": "ada", "password": PASSWORD},
        timeout=10,
    )
    assert signed_in.status_code == 200 and signed_in.url.endswith("/console/matches")
    assert "ada" in signed_in.text and 'id="refused"' not in signed_in.text
    done = newcomer.run(API_FUNCTION[0] + token)
    assert done.stdout.splitlines()[-1] == '{"ok":true,"problems":[]}', done.stdout


def test_the_rules_example_answers_as_shown():
    (example,) = [b for b in blocks("## The `ddz` command") if b.lstrip().startswith("$ ")]
    command, *shown = [line.strip() for line in example.strip().splitlines()]
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command.removeprefix("$ ")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout.splitlines()) == (0, shown), done.stderr


def fake_python(venv: Path, exit_status: int) -> Path:
    """A virtualenv whose Python only writes down what it is asked and answers as pip
    does (thirty packages collected, then built and installed); the file it writes to."""
    asked = venv / "asked"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {asked}\n'
        'for i in $(seq 30); do echo "Collecting package$i"; done\n'
        'echo "Building wheels for collected packages: ddz-server"\n'
        'echo "Installing collected packages: package1"\n'
        f"exit {exit_status}\n"
    )
    python.chmod(0o755)
    return asked


def test_bin_run_s_install_has_the_client_and_tells_its_progress(tmp_path):
    """``bin/run`` installs with ``bin/venv embedded``: the client ``bridge`` needs comes
    with it, and the install says what it does while pip works."""
    asked = fake_python(tmp_path / "venv", 0)
    env = {**os.environ, "DDZ_VENV": str(tmp_path / "venv")}
    done = subprocess.run(
        [ROOT / "bin" / "venv", "embedded"], env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, f"{tmp_path / 'venv'}\n"), done.stderr
    assert f"-e {ROOT}[embedded] -e {ROOT}/clients/python" in asked.read_text()
    assert done.stderr.splitlines()[1:] == [
        "  collecting packages: 25",
        "  building ddz-server and its client",
        "  installing the packages",
        done.stderr.splitlines()[-1],
    ]
    assert re.fullmatch(r"bin/venv: installed in \d+ s", done.stderr.splitlines()[-1])
    assert (tmp_path / "venv" / ".ddz-installed-embedded").exists()
    # Installed: the next run asks pip nothing.
    again = subprocess.run([ROOT / "bin" / "venv", "embedded"], env=env, capture_output=True)
    assert (again.returncode, again.stderr, len(asked.read_text().splitlines())) == (0, b"", 1)


def test_a_failed_install_shows_pip_s_last_words_and_fails(tmp_path):
    fake_python(tmp_path / "venv", 1)
    done = subprocess.run(
        [ROOT / "bin" / "venv", "embedded"],
        env={**os.environ, "DDZ_VENV": str(tmp_path / "venv")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert "Installing collected packages: package1" in done.stderr
    assert done.stderr.endswith(
        f"the install failed (the whole of pip's output: {tmp_path}/venv/install.log)\n"
    )
    assert not (tmp_path / "venv" / ".ddz-installed-embedded").exists()
