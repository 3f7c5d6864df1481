"""The README's walkthrough ("A whole hand with curl", then "A quick match against bots,
from your own stream"), run as written: its shell blocks, with bash, curl and jq, against
the service started as ``ddz serve`` starts it (the API under gunicorn and a worker that
plays the bot seats and settles), on a database and a Redis database of this test's own.
The hand must end, its record verify, the quick match be seated and settled, and no
request get a 4xx or 5xx."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import requests
from servers import OPERATOR_TOKEN, ROOT, ddz_serve, fresh_database

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


def walkthrough(heading: str = "A whole hand with curl") -> str:
    """The fenced ``sh`` block under that heading in README.md."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(f"### {heading}", 1)[1]
    match = re.search(r"^```sh\n(.*?)^```$", section, re.S | re.M)
    assert match, f"README.md: no sh block under {heading!r}"
    return match.group(1)


def test_the_readme_walkthrough_plays_a_whole_hand(postgres_admin_url, own_redis_url, tmp_path):
    for tool in ("bash", "curl", "jq"):
        assert shutil.which(tool), f"the README's walkthrough needs {tool} (.ci/run installs jq)"
    # The quick match follows in the same shell, as the README says (with bots after a
    # second rather than 30).
    script = walkthrough() + walkthrough("A quick match against bots, from your own stream")
    with (
        fresh_database(postgres_admin_url, "ddz_readme") as database_url,
        ddz_serve(database_url, own_redis_url, tmp_path, DDZ_LOBBY_BOTS_AFTER="1") as served,
    ):
        base, log_path = served
        # As a reader in the project's root would, but writing hand.json elsewhere.
        (tmp_path / "bin").symlink_to(ROOT / "bin")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DDZ_TEST_")}
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=tmp_path,
            env={
                **env,
                "DATABASE_URL": database_url,
                "REDIS_URL": own_redis_url,
                "DDZ_OPERATOR_TOKEN": OPERATOR_TOKEN,
                "API": base,
            },
            capture_output=True,
            text=True,
            timeout=600,
        )
        ended = requests.get(
            f"{base}/v1/matches?status=ended",
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        ).json()
    output = f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
    assert result.returncode == 0, output
    assert "failed:" not in result.stderr, output
    assert len(ended["matches"]) == 2, ended  # the hand with curl, the quick match's
    assert "OK" in result.stdout.splitlines(), output  # bin/run verify hand.json
    assert '{"status":"seated",' in result.stdout and '"type":"your_turn"' in result.stdout, output
    assert '"type":"settled"' in result.stdout, output
    assert "event: hand_ended" in result.stdout and "event: settled" in result.stdout, output
    served = re.findall(
        r'"[A-Z]+ (\S+) HTTP/[\d.]+" (\d{3}) ', log_path.read_text(errors="replace")
    )
    assert [(path, status) for path, status in served if int(status) >= 400] == [], (
        "requests refused"
    )
