"""The program of a Python handler's child process (:mod:`.process_pool` starts it): it
imports the task modules once, then calls one handler at a time for the worker, and
sends back what each returned. No SQL here, and no login: the child is started with the
worker's environment less every credential variable, and its Python task's locks are
taken by the worker on its behalf (:class:`ChildLocks`).

The worker and the child speak JSON, one object a line, over two pipes (the child's
descriptors ``fd_in`` and ``fd_out``); never pickle, whose loading runs code: the worker
holds the login, the child runs task code. What the handler prints goes to the child's
own standard output and error (pipes the worker reads, line by line, into the attempt's
log), so output of C code and of subprocesses is captured too. The child runs with ``-u``:
each write reaches its pipe at once, before the message that ends the call.

The worker says (one line each): ``{"init": {"path", "parent", "allowed", "preload",
"memory"}}`` once, then ``{"call": {"target", "params" (JSON text), "dag", "start_by"}}``
per call, and ``{"value": ...}`` or ``{"raise": [type, message]}`` to a lock request.
The child says ``{"ready": pid}`` once, then per call ``{"lock": [op, args]}`` (any number)
and one of ``{"result": ...}``, ``{"error": [message, [types]]}`` (and a ``system``
line for the log), ``{"failed":
message}`` (no exception of the task's: its target cannot be resolved, its result is not
JSON), ``{"not_started": true}`` (its start deadline had passed).
"""

from __future__ import annotations

import ctypes
import inspect
import json
import os
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

PR_SET_PDEATHSIG = 1  # prctl(2), <linux/prctl.h>


def encode(message: dict[str, Any]) -> bytes:
    """One protocol line: compact JSON (NaN allowed: the recorder refuses it as today)."""
    return json.dumps(message, separators=(",", ":"), default=str).encode() + b"\n"


class Channel:
    """The child's end of the protocol: ``send`` from any thread, ``receive`` by the one
    that waits (the main loop between calls, a lock request during one)."""

    def __init__(self, fd_in: int, fd_out: int):
        self._in: BinaryIO = os.fdopen(fd_in, "rb")
        self._out = fd_out
        self._write = threading.Lock()
        self.asking = threading.Lock()  # one lock request in flight at a time

    def send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        with self._write:
            view = memoryview(data)
            while view:
                view = view[os.write(self._out, view) :]

    def receive(self) -> dict[str, Any] | None:
        line = self._in.readline()
        return json.loads(line) if line else None


def _lock_types() -> dict[str, type[BaseException]]:
    from .. import errors

    return {
        name: cls
        for name in ("LockTimeout", "ValidationError", "PgschedError")
        if isinstance(cls := getattr(errors, name), type)
    }


def _child_locks(channel: Channel, execution_id: int, tenant: str | None) -> Any:
    """An :class:`~pgsched.worker.execution_locks.ExecutionLocks` whose every call is made
    by the worker, on the execution's own session there (closed when the execution ends,
    however it ends: a killed child loses nothing, the worker still holds the session)."""
    from ..errors import PgschedError
    from ..worker.execution_locks import ExecutionLocks

    class ChildLocks(ExecutionLocks):
        def __init__(self) -> None:  # no session here: the worker has it
            self.dsn, self.execution_id, self.tenant = "", execution_id, tenant
            self._closed = False

        def _ask(self, op: str, *args: Any) -> Any:
            with channel.asking:
                channel.send({"lock": [op, list(args)]})
                reply = channel.receive()
            if reply is None:
                os._exit(0)  # the worker is gone
            if "raise" in reply:
                kind, message = reply["raise"]
                exc: BaseException = PgschedError(message)
                cls = _lock_types().get(kind)
                if cls is not None and cls is not PgschedError:
                    exc = cls.__new__(cls)
                    Exception.__init__(exc, message)
                raise exc
            return reply.get("value")

        def acquire(self, name: str, timeout: float | None = None) -> None:
            self._ask("acquire", name, timeout)

        def try_acquire(self, name: str) -> bool:
            return bool(self._ask("try_acquire", name))

        def release(self, name: str) -> bool:
            return bool(self._ask("release", name))

        def held(self) -> list[dict[str, Any]]:
            return list(self._ask("held"))

        def close(self) -> None:
            pass  # the worker closes the session when the execution ends

    return ChildLocks()


def _call(
    channel: Channel, call: dict[str, Any], functions: dict[str, Any], allowed: tuple[str, ...]
) -> dict[str, Any]:
    from .. import app as app_module
    from ..errors import PgschedError
    from ..worker.execution_locks import bound
    from .python import awaitable_refusal, qualified, takes

    target = call["target"]
    func = functions.get(target)
    if func is None:
        try:
            func = functions[target] = app_module.resolve(target, allowed)
        except PgschedError as exc:
            return {"failed": str(exc)}
    params = json.loads(call["params"])
    if "upstream" in params and call["dag"] and not takes(func, "upstream"):
        params = {k: v for k, v in params.items() if k != "upstream"}
    if time.monotonic() > call["start_by"]:  # CLOCK_MONOTONIC: the worker's clock too
        return {"not_started": True}
    locks = _child_locks(channel, call["execution_id"], call["tenant"])
    try:
        with bound(locks):
            result = func(**params)
        if inspect.isawaitable(result):
            message = awaitable_refusal(func, result)
            types = [qualified(t) for t in TypeError.__mro__]
            return {"error": [f"TypeError: {message}", types], "system": message}
    except BaseException as exc:  # the handler's failure is the attempt's (even SystemExit)
        traceback.print_exc()
        return {
            "error": [f"{type(exc).__name__}: {exc}", [qualified(t) for t in type(exc).__mro__]]
        }
    try:
        json.dumps(result)
    except (TypeError, ValueError) as exc:  # the recorder's words (pgsched.worker.recorder)
        return {"failed": f"result is not JSON ({exc}): {result!r:.200}"}
    return {"result": result}


def _die_with(parent: int) -> None:
    """SIGKILL this process when the worker's thread that started it ends (prctl(2)); if
    the worker is gone already, exit now."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(137)


def main(fd_in: int, fd_out: int) -> None:
    """Serve calls until the worker closes the pipe (or the process is killed)."""
    channel = Channel(fd_in, fd_out)
    hello = channel.receive()
    if hello is None:
        return
    init = hello["init"]
    _die_with(init["parent"])
    sys.path[:] = init["path"]
    allowed = tuple(init["allowed"])
    for module in init["preload"]:
        __import__(module)
    if init["memory"]:
        resource.setrlimit(resource.RLIMIT_AS, (init["memory"], init["memory"]))
    functions: dict[str, Callable[..., Any]] = {}
    channel.send({"ready": os.getpid()})
    while True:
        message = channel.receive()
        if message is None:
            return
        reply = _call(channel, message["call"], functions, allowed)
        sys.stdout.flush()
        sys.stderr.flush()
        channel.send(reply)
