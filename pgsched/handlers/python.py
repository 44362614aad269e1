"""Python handlers: a function of the application (``python_target``), called in the
worker's slot thread under :mod:`.watchdog` (timeouts and stops raise
:class:`TaskInterrupted` in the call). Its start deadline is checked by the call itself,
the last thing before the function's first line (:func:`guarded`). No SQL here.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import app as app_module
from .. import context
from ..errors import PgschedError
from . import Outcome, StopSignal
from .output import LogSink

if TYPE_CHECKING:
    from .watchdog import Watchdog


class TaskInterrupted(BaseException):
    """Raised inside a Python task's call when its timeout passes or it is cancelled (or the
    worker stops): a BaseException, so ``except Exception`` in the task does not swallow
    it. Python delivers it at the call's next bytecode; a call blocked inside C code (a
    long ``time.sleep``, a socket read) sees it only when that returns."""


def qualified(cls: type) -> str:
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


# What a handler returns, and a guarded Python call returns, for an execution that was not
# started (its start could not be proven, or its deadline passed at the call).
NOT_STARTED = Outcome("failed", error="not started")


def guarded(func: Callable[..., Any], start_by: float) -> Callable[..., Any]:
    """``func``, called only while ``start_by`` (CLOCK_MONOTONIC seconds) has not passed:
    the check is the last thing before the handler's first line, in the call itself (a
    worker frozen after its start was proven would otherwise wake and start it late). Past
    it, the call returns NOT_STARTED and ``func`` never ran."""

    @functools.wraps(func)  # its name stays the handler's (errors name it)
    def call(**params: Any) -> Any:
        if time.monotonic() > start_by:
            return NOT_STARTED
        return func(**params)

    return call


def awaitable_refusal(func: Any, awaitable: Any) -> str:
    """Why a handler that returned ``awaitable`` (a coroutine, or another awaitable: a sync
    wrapper around an ``async def``) failed; the awaitable is closed unrun (else Python
    warns it was never awaited when it is freed)."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
    name = getattr(func, "__qualname__", repr(func))
    return (
        f"{name} returned {type(awaitable).__name__} object instead of a result: async "
        "handlers are not supported yet; make it a plain def that runs the coroutine, e.g. "
        "return asyncio.run(...)"
    )


def takes(func: Any, name: str) -> bool:
    """Whether ``func`` accepts a keyword argument ``name`` (by name or ``**kwargs``). A DAG
    node's function gets ``upstream`` (its upstream nodes' results) only if it takes it."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def thread_context(row: dict[str, Any], sink: LogSink) -> context.Context:
    """The context of a call in the worker's slot thread: its progress and log lines go
    straight to the attempt's sink (the worker writes them at its next flush)."""
    return context.Context(
        execution_id=row["id"],
        attempt=row["attempt"],
        scheduled_at=context.utc(row.get("scheduled_at")),
        tenant=row.get("tenant"),
        task_name=row["task_name"],
        report=sink.report,
        write_line=lambda line: sink.write("stderr", line),
    )


class PythonHandler:
    """Calls the Python handlers of one worker: each ``python_target`` resolved once
    (:func:`pgsched.app.resolve`, limited to ``allowed_modules``), then called under
    ``watchdog`` with ``grace`` seconds for a stopped call to return."""

    def __init__(self, watchdog: Watchdog, allowed_modules: tuple[str, ...], grace: float) -> None:
        self.watchdog, self.allowed_modules, self.grace = watchdog, allowed_modules, grace
        self._functions: dict[
            str, Callable[..., Any]
        ] = {}  # python_target -> function, once resolved

    def run(
        self,
        row: dict[str, Any],
        sink: LogSink,
        stop: StopSignal,
        start_by: Callable[[], float | None],
        on_tick: Callable[[], None],
        on_abandon: Callable[[Outcome], None],
        params: dict[str, Any] | None = None,
    ) -> Outcome | None:
        """One attempt of ``row`` (an ``execution_claim`` row; ``params`` JSON text). Before
        each call ``start_by()`` gives the CLOCK_MONOTONIC instant it may start by, or None
        (NOT_STARTED is returned). None: the call was abandoned after its stop
        (``on_abandon`` gets its outcome in a new thread). ``params``: the call's, when the
        worker decoded them already (its secret references resolved), else the row's."""
        if params is None:
            params = json.loads(row["params"])  # JSON text (execution_claim): decoded by the slot
        func = self._functions.get(row["python_target"])
        if func is None:
            try:
                func = app_module.resolve(row["python_target"], self.allowed_modules)
            except PgschedError as exc:
                return Outcome("failed", error=str(exc))
            self._functions[row["python_target"]] = func
        if (
            "upstream" in params
            and row.get("dag_run_id") is not None
            and not takes(func, "upstream")
        ):
            params = {k: v for k, v in params.items() if k != "upstream"}
        if context.wants_context(func):
            if context.PARAMETER in params:
                return Outcome("failed", error=context.clashing(row["python_target"]))
            params = {**params, context.PARAMETER: thread_context(row, sink)}
        while True:
            deadline = start_by()
            if deadline is None:
                return NOT_STARTED
            outcome = self.watchdog.call(
                guarded(func, deadline),
                params,
                timeout=row["timeout_seconds"],
                sink=sink,
                stop=stop,
                on_tick=on_tick,
                grace=self.grace,
                on_abandon=on_abandon,
            )
            if outcome is None or outcome.result is not NOT_STARTED:
                return outcome  # (the sentinel is returned only by the guard, never stored)
