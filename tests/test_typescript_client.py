"""The TypeScript client (clients/typescript) by its own tests, run with Node's test runner
against the service as ``ddz serve`` runs it (the test process's shared service, whose
streams close every 2 s): a hand from the lobby against bots to its settlement over a bad
network (the stream dropped and resumed, a lost answer retried with the same key), the
retry policy, refusals as typed errors, and the committed generated files (the contract's
types, the web table's script) as their sources make them now. Then the package as an app
gets it: the tarball of ``npm pack`` installed in an app outside the repository, the
README's example compiled there with ``tsc --strict`` and run to a settled hand.

Its packages are installed with ``npm ci`` from the committed package-lock.json, again
only when that file changes (npm keeps its own cache of what it downloaded)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import node_packages
import pytest
from servers import OPERATOR_TOKEN, ROOT

# Slow: installs packages and starts Node against a served service.
pytestmark = pytest.mark.slow

PACKAGE = ROOT / "clients" / "typescript"
README = PACKAGE / "README.md"
#: How the README compiles its example in an app: strict, nothing skipped, nothing mapped.
TSC = ["--strict", "--module", "nodenext", "--target", "es2022", "--types", "node"]


def run(command: list[str], cwd: Path, **options) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, **options)


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
    test = run([node_packages.npm(), "test"], installed, env=environment)
    output = test.stdout + test.stderr
    assert test.returncode == 0, output[-6000:]
    assert "# fail 0" in output and "# pass 0" not in output, output[-3000:]


def locked_version(name: str) -> str:
    """The version of a package that package-lock.json installs (npm has it in its cache)."""
    lock = json.loads((PACKAGE / "package-lock.json").read_text())
    return lock["packages"][f"node_modules/{name}"]["version"]


def readme_files() -> dict[str, str]:
    """The README's TypeScript blocks, each by the file its first line names (``// x.ts``)."""
    blocks = re.findall(r"```ts\n(.*?)```", README.read_text(), re.DOTALL)
    files = {}
    for block in blocks:
        named = re.match(r"// (\w+\.ts)\b", block)
        assert named, f"a block of the README names no file: {block[:80]}"
        files[named[1]] = block
    return files


@pytest.fixture
def app(installed, tmp_path_factory) -> Path:
    """An app's folder outside the repository with the package installed as the README
    says (the tarball of ``npm pack``), TypeScript and Node's types beside it."""
    # Packed from a copy of the package's sources (its node_modules linked), so that the
    # build `npm pack` runs (`prepack`) does not write the dist/ that `npm test` reads.
    packed = tmp_path_factory.mktemp("pack")
    sources = packed / "ddz-client"
    shutil.copytree(
        installed, sources, ignore=shutil.ignore_patterns("node_modules", "dist", "build", "*.tgz")
    )
    (sources / "node_modules").symlink_to(installed / "node_modules")
    pack = run([node_packages.npm(), "pack", "--json", "--pack-destination", str(packed)], sources)
    assert pack.returncode == 0, pack.stdout + pack.stderr
    (made,) = json.loads(pack.stdout)
    tarball = packed / made["filename"]
    shipped = {entry["path"] for entry in made["files"]}
    assert "dist/schema.d.ts" in shipped and "dist/index.d.ts" in shipped, shipped
    # The README tells apps to install that very file.
    assert f"/clients/typescript/{made['filename']})" in README.read_text()

    folder = Path(tempfile.mkdtemp(prefix="ddz-app-", dir=tmp_path_factory.getbasetemp()))
    assert not folder.resolve().is_relative_to(ROOT), "the app must not see the repository"
    (folder / "package.json").write_text(
        json.dumps({"name": "ddz-app", "private": True, "type": "module"})
    )
    install = run(
        [
            node_packages.npm(),
            "install",
            "--no-audit",
            "--no-fund",
            "--prefer-offline",
            str(tarball),
            f"typescript@{locked_version('typescript')}",
            f"@types/node@{locked_version('@types/node')}",
        ],
        folder,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return folder


def tsc(app: Path, *files: str, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return run([str(app / "node_modules" / ".bin" / "tsc"), *TSC, *options, *files], app)


#: Commands and offers an app must not be able to write, each on its line of wrong.ts.
WRONG = """\
import type { Command, Schemas } from "ddz-client";
export const fold: Command = { action: "fold" };
export const bid: Command = { action: "bid", value: 4 };
export const report: Command = { action: "report", value: "maybe" };
export const pass: Command = { action: "pass", value: 0 };
export const offered = (action: Schemas["Action"]) => action.choices;
export const show = (action: Schemas["ShowHandAction"]): string => action.choices[0];
"""


def test_an_app_compiles_the_readme_example_strictly_and_plays_a_hand(app, shared_service):
    """The README's files compile as it says (its flags, no skipLibCheck, no path mapping:
    no tsconfig) and play a hand to its settlement; while every line of WRONG but the
    import is refused, even where an app's template skips checking the packages'
    declarations (they are all there: nothing became ``any``)."""
    files = readme_files()
    assert set(files) == {"bot.ts", "main.ts"}
    for name, text in files.items():
        (app / name).write_text(text)
    assert f"npx tsc {' '.join(TSC)} bot.ts main.ts" in README.read_text()
    compiled = tsc(app, "bot.ts", "main.ts")
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    played = run(
        [shutil.which("node") or "node", "main.js"],
        app,
        env={**os.environ, "DDZ_URL": shared_service},
    )
    assert played.returncode == 0, played.stdout + played.stderr
    (net,) = json.loads(played.stdout)
    assert re.fullmatch(r"-?\d+\.\d\d", net), net

    (app / "wrong.ts").write_text(WRONG)
    compiled = tsc(app, "wrong.ts", options=("--noEmit", "--skipLibCheck"))
    errors = re.findall(r"^wrong\.ts\((\d+),\d+\): error TS\d+", compiled.stdout, re.M)
    assert compiled.returncode != 0
    assert sorted({int(line) for line in errors}) == list(range(2, 8)), compiled.stdout


def test_the_readme_names_every_method_of_the_client():
    """Every public method of ``Client`` (src/client.ts) is in the README."""
    source = (PACKAGE / "src" / "client.ts").read_text()
    body = source[source.index("export class Client {") :]
    body = body[: body.index("\n}")]
    methods = set(re.findall(r"^  (?:static )?(?:async )?\*?(\w+)\(", body, re.M))
    methods -= {"constructor"}
    assert {"me", "register", "command", "stream", "watch", "poll"} <= methods
    readme = README.read_text()
    missing = [m for m in sorted(methods) if not re.search(rf"\b{m}\b[`(]", readme)]
    assert missing == [], f"clients/typescript/README.md does not show {missing}"
