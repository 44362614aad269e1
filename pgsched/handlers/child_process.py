"""One child process of the Python handlers' pool (:mod:`.process_pool`): the worker's
ends of its pipes, the JSON lines it sends (:mod:`.python_child` says what they are),
what it prints turned into the attempt's log lines, and its end. No SQL here.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import select
import signal
import threading
from collections.abc import Callable
from typing import Any

from .containment import kill_group
from .output import LogSink
from .python_child import encode
from .zygote import Zygote

log = logging.getLogger(__name__)

# Bytes of output taken as one line when no newline comes (the rest follows as more lines).
LONG_LINE = 64 * 1024


class ChildDied(Exception):
    """The child process ended (or never started) before answering."""


class Child:
    """One child process (forked by ``zygote``) and the worker's ends of its pipes: calls
    in (``to_child``), replies out (``from_child``), its standard output and error."""

    def __init__(self, zygote: Zygote) -> None:
        c_in, self.to_child = os.pipe()
        self.from_child, c_out = os.pipe()
        stdout, c_stdout = os.pipe()
        stderr, c_stderr = os.pipe()
        try:
            self.pid = zygote.fork([c_in, c_out, c_stdout, c_stderr])
        except BaseException:
            for fd in (self.to_child, self.from_child, stdout, stderr):
                os.close(fd)
            raise
        finally:
            for fd in (c_in, c_out, c_stdout, c_stderr):
                os.close(fd)
        self.zygote = zygote
        self.streams = {stdout: "stdout", stderr: "stderr"}
        for fd in (self.from_child, *self.streams):
            os.set_blocking(fd, False)
        self.poller = select.poll()
        self.output = select.poll()  # its output alone: what is left, without a read each
        for fd in (self.from_child, *self.streams):
            self.poller.register(fd, select.POLLIN)
        for fd in self.streams:
            self.output.register(fd, select.POLLIN)
        self._messages = bytearray()
        self._decoders = {
            fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in self.streams
        }
        self._partial = dict.fromkeys(self.streams, "")
        self._write = threading.Lock()  # the slot's call and lock replies from other threads
        self.calls = 0
        self.tenant: str | None = None  # the one tenant whose calls it serves (process_pool)
        # every secret its calls were given (a Masker): what it prints later, in another
        # thread or a process it left, may still hold one (attack 19)
        self.held: Callable[[str], str] | None = None
        self.status: int | None = None  # its exit status, once known

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(encode(message))
        with self._write:
            while data:
                data = data[os.write(self.to_child, data) :]

    def wait(self, timeout: float, sink: LogSink | None) -> list[dict[str, Any]]:
        """Messages that arrived within ``timeout`` seconds (none: nothing came); output
        meanwhile goes to ``sink`` (to the worker's log between calls). Raises ChildDied
        at the end of the message pipe."""
        messages: list[dict[str, Any]] = []
        for fd, _ in self.poller.poll(max(timeout, 0) * 1000):
            if fd in self.streams:
                self._read_output(fd, sink)
            else:
                messages = self._read_messages()
        return messages

    def _read_messages(self) -> list[dict[str, Any]]:
        try:
            data = os.read(self.from_child, 1 << 16)
        except BlockingIOError:
            return []
        if not data:
            raise ChildDied
        self._messages += data
        if not data.endswith(b"\n"):
            return []  # the rest of a long message comes with the next read
        *lines, rest = self._messages.split(b"\n")
        self._messages = bytearray(rest)
        return [json.loads(line) for line in lines]

    def _read_output(self, fd: int, sink: LogSink | None) -> None:
        stream = self.streams[fd]
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        text = self._partial[fd] + self._decoders[fd].decode(data, final=not data)
        *lines, rest = text.split("\n")
        while len(rest) > LONG_LINE:
            lines.append(rest[:LONG_LINE])
            rest = rest[LONG_LINE:]
        self._partial[fd] = rest
        for line in lines:
            if sink is None:
                line = self.held(line) if self.held is not None else line
                log.info("python child %s (no execution) %s: %s", self.pid, stream, line)
            else:
                sink.write(stream, line)
        if not data:
            self.poller.unregister(fd)
            self.output.unregister(fd)

    def drain_output(self, sink: LogSink | None) -> None:
        """Take what the child printed so far (already in its pipes) and end its lines."""
        for _ in range(64):  # a child that prints on in another thread goes on next time
            events = self.output.poll(0)
            if not events:
                break
            for fd, _ in events:
                self._read_output(fd, sink)
        for fd, rest in self._partial.items():
            if rest and sink is not None:
                sink.write(self.streams[fd], rest)
            self._partial[fd] = ""

    def close(self, grace: float) -> None:
        """End the child and what it started (its session): SIGTERM, SIGKILL after
        ``grace`` seconds; reaped by the zygote, its pipes closed."""
        with contextlib.suppress(OSError):
            os.close(self.to_child)
        if _session_alive(self.pid):
            kill_group(self.pid, grace)
        if self.status is None:
            self.status = self.zygote.exit_status(self.pid, grace + 1)
        for fd in (self.from_child, *self.streams):
            with contextlib.suppress(OSError):
                os.close(fd)


def _session_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def died(child: Child) -> str:
    """How a child ended, for the attempt's error: ``signal 11 (SIGSEGV)``, ``exit status 3``."""
    code = child.status = child.zygote.exit_status(child.pid, 5)
    if code is None:
        return "its pipe closed, its exit status unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
        return f"signal {-code} ({name})"
    return f"exit status {code}"
