"""What a process of the service holds, written down while it runs: the soak's census
(``benchmarks/soak.py --census``, docs/scaling.md), to tell what grows when memory does.

With ``DDZ_CENSUS_DIR`` set, each API process and each worker appends one JSON line to
``census-<pid>.jsonl`` there every ``DDZ_CENSUS_SECONDS`` (600): its RSS, the C heap and
Python's own allocator, the objects the garbage collector tracks by type, the functions by
name (closures made and kept show there), and the size of each of the rules' and views'
caches. Taken from inside the process, on a thread of its own: counting the objects holds
the process for a few hundred milliseconds, which a soak's percentiles see."""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .memory import heap, rss_kib

#: The rows kept of each tally, the largest first.
TOP = 30


def _caches() -> dict[str, int]:
    """The entries of each module-level cache that grows with the hands a process sees."""
    from service.game import state, views
    from service.game.bot import planning, search
    from service.rules import cards, moves

    sizes = {
        "rules.cards._COUNTED": len(cards._COUNTED),
        "rules.moves._MASKS": len(moves._MASKS),
        "rules.moves._RANKS_IN": len(moves._RANKS_IN),
        "rules.moves._ALL_SEQUENCES": len(moves._ALL_SEQUENCES),
        "rules.moves._PLANES_WITH_PAIRS": len(moves._PLANES_WITH_PAIRS),
        "rules.moves._SIMPLE_IN": sum(map(len, moves._SIMPLE_IN.values())),
        "game.views._INFOS": len(views._INFOS),
        "game.views._HISTORIES": len(views._HISTORIES),
        "game.state._reading": state._reading.cache_info().currsize,
        "bot.planning._PLAN_CACHE": len(planning._PLAN_CACHE),
        "bot.search._whole": search._whole.cache_info().currsize,
        "bot.search._cards": search._cards.cache_info().currsize,
    }
    return sizes


def take() -> dict[str, Any]:
    """One census of this process."""
    from service.store.events import Recent

    began = time.perf_counter()
    kinds: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    for item in gc.get_objects():
        kind = type(item)
        kinds[kind.__name__] += 1
        if kind is _FUNCTION:
            functions[f"{item.__module__}.{item.__qualname__}"] += 1
    recent = [(len(cache._items), cache._size) for cache in list(Recent.every)]
    return {
        "at": time.time(),
        "pid": os.getpid(),
        "rss_kib": rss_kib(),
        "heap": heap(),
        "allocated_blocks": sys.getallocatedblocks(),
        "tracked": sum(kinds.values()),
        "frozen": gc.get_freeze_count(),
        # Garbage in cycles waits for a collection of its generation: how many there were.
        "collections": [generation["collections"] for generation in gc.get_stats()],
        "objects": dict(kinds.most_common(TOP)),
        "functions": dict(functions.most_common(TOP)),
        # The store's and the feed's caches (service.store.events.Recent): (entries, size).
        "recent": sorted(recent, reverse=True),
        "caches": _caches(),
        "seconds": round(time.perf_counter() - began, 3),
    }


_FUNCTION = type(take)


def start_if_asked(role: str) -> None:
    """Writes a census every ``DDZ_CENSUS_SECONDS`` if ``DDZ_CENSUS_DIR`` asks for it."""
    folder = os.environ.get("DDZ_CENSUS_DIR")
    if not folder:
        return
    every = float(os.environ.get("DDZ_CENSUS_SECONDS", "600"))
    path = Path(folder) / f"census-{os.getpid()}.jsonl"

    def write() -> None:
        while True:
            time.sleep(every)
            line = json.dumps({"role": role, **take()})
            with open(path, "a") as out:
                out.write(line + "\n")

    threading.Thread(target=write, name="ddz-census", daemon=True).start()
