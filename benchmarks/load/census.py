"""A census of a live API process, taken from outside while it serves: its objects by
type, the length of every container its modules and objects hold, and the allocator's
arenas. ``gdb`` attaches, runs the probe below inside the process (about a second's
pause) and detaches; the probe writes its figures to a file. benchmarks/soak.py reads it
twice and prints what changed: which caches still grow, and which are full.

Needs ``gdb`` and the right to attach (root, or ``kernel.yama.ptrace_scope`` 0); without
them the census says so and the soak goes on."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

#: The least count of a type, and the least length of a container, that a census notes.
TYPES_FROM, SIZES_FROM = 200, 50
#: Run inside the process: only the standard library, every name its own, nothing left
#: behind. Containers are counted from the modules and the objects of the service.
PROBE = r"""
def _ddz_census(out, stats, TYPES_FROM, SIZES_FROM):
    import collections, gc, json, os, sys
    objects = gc.get_objects()
    types = collections.Counter(type(o).__module__ + "." + type(o).__qualname__ for o in objects)
    ours = ("service", "workers")
    kinds = (dict, set, list, collections.deque)
    sizes = collections.Counter()
    for name, module in list(sys.modules.items()):
        if not name.startswith(ours):
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            try:
                if isinstance(value, kinds):
                    sizes[f"{name}.{attr}"] = len(value)
                elif callable(getattr(value, "cache_info", None)):
                    sizes[f"{name}.{attr}"] = value.cache_info().currsize
            except Exception:
                pass  # a proxy with nothing behind it (Flask's current_app), say
    for o in objects:
        kind = type(o)
        if not kind.__module__.startswith(ours):
            continue
        held = dict(getattr(o, "__dict__", None) or {})
        for slot in getattr(kind, "__slots__", ()) or ():
            if hasattr(o, slot):
                held[slot] = getattr(o, slot)
        for attr, value in held.items():
            if isinstance(value, kinds):
                sizes[f"{kind.__qualname__}.{attr}"] += len(value)
    # The allocator's own figures go to stderr: into a file for the time of the call.
    saved, fd = os.dup(2), os.open(stats, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(fd)
        os.close(saved)
    arenas = None
    with open(stats) as f:
        for line in f:
            if line.startswith("# arenas allocated current"):
                arenas = int(line.split("=")[1].replace(",", ""))
    with open(out, "w") as f:
        json.dump({
            "objects": len(objects),
            "blocks": sys.getallocatedblocks(),
            "arenas": arenas,
            "types": {k: v for k, v in types.items() if v >= TYPES_FROM},
            "sizes": {k: v for k, v in sizes.items() if v >= SIZES_FROM},
        }, f)
"""


def take(pid: int, folder: Path) -> dict[str, Any] | None:
    """The census of process ``pid`` (its files in ``folder``), or None when it could not
    be taken (no gdb, no right to attach, the process gone)."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return None
    stamp = f"{pid}-{time.time():.0f}"
    out, stats, probe = (folder / f"census-{stamp}.{ext}" for ext in ("json", "txt", "py"))
    probe.write_text(
        f"{PROBE}\n_ddz_census({str(out)!r}, {str(stats)!r}, {TYPES_FROM}, {SIZES_FROM})\ndel _ddz_census\n"
    )
    # PyRun_SimpleString runs in __main__ with the interpreter's lock held: the first call
    # takes it (the process may be waiting in epoll without it), the last gives it back.
    run = f'exec(open(\\"{probe}\\").read())'
    subprocess.run(
        [gdb, "-nx", "-batch", "-p", str(pid)]
        + ["-ex", "call (int)PyGILState_Ensure()"]
        + ["-ex", f'call (int)PyRun_SimpleString("{run}")']
        + ["-ex", "call (void)PyGILState_Release($1)"],
        capture_output=True,
        timeout=120,
    )
    if not out.exists():
        return None
    found: dict[str, Any] = json.loads(out.read_text())
    return found


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What changed from one census of a process to the next, a line each: the totals,
    the containers whose length changed, and the types whose count changed most."""
    lines = [
        "; ".join(
            f"{name} {before[name]:,} -> {after[name]:,}"
            for name in ("objects", "blocks", "arenas")
            if before[name] is not None and after[name] is not None
        )
    ]
    for key, least, what in (("sizes", SIZES_FROM, ""), ("types", TYPES_FROM, " objects")):
        a, b = before[key], after[key]
        moved = sorted(set(a) | set(b), key=lambda name: -abs(b.get(name, 0) - a.get(name, 0)))
        for name in moved[: None if key == "sizes" else 8]:
            if a.get(name) != b.get(name):
                lines.append(
                    f"  {name}{what}: {_count(a, name, least)} -> {_count(b, name, least)}"
                )
    return lines


def _count(found: dict[str, int], name: str, least: int) -> str:
    return f"{found[name]:,}" if name in found else f"under {least}"
