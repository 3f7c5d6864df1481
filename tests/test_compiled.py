"""The rules and the search compiled: the deployment's image and ``bin/compiled`` build
the rules' hot modules and the workers' search (the search, and the bot it plays its
play-outs with) with mypyc (setup.py, ``DDZ_COMPILE=1``), and those must behave as the
sources the rest of the suite runs. Compiled code checks each parameter's declared type when
called, where the interpreter does not: a declared type narrower than what a caller may
pass (a ``str`` parameter handed ``None`` by a malformed hand record) raises ``TypeError``
there instead of the rules' own error. So the rules' and the search's tests run again,
against a copy of the package built by ``bin/compiled``, and the compiled search makes
the same decisions as the sources on the same deals and seeds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from servers import ROOT

# Slow: builds the rules and the search with mypyc and runs their tests again (bin/test
# --fast leaves it out).
pytestmark = pytest.mark.slow

#: The rules' own tests, and those of their callers that are quick: the decider, hand
#: records (malformed ones included); the search's (its play-out engine, the levels) and
#: the bot's it plays out with.
COMPILED_TESTS = [
    "tests/test_cards.py",
    "tests/test_combinations.py",
    "tests/test_moves.py",
    "tests/test_vectors.py",
    "tests/test_decider.py",
    "tests/test_record.py",
    "tests/test_playouts.py",
    "tests/test_levels.py",
    "tests/test_bot.py",
]
#: Left out: how strong the bot is against random play (a third of the bot's tests' time)
#: is measured on the sources; its legal play, compiled, by the rest.
LEFT_OUT = "not test_bot_beats_the_random_baseline"

#: A hand of ``hard`` at every seat, both rulesets, with and without bomb doubling, each
#: searched decision on a fixed number of deals (no clock), leaving the bot's choice on any
#: gain (so that departures are many): every event, and the play-outs of each searched
#: decision.
SEARCHED_HANDS = """
from service.game import MatchSettings
from service.game.bot.levels import NORMAL_STYLE
from service.game.bot.policy import BotPolicy
from service.game.bot.search import SearchPolicy
from service.game.simulate import hand_seed, play_hand

class Counted:
    name = "hard"

    def __init__(self, seed):
        self.search = SearchPolicy(
            seed, budget=None, samples=16, confidence=0.0, base=BotPolicy(style=NORMAL_STYLE)
        )
        self.played = []

    def act(self, view):
        command = self.search.act(view)
        if self.search.rounds:
            self.played.append(self.search.played)
        return command

for ruleset in ("shanghai-platform", "shanghai-local"):
    for doubling in (True, False):
        table = MatchSettings.build(ruleset, bombs_double=doubling)
        seats = [Counted(f"seat{s}") for s in range(4)]
        events, _ = play_hand(table, hand_seed("compiled", 0), seats)
        print(ruleset, doubling, *map(repr, events), sep="\\n")
        print("play-outs", *(seat.played for seat in seats))
"""


@pytest.fixture(scope="module")
def compiled_copy(tmp_path_factory) -> Path:
    """``bin/compiled`` into a directory of the test's, with the tests beside the package
    (run from there, pytest imports the compiled package, not the repository's)."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler to build the compiled rules with")
    out = tmp_path_factory.mktemp("compiled") / "tree"
    built = subprocess.run(
        [str(ROOT / "bin" / "compiled"), str(out)], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert Path(built.stdout.strip()) == out
    shutil.copytree(ROOT / "tests", out / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    return out


def in_copy(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=copy,
        env={**os.environ, "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
    )


def test_the_build_compiles_the_modules_it_names(compiled_copy):
    with open(ROOT / "pyproject.toml", "rb") as f:
        named = tomllib.load(f)["tool"]["ddz"]["compiled"]
    modules = [path.removesuffix(".py").replace("/", ".") for path in named]
    loaded = in_copy(
        compiled_copy,
        "-c",
        f"import importlib; print(*(importlib.import_module(m).__file__ for m in {modules!r}))",
    )
    assert loaded.returncode == 0, loaded.stderr
    files = loaded.stdout.split()
    assert len(files) == len(modules)
    for file in files:
        assert file.startswith(str(compiled_copy)) and file.endswith(".so"), file


def test_the_rules_and_search_tests_pass_against_the_compiled_build(compiled_copy):
    ran = in_copy(
        compiled_copy,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        LEFT_OUT,
        *COMPILED_TESTS,
    )
    assert ran.returncode == 0, ran.stdout[-5000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout and "failed" not in ran.stdout


def test_the_compiled_search_decides_as_the_sources_do(compiled_copy):
    compiled = in_copy(compiled_copy, "-c", SEARCHED_HANDS)
    interpreted = in_copy(ROOT, "-c", SEARCHED_HANDS)
    assert compiled.returncode == 0, compiled.stderr
    assert interpreted.returncode == 0, interpreted.stderr
    # The search searched: play-outs were counted.
    assert any(
        line.startswith("play-outs") and any(c.isdigit() for c in line)
        for line in interpreted.stdout.splitlines()
    )
    assert compiled.stdout == interpreted.stdout
