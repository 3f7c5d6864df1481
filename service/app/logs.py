"""Logs as JSON lines, for the API and the workers alike (docs/operations.md): one object
per line with ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``process`` (the pid) and ``message``, and the ``request_id`` of the
HTTP request or the ``job_id`` of the RQ job being served when the line was written.

No hidden card, token or password is ever written: the code logs none (jobs describe a
play by its kind and card count), and as a second guard every line is scrubbed of bearer
tokens, of anything after ``password``/``token`` in a message and of malformed header
lines beyond their name (gunicorn logs them whole)."""

from __future__ import annotations

import contextvars
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from pythonjsonlogger.orjson import OrjsonFormatter

#: The request or job a line belongs to: {"request_id": ...} or {"job_id": ...}.
CONTEXT: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("ddz_log_context")

_SECRET = re.compile(r"(?i)(bearer\s+|(?:password|token)[\"']?\s*[:=]\s*[\"']?)[^\s\"',&]+")
#: gunicorn's "Invalid HTTP Header: '<the line>'" (and "… header name: …") quotes a
#: malformed header line whole, a credential after its name included: only the name stays.
_BAD_HEADER = re.compile(r"(?i)(invalid HTTP header(?: name)?: (['\"]?))([^\s:'\"]*)([^\n]*)")


@contextmanager
def context(**values: str) -> Iterator[None]:
    """Lines logged inside carry these fields (``request_id=...`` or ``job_id=...``)."""
    token = CONTEXT.set(values)
    try:
        yield
    finally:
        CONTEXT.reset(token)


def scrub(text: str) -> str:
    text = _BAD_HEADER.sub(_header_name_only, text)
    return _SECRET.sub(lambda m: m.group(1) + "[redacted]", text)


def _header_name_only(m: re.Match[str]) -> str:
    start, quote, name, rest = m.groups()
    return m.group(0) if rest == quote else f"{start}{name}{quote} [redacted]"


class Formatter(OrjsonFormatter):
    """orjson, not the json module: a third of the cost, on a line written per request."""

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(process)d %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",  # ISO 8601, UTC
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        log_data.update(CONTEXT.get({}))
        # The message is where a value from outside could land; the other fields are the
        # code's own (route templates, statuses, ids).
        log_data["message"] = scrub(log_data["message"])

    def formatException(self, ei: Any) -> str:  # noqa: N802 (logging's name)
        return scrub(str(super().formatException(ei)))


def handler(stream: IO[str] | None = None) -> logging.Handler:
    out = logging.StreamHandler(stream or sys.stderr)
    out.setFormatter(Formatter())
    return out


def configure(level: int = logging.INFO, stream: IO[str] | None = None) -> None:
    """Every logger of the process writes JSON lines to ``stream`` (stderr)."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler(stream))
    root.setLevel(level)
