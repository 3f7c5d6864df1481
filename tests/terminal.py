"""A command run as a person runs it at a terminal: in a session whose controlling
terminal is a pseudo-terminal, also its stdin, on which each answer is typed once the
command has asked for it; no tests here."""

from __future__ import annotations

import os
import pty
import selectors
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Makes the pseudo-terminal on stdin the controlling terminal of the new session (what a
#: terminal emulator does for its shell), then runs the command.
_TAKE_THE_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0);"
    " os.execvp(sys.argv[1], sys.argv[1:])"
)


@dataclass(frozen=True)
class Typed:
    """How the command ended: its exit status, what it wrote on stdout and stderr, and
    what the terminal showed (its prompts, and whatever was echoed of what was typed)."""

    returncode: int
    stdout: str
    stderr: str
    terminal: str


def at_a_terminal(
    argv: Sequence[str],
    typed: Sequence[tuple[str, str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> Typed:
    """``argv`` run at a terminal of its own (stdout and stderr captured apart): for each
    ``(prompt, line)`` of ``typed``, in order, ``line`` is typed once ``prompt`` has
    appeared on the terminal, where ``getpass`` asks. Typing only after the prompt
    matters: ``getpass`` turns the echo off with TCSAFLUSH, which drops whatever was typed
    before. A prompt that never comes is a ``subprocess.TimeoutExpired``."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", _TAKE_THE_TERMINAL, *argv],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=None if env is None else dict(env),
        start_new_session=True,
    )
    os.close(follower)
    assert process.stdout is not None and process.stderr is not None
    output = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    shown = bytearray()
    waiting = list(typed)
    asked_from = 0  # where on the terminal the next prompt is looked for
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as selector:
            for fd in (*output, leader):
                selector.register(fd, selectors.EVENT_READ)
            # Until the command's stdout and stderr close; the terminal's end may stay
            # open (an EIO once its last holder has gone is its end).
            while any(fd in selector.get_map() for fd in output):
                left = deadline - time.monotonic()
                if left <= 0:
                    stdout, stderr = (bytes(o) for o in output.values())
                    raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
                for key, _ in selector.select(left):
                    try:
                        chunk = os.read(key.fd, 65536)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        selector.unregister(key.fd)
                    (shown if key.fd == leader else output[key.fd]).extend(chunk)
                said = shown.decode(errors="replace")
                while waiting and waiting[0][0] in said[asked_from:]:
                    prompt, line = waiting.pop(0)
                    asked_from = said.index(prompt, asked_from) + len(prompt)
                    os.write(leader, line.encode() + b"\n")
        returncode = process.wait(max(deadline - time.monotonic(), 0.1))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()
        os.close(leader)
    stdout, stderr = (o.decode(errors="replace") for o in output.values())
    return Typed(returncode, stdout, stderr, shown.decode(errors="replace"))
