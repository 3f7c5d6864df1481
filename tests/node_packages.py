"""Node packages of the repository (clients/typescript, benchmarks/lighthouse) for the
tests that run them: npm, and a package's node_modules as its committed package-lock.json
says, installed with ``npm ci`` again only when that file changes (npm keeps its own cache
of what it downloaded)."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path


def npm() -> str:
    found = shutil.which("npm")
    assert found and shutil.which("node"), (
        "these tests need Node 20 and npm (.ci/run installs them)"
    )
    return found


def installed(package: Path) -> Path:
    """``package`` with its node_modules as its package-lock.json says. The test processes
    of a run share the package's folder: one installs while the others wait."""
    lock = hashlib.sha256((package / "package-lock.json").read_bytes()).hexdigest()
    stamp = package / "node_modules" / ".ddz-lock-sha256"
    name = hashlib.sha256(str(package).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"ddz-node-{name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != lock:
            ci = subprocess.run(
                [npm(), "ci", "--no-audit", "--no-fund", "--prefer-offline"],
                cwd=package,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert ci.returncode == 0, ci.stdout + ci.stderr
            stamp.write_text(lock)
    return package
