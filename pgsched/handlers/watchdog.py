"""Python handlers called in the worker's slot thread itself, and one watchdog thread that
times them out, stops them and flushes their output.

Starting a thread per call cost more than a no-op task itself (a py-spy profile of a
worker draining no-op runs: ``Thread.start`` was the largest single item of the slot
threads). A slot thread now calls the handler directly; the watchdog wakes every
``tick`` seconds (or at the nearest deadline) and, for each call past its timeout or
whose ``stop`` is set, raises :class:`~pgsched.handlers.python.TaskInterrupted` inside it
(CPython's ``PyThreadState_SetAsyncExc``). A call that has not returned ``grace`` seconds
later is abandoned: its outcome is handed to ``on_abandon`` in a new thread (which takes
the slot over) and the stuck thread leaves when the call returns, its result discarded.
"""

from __future__ import annotations

import ctypes
import inspect
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import Outcome, StopSignal
from .output import LogSink, ThreadOutput
from .python import TaskInterrupted, awaitable_refusal, qualified


@dataclass(eq=False, slots=True)
class _Call:
    ident: int
    deadline: float | None
    timeout: float | None
    stop: StopSignal | None
    sink: LogSink
    on_tick: Callable[[], None] | None
    on_abandon: Callable[[Outcome], None]
    grace: float
    reason: str | None = None  # timed_out / stopped, once interrupted
    interrupted_at: float | None = None
    done: bool = False
    abandoned: bool = False
    box: dict[str, Any] = field(default_factory=dict)


def _async_raise(ident: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in thread ``ident`` at its next bytecode; None clears a pending one."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(exc) if exc else None
    )


class Watchdog:
    """One per worker; :meth:`call` runs a handler in the calling thread under watch."""

    def __init__(self, tick: float = 0.2):
        self.tick = tick
        self._lock = threading.Lock()
        self._calls: dict[int, _Call] = {}
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="pgsched-watchdog")
        self._thread.start()

    def call(
        self,
        func: Callable[..., Any],
        params: Mapping[str, Any],
        *,
        timeout: float | None,
        sink: LogSink,
        stop: StopSignal | None,
        on_abandon: Callable[[Outcome], None],
        on_tick: Callable[[], None] | None = None,
        grace: float = 1.0,
    ) -> Outcome | None:
        """Call ``func(**params)`` here; its return value is the result (must be JSON), what
        it prints goes to ``sink``. The outcome (succeeded, failed, timed_out; ``failed`` when
        stopped, for the caller to name), or None when the call was abandoned
        (``on_abandon`` got the outcome, and the caller must leave its slot to the thread
        that runs it)."""
        ident = threading.get_ident()
        c = _Call(
            ident,
            time.monotonic() + timeout if timeout else None,
            timeout,
            stop,
            sink,
            on_tick,
            on_abandon,
            grace,
        )
        with self._lock:
            self._calls[ident] = c
        if timeout and timeout < self.tick:
            self._wake.set()
        try:
            try:
                with ThreadOutput.capture(sink):
                    try:
                        c.box["result"] = func(**params)
                        if inspect.isawaitable(c.box["result"]):
                            _refuse_awaitable(c, func, sink)
                    except TaskInterrupted:
                        c.box["interrupted"] = True
                    except BaseException as exc:  # the handler's failure is the attempt's, not ours
                        c.box["error"] = f"{type(exc).__name__}: {exc}"
                        c.box["types"] = tuple(qualified(t) for t in type(exc).__mro__)
                        for line in traceback.format_exc().splitlines():
                            sink.write("stderr", line)
            finally:
                self._unregister(c)
        except TaskInterrupted:  # delivered after the call had returned: the call is over anyway
            self._unregister(c)
        ThreadOutput._current.sink = None
        if c.abandoned:
            return None
        sink.close()
        return _outcome(c, abandoned=False)

    def _unregister(self, c: _Call) -> None:
        while True:
            try:
                with self._lock:
                    if not c.done:
                        c.done = True
                        self._calls.pop(c.ident, None)
                    if c.interrupted_at is not None:
                        _async_raise(c.ident, None)  # one sent but not delivered yet: cancel it
                return
            except TaskInterrupted:
                continue

    def _loop(self) -> None:
        while True:
            now = time.monotonic()
            abandoned: list[_Call] = []
            with self._lock:
                calls = list(self._calls.values())
                for c in calls:
                    if c.interrupted_at is None:
                        if c.deadline is not None and now >= c.deadline:
                            c.reason = "timed_out"
                        elif c.stop is not None and c.stop.is_set():
                            c.reason = "stopped"
                        if c.reason:
                            c.interrupted_at = now
                            _async_raise(c.ident, TaskInterrupted)
                    elif now >= c.interrupted_at + c.grace:
                        c.done = c.abandoned = True
                        del self._calls[c.ident]
                        abandoned.append(c)
            for c in abandoned:
                c.sink.write(
                    "system",
                    f"the Python call did not return within {c.grace:g}s of being interrupted; "
                    "it was abandoned (it runs on in the background, its result discarded)",
                )
                c.sink.close()
                threading.Thread(
                    target=c.on_abandon,
                    args=(_outcome(c, abandoned=True),),
                    daemon=True,
                    name="pgsched-slot",
                ).start()
            for c in calls:
                if c.on_tick and not c.done:
                    try:
                        c.on_tick()
                    except Exception:
                        pass  # a log flush that fails is retried at the next tick or at the end
            wait = self.tick
            with self._lock:
                for c in self._calls.values():
                    if c.interrupted_at is not None:
                        wait = min(wait, c.interrupted_at + c.grace - now)
                    elif c.deadline is not None:
                        wait = min(wait, c.deadline - now)
            self._wake.wait(max(wait, 0.001))
            self._wake.clear()


def _refuse_awaitable(c: _Call, func: Callable[..., Any], sink: LogSink) -> None:
    """A handler that returned an awaitable has not done its work: the attempt fails as
    with a TypeError (:func:`~pgsched.handlers.python.awaitable_refusal`)."""
    error = awaitable_refusal(func, c.box.pop("result"))
    c.box["error"] = f"TypeError: {error}"
    c.box["types"] = tuple(qualified(t) for t in TypeError.__mro__)
    sink.write("system", error)


def _outcome(c: _Call, abandoned: bool) -> Outcome:
    note = " (abandoned)" if abandoned else ""
    if c.reason == "timed_out":
        return Outcome(
            "timed_out",
            error=f"timed out after {c.timeout:g}s; TaskInterrupted raised in the call" + note,
        )
    if c.reason == "stopped":
        return Outcome("failed", error="stopped; TaskInterrupted raised in the call" + note)
    box = c.box
    if "error" in box:
        return Outcome(
            "failed", error=box["error"], error_type=box["types"][0], error_types=box["types"]
        )
    return Outcome("succeeded", result=box.get("result"))
