"""Free local ports for the servers the tests start; no tests here."""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: Where the kernel takes the local ports of outgoing connections (Linux's default when
#: it cannot be read).
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral() -> tuple[int, int]:
    try:
        low, high = map(int, _EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_port() -> int:
    """A port nothing is bound to now, outside the kernel's ephemeral range: a server that
    binds it seconds later (PostgreSQL after its initdb) cannot find it taken by the local
    end of an outgoing connection, of which a busy test run opens thousands (a port the
    kernel hands out for ``bind(0)`` is in that range)."""
    low, high = _ephemeral()
    below, above = range(max(1024, low - 16384), low), range(high + 1, 65536)
    ports = below if len(below) >= len(above) else above
    for _ in range(200):
        port = random.choice(ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}–{ports.stop - 1} after 200 tries")
