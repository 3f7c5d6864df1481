"""The rules compiled: the deployment's image and ``bin/compiled`` build the rules' hot
modules with mypyc (setup.py, ``DDZ_COMPILE=1``), and those must behave as the sources
the rest of the suite runs. Compiled code checks each parameter's declared type when
called, where the interpreter does not: a declared type narrower than what a caller may
pass (a ``str`` parameter handed ``None`` by a malformed hand record) raises ``TypeError``
there instead of the rules' own error. So the rules' tests run again, against a copy of
the package built by ``bin/compiled``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from servers import ROOT

# Slow: builds the rules with mypyc and runs their tests again (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

#: The rules' own tests, and those of their callers that are quick: the decider, hand
#: records (malformed ones included) and the search's play-out engine.
RULES_TESTS = [
    "tests/test_cards.py",
    "tests/test_combinations.py",
    "tests/test_moves.py",
    "tests/test_vectors.py",
    "tests/test_decider.py",
    "tests/test_record.py",
    "tests/test_playouts.py",
]


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


def test_the_rules_tests_pass_against_the_compiled_rules(compiled_copy):
    ran = in_copy(compiled_copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", *RULES_TESTS)
    assert ran.returncode == 0, ran.stdout[-5000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout and "failed" not in ran.stdout
