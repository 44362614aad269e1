"""The program of the worker's zygote and of the Python handlers' children it forks
(:mod:`.zygote`, :mod:`.process_pool`): the zygote imports the task modules once and
forks; each child calls one handler at a time for the worker, and sends back what each
returned. No SQL here, and no login: the zygote is started with the worker's environment
less every credential variable, and a Python task's locks are taken by the worker on its
behalf (``ChildLocks``).

The worker and a child speak JSON, one object a line, over two pipes (the child's
descriptors ``fd_in`` and ``fd_out``); never pickle, whose loading runs code: the worker
holds the login, the child runs task code. What the handler prints goes to the child's
own standard output and error (pipes the worker reads, line by line, into the attempt's
log), so output of C code and of subprocesses is captured too. The interpreter runs with
``-u``: each write reaches its pipe at once, before the message that ends the call.

The zygote is told ``{"init": {"path", "parent", "allowed", "preload", "memory"}}`` once
(on its socket, one message a datagram) and answers ``{"ready": pid}``; then each request
carries a child's four descriptors (SCM_RIGHTS) and is answered ``{"pid": pid}``; a child
reaped is told ``{"exit": pid, "status": code}``. A child is told ``{"call": {"target",
"params" (JSON text), "dag", "start_by", "execution_id", "tenant", "attempt",
"scheduled_at", "task"}}`` per call, and ``{"value": ...}`` or ``{"raise": [type,
message]}`` to a lock request. It says per call ``{"lock": [op, args]}``, ``{"progress":
[fraction, message]}`` and ``{"log": line}`` (the task's context, :mod:`pgsched.context`;
any number) and one of ``{"result": ...}``, ``{"error":
[message, [types]]}`` (and a ``system`` line for the log), both with ``took`` (the seconds
the handler ran, measured here), ``{"failed": message}`` (no
exception of the task's: its target cannot be resolved, its result is not JSON),
``{"not_started": true}`` (its start deadline had passed).
"""

from __future__ import annotations

import codecs
import ctypes
import importlib
import inspect
import io
import json
import os
import resource
import signal
import socket
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


def _child_locks(channel: Channel) -> Any:
    """An :class:`~pgsched.worker.execution_locks.ExecutionLocks` whose every call is made
    by the worker, on the execution's own session there (closed when the execution ends,
    however it ends: a killed child loses nothing, the worker still holds the session).
    One per child; each call sets its ``execution_id`` and ``tenant``."""
    from ..errors import PgschedError
    from ..worker.execution_locks import ExecutionLocks

    class ChildLocks(ExecutionLocks):
        def __init__(self) -> None:  # no session here: the worker has it
            self.dsn, self.execution_id, self.tenant = "", 0, None
            self._closed = False
            self.channel = channel  # also the task context's way to the worker

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


def _context(channel: Channel, call: dict[str, Any]) -> Any:
    """The handler's context: its progress (at most 10 reports a second) and log lines
    go to the worker over the protocol pipe, which writes them (no login here)."""
    from .. import context

    return context.Context(
        execution_id=call["execution_id"],
        attempt=call.get("attempt") or 0,
        scheduled_at=context.utc(call.get("scheduled_at")),
        tenant=call.get("tenant"),
        task_name=call.get("task") or "",
        report=lambda fraction, message: channel.send({"progress": [fraction, message]}),
        write_line=lambda line: channel.send({"log": line}),
        min_interval=0.1,
    )


def _call(
    locks: Any, call: dict[str, Any], functions: dict[str, Any], allowed: tuple[str, ...]
) -> dict[str, Any]:
    from .. import app as app_module
    from .. import context
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
    ctx = None
    if context.wants_context(func):
        if context.PARAMETER in params:
            return {"failed": context.clashing(target)}
        params[context.PARAMETER] = ctx = _context(locks.channel, call)
    if time.monotonic() > call["start_by"]:  # CLOCK_MONOTONIC: the worker's clock too
        return {"not_started": True}
    locks.execution_id, locks.tenant = call["execution_id"], call["tenant"]
    began = time.monotonic()
    try:
        with bound(locks):
            try:
                result = func(**params)
            finally:
                if ctx is not None:
                    ctx.flush()  # its last progress reaches the worker before the outcome
        if inspect.isawaitable(result):
            message = awaitable_refusal(func, result)
            types = [qualified(t) for t in TypeError.__mro__]
            return {"error": [f"TypeError: {message}", types], "system": message}
    except BaseException as exc:  # the handler's failure is the attempt's (even SystemExit)
        took = time.monotonic() - began
        traceback.print_exc()
        return {
            "error": [f"{type(exc).__name__}: {exc}", [qualified(t) for t in type(exc).__mro__]],
            "took": took,
        }
    took = time.monotonic() - began
    if result is None:
        return {"result": None, "took": took}
    try:
        json.dumps(result)
    except (TypeError, ValueError) as exc:  # the recorder's words (pgsched.worker.recorder)
        return {"failed": f"result is not JSON ({exc}): {result!r:.200}"}
    return {"result": result, "took": took}


def _die_with(parent: int) -> None:
    """SIGKILL this process when the thread that started it ends (prctl(2)); if its parent
    is gone already, exit now."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(137)


def _replace_unencodable(exc: UnicodeError) -> tuple[bytes, int]:
    """A codec error handler: what UTF-8 cannot encode (a lone surrogate, valid in a str)
    becomes U+FFFD, one per character, instead of raising in the handler's print. As
    bytes: CPython's UTF-8 encoder takes a str replacement only when it is ASCII."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "\ufffd".encode() * (exc.end - exc.start), exc.end


_UNENCODABLE = "pgsched.unencodable"
codecs.register_error(_UNENCODABLE, _replace_unencodable)


def serve(fd_in: int, fd_out: int, allowed: tuple[str, ...]) -> None:
    """Serve calls until the worker closes the pipe (or the process is killed)."""
    channel = Channel(fd_in, fd_out)
    functions: dict[str, Callable[..., Any]] = {}
    locks = _child_locks(channel)
    while True:
        message = channel.receive()
        if message is None:
            return
        reply = _call(locks, message["call"], functions, allowed)
        sys.stdout.flush()
        sys.stderr.flush()
        channel.send(reply)


def _child(sock: socket.socket, fds: list[int], init: dict[str, Any]) -> None:
    """In a child just forked by the zygote: its own session, its output on its pipes,
    dying with the zygote; then its calls. Never returns."""
    code = 0
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        zygote = os.getppid()
        sock.close()
        fd_in, fd_out, out, err = fds
        os.setsid()  # its own session and group: a kill ends what it started too
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        _die_with(zygote)
        # its own text streams on the pipes, line by line (so a line is logged as printed);
        # a lone surrogate prints as U+FFFD, as the thread mode's capture stores it
        sys.stdout, sys.stderr = (
            io.TextIOWrapper(
                io.FileIO(fd, "w", closefd=False),
                encoding="utf-8",
                errors=_UNENCODABLE,
                line_buffering=True,
            )
            for fd in (1, 2)
        )
        if init["memory"]:
            resource.setrlimit(resource.RLIMIT_AS, (init["memory"], init["memory"]))
        serve(fd_in, fd_out, tuple(init["allowed"]))
    except BaseException:
        traceback.print_exc()
        code = 70
    finally:
        os._exit(code)


def main(sock_fd: int) -> None:
    """The zygote: imports pgsched's handler code and the ``--import`` modules once, then
    forks a child per request (the child's four descriptors come with it, SCM_RIGHTS)
    and tells the worker each child's pid and, when it is reaped, how it ended
    (``{"exit": pid, "status": code}``, negative for a signal). Single-threaded, holding
    no connection: forking it is safe, which forking the worker is not."""
    sock = socket.socket(fileno=sock_fd)
    hello = sock.recv(1 << 20)
    if not hello:
        return
    init = json.loads(hello)["init"]
    _die_with(init["parent"])
    sys.path[:] = init["path"]
    from .. import app  # noqa: F401  (what every task module imports: loaded once, here)
    from ..worker import execution_locks  # noqa: F401
    from . import python  # noqa: F401

    for module in init["preload"]:
        importlib.import_module(module)

    def reap(_signum: int, _frame: Any) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            sock.send(encode({"exit": pid, "status": os.waitstatus_to_exitcode(status)}))

    signal.signal(signal.SIGCHLD, reap)
    sock.send(encode({"ready": os.getpid()}))
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1024, 4)
        if not message:
            return
        pid = os.fork()
        if pid == 0:
            _child(sock, fds, init)
        for fd in fds:
            os.close(fd)
        sock.send(encode({"pid": pid}))
