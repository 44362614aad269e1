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
import subprocess
import threading
from typing import Any

from .containment import kill_group
from .output import LogSink
from .python_child import encode

log = logging.getLogger(__name__)

# Bytes of output taken as one line when no newline comes (the rest follows as more lines).
LONG_LINE = 64 * 1024


class ChildDied(Exception):
    """The child process ended (or never started) before answering."""


class Child:
    """One child process and the worker's ends of its pipes."""

    def __init__(self, proc: subprocess.Popen[bytes], to_child: int, from_child: int):
        self.proc, self.pid = proc, proc.pid
        self.to_child, self.from_child = to_child, from_child
        assert proc.stdout is not None and proc.stderr is not None
        self.streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        for fd in (from_child, *self.streams):
            os.set_blocking(fd, False)
        self.poller = select.poll()
        for fd in (from_child, *self.streams):
            self.poller.register(fd, select.POLLIN)
        self._messages = bytearray()
        self._decoders = {
            fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in self.streams
        }
        self._partial = dict.fromkeys(self.streams, "")
        self._write = threading.Lock()  # the slot's call and lock replies from other threads
        self.calls = 0

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(encode(message))
        with self._write:
            while data:
                data = data[os.write(self.to_child, data) :]

    def wait(self, timeout: float, sink: LogSink | None) -> list[dict[str, Any]]:
        """Messages that arrived within ``timeout`` seconds (none: nothing came); output
        meanwhile goes to ``sink`` (to the worker's log between calls). Raises ChildDied
        at the end of the message pipe."""
        for fd, _ in self.poller.poll(max(timeout, 0) * 1000):
            if fd in self.streams:
                self._read_output(fd, sink)
        return self._read_messages()

    def _read_messages(self) -> list[dict[str, Any]]:
        while True:
            try:
                data = os.read(self.from_child, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                raise ChildDied
            self._messages += data
        *lines, rest = self._messages.split(b"\n")
        self._messages = bytearray(rest)
        return [json.loads(line) for line in lines]

    def _read_output(self, fd: int, sink: LogSink | None) -> None:
        stream = self.streams[fd]
        while True:
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
                    log.info("python child %s (no execution) %s: %s", self.pid, stream, line)
                else:
                    sink.write(stream, line)
            if not data:
                self.poller.unregister(fd)
                return

    def drain_output(self, sink: LogSink | None) -> None:
        """Take what the child printed so far (already in its pipes) and end its lines."""
        for fd in self.streams:
            with contextlib.suppress(OSError, KeyError):
                self._read_output(fd, sink)
            if self._partial[fd] and sink is not None:
                sink.write(self.streams[fd], self._partial[fd])
            self._partial[fd] = ""

    def close(self, grace: float) -> None:
        """End the child and what it started (its session): SIGTERM, SIGKILL after
        ``grace`` seconds; reaped, its pipes closed."""
        with contextlib.suppress(OSError):
            os.close(self.to_child)
        if self.proc.poll() is None or _session_alive(self.pid):
            kill_group(self.pid, grace, leader=self.proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace + 1)
        for fd in (self.from_child,):
            with contextlib.suppress(OSError):
                os.close(fd)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _session_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def died(proc: subprocess.Popen[bytes]) -> str:
    """How a child ended, for the attempt's error: ``signal 11 (SIGSEGV)``, ``exit status 3``."""
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return "its pipe closed while it still ran"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
        return f"signal {-code} ({name})"
    return f"exit status {code}"
