"""The engine host: runs a bot author's program (an *engine*) as a subprocess and talks to it
in the engine protocol of docs/bot-protocol.md — JSON lines over its stdin and stdout — with
a time limit on every answer. Whatever goes wrong with the engine is an :class:`EngineError`
whose ``code`` says what: it crashed, it sent garbage, it ran out of time, or the rules
refused its answer. The arena (:mod:`.arena`) and the bridge (:mod:`.bridge`) both host
engines through it.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

#: The protocol version this host speaks (``"protocol"`` in ``hello``).
PROTOCOL = 1
#: How long an engine may take to answer ``hello`` (it may be loading something).
HELLO_SECONDS = 10.0
#: How long an engine may take to exit after ``quit`` before it is killed.
QUIT_SECONDS = 1.0

log = logging.getLogger("ddz.engine")


#: prctl's option that has the kernel signal a process when its parent dies (Linux).
PR_SET_PDEATHSIG = 1


def _orphan_guard() -> Callable[[], None] | None:
    """What the engine's process runs before the engine, so that it never outlives its
    host, even one killed with SIGKILL (no ``finally`` of the host's runs then): on Linux,
    the kernel's SIGKILL when the host dies. None elsewhere, where an engine reading its
    standard input ends at its end of file (the example engine does)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    host = os.getpid()

    def guard() -> None:
        # Between the fork and this call: only what is async-signal-safe (no allocation).
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != host:  # the host died before the guard was set
            os._exit(1)

    return guard


class EngineError(Exception):
    """An engine failed; ``code`` is stable and machine-readable, the message plain."""

    code: ClassVar[str] = "engine_error"


class EngineCrashed(EngineError):
    """The engine exited, or closed its stdout, while the host waited for it."""

    code = "engine_crashed"


class EngineGarbage(EngineError):
    """The engine wrote a line that is no message of the protocol (not JSON, not an
    object, an unknown ``type``, an answer of the wrong kind)."""

    code = "engine_garbage"


class EngineTimeout(EngineError):
    """The engine did not answer within its time."""

    code = "engine_timeout"


class EngineIllegal(EngineError):
    """The engine answered an action the rules refuse now."""

    code = "engine_illegal"


_EOF = object()
#: The longest line an engine may write, in bytes: an answer is a few hundred, a log
#: line rarely more. A longer line, or one that never ends, is garbage rather than memory
#: without bound (a 50 MB line took 240 MB and half a minute).
MAX_LINE = 1 << 20
_TOO_LONG = object()


class Engine:
    """One engine process. :meth:`start` says hello; :meth:`decide` asks for an action;
    :meth:`tell` sends a message that wants no answer; :meth:`close` says quit. After an
    :class:`EngineError` the process is killed (its next line could no longer be told
    apart from a late answer) and the engine is closed: :meth:`start` runs it anew."""

    def __init__(self, command: str, *, host: str = "ddz", options: dict[str, Any] | None = None):
        self.command = command
        self.host = host
        self.options = options or {}
        self.name = command
        self.author: str | None = None
        self.declared: dict[str, Any] = {}
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[object] = queue.Queue()
        #: The lines of the reader's last batch not taken yet.
        self._pending: deque[str] = deque()

    @property
    def running(self) -> bool:
        return self._process is not None

    def start(self) -> dict[str, Any]:
        """Runs the engine and exchanges ``hello`` (then sends ``options``); returns the
        engine's hello."""
        self.close()
        try:
            argv = shlex.split(self.command)
        except ValueError as exc:  # an unclosed quote
            raise EngineCrashed(f"engine {self.command!r} did not start: {exc}") from None
        if not argv:
            raise EngineCrashed("engine '' did not start: the command is empty")
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                # Its own session: Ctrl-C at the host's terminal is the host's to handle
                # (it says quit to the engine), not a second interrupt in the engine.
                start_new_session=True,
                preexec_fn=_orphan_guard(),
            )
        except OSError as exc:
            raise EngineCrashed(f"engine {self.command!r} did not start: {exc}") from None
        self._process, self._lines, self._pending = process, queue.Queue(), deque()
        # A reader thread, so that waiting for a line can time out on every platform. It
        # reads a descriptor of its own: when kill() closes the engine's output, the
        # number could be reused by the next engine's pipe while the thread still reads
        # it, and the two threads would each take a part of the next engine's lines.
        assert process.stdout is not None
        output = os.dup(process.stdout.fileno())
        threading.Thread(
            target=_read_lines, args=(output, self._lines), daemon=True, name="ddz-engine"
        ).start()
        hello = self.ask({"type": "hello", "protocol": PROTOCOL, "host": self.host}, HELLO_SECONDS)
        if hello.get("type") != "hello":
            self._fail(EngineGarbage(f"{self.name}: answered hello with {hello!r}"))
        if hello.get("protocol") != PROTOCOL:
            self._fail(
                EngineGarbage(
                    f"{self.name}: speaks protocol {hello.get('protocol')!r}, not {PROTOCOL}"
                )
            )
        self.name = str(hello.get("name") or self.command)
        self.author = None if hello.get("author") is None else str(hello["author"])
        declared = hello.get("options")
        self.declared = declared if isinstance(declared, dict) else {}
        unknown = set(self.options) - set(self.declared)
        if unknown:
            self._fail(
                EngineGarbage(f"{self.name}: declares no option {', '.join(sorted(unknown))}")
            )
        self.tell({"type": "options", "options": self.options})
        return hello

    def tell(self, message: dict[str, Any]) -> None:
        """Sends a message that wants no answer."""
        process = self._process
        if process is None:
            raise EngineCrashed(f"{self.name}: not running")
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(message, ensure_ascii=False) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._fail(EngineCrashed(f"{self.name}: exited ({self._exit_status()})"))

    def ask(self, message: dict[str, Any], seconds: float) -> dict[str, Any]:
        """Sends ``message`` and returns the engine's answer within ``seconds`` (its ``log``
        lines are logged on the way). A line other than a log written before it was asked
        (a second answer to the last question) is garbage: taken as this answer, it would
        answer a question the engine has not seen."""
        while (early := self._take(None)) is not None:
            self._unasked(early)
        self.tell(message)
        deadline = time.monotonic() + seconds
        while True:
            line = self._take(max(0.001, deadline - time.monotonic()))
            if line is None:
                self._fail(EngineTimeout(f"{self.name}: no answer within {seconds * 1000:.0f} ms"))
            answer = self._message(line)
            if answer is not None:
                # Lines written with the answer (in one write) are judged now: a second
                # answer among them is known at once, not only at the next question.
                while self._pending:
                    self._unasked(self._pending.popleft())
                return answer

    def _unasked(self, line: str) -> None:
        if self._message(line) is not None:
            self._fail(EngineGarbage(f"{self.name}: wrote {line.strip()[:200]!r} unasked"))

    def _take(self, seconds: float | None) -> str | None:
        """The engine's next line, waiting up to ``seconds`` (None: only one already
        read); None if there is none. Its end of output is the engine's crash."""
        if not self._pending:
            try:
                item = (
                    self._lines.get_nowait() if seconds is None else self._lines.get(True, seconds)
                )
            except queue.Empty:
                return None
            if item is _EOF:
                self._fail(EngineCrashed(f"{self.name}: exited ({self._exit_status()})"))
            if item is _TOO_LONG:
                self._fail(EngineGarbage(f"{self.name}: wrote a line longer than {MAX_LINE} bytes"))
            assert isinstance(item, list)
            self._pending.extend(item)
        return self._pending.popleft()

    def _message(self, line: str) -> dict[str, Any] | None:
        """The message of a line the engine wrote; ``None`` for a log line (logged)."""
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            self._fail(EngineGarbage(f"{self.name}: wrote {line.strip()[:200]!r}"))
        if message["type"] == "log":
            log.info("%s: %s", self.name, message.get("message"))
            return None
        return message

    def decide(self, message: dict[str, Any], seconds: float) -> dict[str, Any]:
        """Sends a ``decide`` message and returns the command body of the engine's
        ``action`` answer (its shape is checked; its legality is the rules' to judge)."""
        answer = self.ask(message, seconds)
        action = answer.get("action")
        if answer["type"] != "action" or not isinstance(action, dict):
            self._fail(EngineGarbage(f"{self.name}: answered decide with {answer!r}"))
        return action

    def illegal(self, action: dict[str, Any], reason: str) -> EngineIllegal:
        """Closes the engine for an answer the rules refused; returns the error to raise."""
        error = EngineIllegal(f"{self.name}: answered {json.dumps(action)}, refused: {reason}")
        self.kill()
        return error

    def close(self) -> None:
        """Says quit and waits a moment for the engine to exit (then kills it)."""
        process = self._process
        if process is None:
            return
        try:
            assert process.stdin is not None
            process.stdin.write(json.dumps({"type": "quit"}) + "\n")
            process.stdin.close()
            process.wait(QUIT_SECONDS)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def _exit_status(self) -> str:
        process = self._process
        if process is None:
            return "not running"
        try:
            code = process.wait(QUIT_SECONDS)
        except subprocess.TimeoutExpired:
            return "closed its output"
        return f"exit status {code}"

    def _fail(self, error: EngineError) -> NoReturn:
        self.kill()
        raise error

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_lines(output: int, lines: queue.Queue[object]) -> None:
    """Queues the engine's lines, a batch per read of its output (the descriptor, closed
    at its end): lines written together arrive together, so that an answer written twice
    is seen with the first one."""
    # The bytes as they come (nothing else reads this pipe); each line decoded on its own.
    pending = b""
    try:
        while chunk := os.read(output, 1 << 16):
            *complete, pending = (pending + chunk).split(b"\n")
            if len(pending) > MAX_LINE or any(len(line) > MAX_LINE for line in complete):
                lines.put(_TOO_LONG)
                return
            if complete:
                lines.put([line.decode("utf-8", "replace") for line in complete])
    except (OSError, ValueError):
        pass
    finally:
        os.close(output)
    if pending:
        lines.put([pending.decode("utf-8", "replace")])
    lines.put(_EOF)


def decide_message(document: dict[str, Any], time_left_ms: int) -> dict[str, Any]:
    """The ``decide`` message of a seat's view (the API's seat view document)."""
    return {
        "type": "decide",
        "view": document,
        "actions": document["actions"],
        "time_left_ms": time_left_ms,
    }


def new_hand_message(document: dict[str, Any]) -> dict[str, Any]:
    """The ``new_hand`` message for the seat of ``document`` (its view at the hand's start)."""
    return {
        "type": "new_hand",
        "match_id": document["match_id"],
        "seat": document["seat"],
        "ruleset": document["ruleset"],
        "options": document["options"],
    }


def hand_over_message(document: dict[str, Any]) -> dict[str, Any]:
    """The ``hand_over`` message for the seat of ``document`` (its view once ended)."""
    return {
        "type": "hand_over",
        "match_id": document["match_id"],
        "seat": document["seat"],
        "result": document["result"],
        "view": document,
    }
