"""A process's memory as the C library sees it: what the census reads, and the free
memory an API process gives back after its full collections (service/gunicorn_conf.py)."""

from __future__ import annotations

import ctypes
import ctypes.util


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except OSError:
        return None


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap() -> dict[str, int]:
    """glibc's heap: bytes taken from the system (``arena``, ``hblkhd`` for the mapped
    blocks), in use (``uordblks``) and free inside it (``fordblks``); empty elsewhere."""
    mallinfo2 = getattr(_libc(), "mallinfo2", None)
    if mallinfo2 is None:
        return {}
    mallinfo2.restype = _MallInfo2
    found = mallinfo2()
    return {name: getattr(found, name) for name in ("arena", "hblkhd", "uordblks", "fordblks")}


def give_back() -> bool:
    """Returns the free pages of glibc's heap to the system (``malloc_trim``): freed
    memory otherwise stays counted in the process's RSS, at the peak of its busiest
    moment. False where the C library has no such call."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
