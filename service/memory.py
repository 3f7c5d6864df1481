"""A process's memory as the C library and the kernel see it, for the census."""

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


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
