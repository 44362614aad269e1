"""The Python API: declare tasks in code with ``@app.task`` and store them with
:meth:`App.sync`.

::

    app = App()

    @app.task(schedule="*/5 * * * *", timezone="Europe/Berlin", timeout=60)
    def refresh(region: str = "eu") -> dict:
        return {"refreshed": region}

A worker runs such a task by its import path (``"mymodule:refresh"``); only functions
registered with ``@app.task`` are run, never any other importable callable (DESIGN,
"Security"). A task declared in a script run directly (``python tasks.py``) is imported by
workers under the script's file name (``tasks:refresh``). Handlers are plain functions:
``async def`` is refused until async handlers exist.
"""

from __future__ import annotations

import importlib
import inspect
import keyword
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import alerts, migrate
from .db import Database
from .errors import ValidationError
from .stores import tasks
from .taskspec import TaskSpec

REGISTERED = "__pgsched_task__"

log = logging.getLogger(__name__)


class App:
    """A set of Python tasks. ``dsn`` is where :meth:`connect` goes (None: ``PGSCHED_DSN``,
    then the embedded default). Typical start-up: ``app.sync(app.connect())``."""

    def __init__(self, dsn: str | None = None):
        self.dsn = dsn
        self.specs: dict[str, TaskSpec] = {}
        self.webhooks: dict[str, dict[str, str]] = {}  # task name -> alerts.configure fields
        self.dags: dict[str, Any] = {}  # name -> pgsched.dag.Dag

    def task(
        self,
        name: str | None = None,
        *,
        schedule: str | None = None,
        every: str | float | None = None,
        at: str | None = None,
        timezone: str = "UTC",
        timeout: float | None = None,
        max_attempts: int = 1,
        retry_policy: str = "exponential",
        retry_base_seconds: float = 10.0,
        retry_max_seconds: float = 3600.0,
        priority: int = 5,
        queue: str = "default",
        params: dict[str, Any] | None = None,
        tenant: str = "default",
        on_failure: str | None = None,
        on_dlq: str | None = None,
        on_missed: str | None = None,
        # overlap and unique windows (issue 18, items 5-6; docs/limits.md)
        overlap: str = "allow",
        unique: str = "none",
        unique_period: float | None = None,
        unique_per: str = "task",
        python_isolation: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function as a task. Give at most one of ``schedule`` (cron),
        ``every`` (interval: seconds or ``"5m"``) and ``at`` (ISO instant, once); none
        means it runs only when triggered. ``timeout`` is in seconds. The function gets
        the execution's params as keyword arguments and returns a JSON value (the result).
        ``on_failure`` / ``on_dlq`` / ``on_missed``: webhook URLs (docs/observability.md),
        stored with the task when :meth:`sync` creates it. ``overlap`` (``allow``, ``skip``,
        ``queue_one``), ``unique`` (``none``, ``pending``), ``unique_period`` (seconds) and
        ``unique_per`` (``task``, ``key``): the task's overlap policy and unique window.
        ``python_isolation`` (``process``, ``thread``; None: the worker's
        ``--python-isolation``): where the function runs (docs/security.md, "Python handlers").
        """
        hooks = {
            k: v
            for k, v in (("on_failure", on_failure), ("on_dlq", on_dlq), ("on_missed", on_missed))
            if v is not None
        }
        alerts.Alerting(on_failure=on_failure, on_dlq=on_dlq, on_missed=on_missed).validate()
        given = [
            k for k, v in (("schedule", schedule), ("every", every), ("at", at)) if v is not None
        ]
        if len(given) > 1:
            raise ValidationError("schedule", given, "give only one of schedule, every, at")
        kind = {"schedule": "cron", "every": "interval", "at": "once"}.get(
            given[0] if given else "", "none"
        )
        expr = None if kind == "none" else str(schedule or every or at)

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            target = importable_target(func, "python_target", "@app.task")
            spec = TaskSpec(
                name=name or func.__name__,
                handler_kind="python",
                python_target=target,
                schedule_kind=kind,
                schedule=expr,
                timezone=timezone,
                params=dict(params or {}),
                timeout_seconds=timeout,
                max_attempts=max_attempts,
                retry_policy=retry_policy,
                retry_base_seconds=retry_base_seconds,
                retry_max_seconds=retry_max_seconds,
                priority=priority,
                queue=queue,
                tenant=tenant,
                description=(func.__doc__ or "").strip() or None,
                source=f"python:{target.partition(':')[0]}",
                overlap_policy=overlap,
                unique_policy=unique,
                unique_period_seconds=unique_period,
                unique_scope=unique_per,
                python_isolation=python_isolation,
            )
            spec.validate()
            self.specs[spec.name] = spec
            if hooks:
                self.webhooks[spec.name] = hooks
            setattr(func, REGISTERED, spec)
            return func

        return register

    def node(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function that DAG nodes run (``python: module:function`` in a DAG, or
        the function itself in :meth:`dag`), without making it a task of its own. It gets
        its params as keyword arguments, and ``upstream`` (``{node id: result}``) when it
        takes that argument; its return value (JSON) is the node's result."""

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            setattr(func, REGISTERED, importable_target(func, "python", "@app.node"))
            return func

        return register

    def dag(self, definition: dict[str, Any] | str) -> Any:
        """Declare a DAG: a dict in the format of ``docs/dags.md`` (a node's ``python`` may
        be the function itself) or the path of a YAML/JSON file. Validated at once
        (raises :class:`pgsched.dag.DagErrors` naming every problem); :meth:`sync` applies
        it. Returns the validated :class:`pgsched.dag.Dag`."""
        from . import dag as dag_module

        if isinstance(definition, str):
            parsed = dag_module.load(definition)
        else:
            data = dict(definition)
            for n in definition.get("nodes") or []:
                func = n.get("python") if isinstance(n, dict) else None
                if callable(func):  # refused first when async or nested
                    importable_target(func, f"nodes[{n.get('id')}].python", "@app.node")
                if callable(func) and getattr(func, REGISTERED, None) is None:
                    raise ValidationError(
                        f"nodes[{n.get('id')}].python",
                        getattr(func, "__qualname__", func),
                        "is not registered with @app.node or @app.task (workers run nothing else)",
                    )
            data["nodes"] = [
                {
                    **n,
                    "python": importable_target(
                        n["python"], f"nodes[{n.get('id')}].python", "@app.node"
                    ),
                }
                if isinstance(n, dict) and callable(n.get("python"))
                else n
                for n in definition.get("nodes") or []
            ]
            parsed = dag_module.parse(data)
        self.dags[parsed.name] = parsed
        return parsed

    def connect(self) -> Database:
        """A connection pool on ``dsn`` (else ``PGSCHED_DSN``, else the embedded default).
        A database without pgsched's schema (a fresh one) gets it here, as ``pgsched
        migrate`` would; one whose schema is behind or ahead of this code is refused (other
        processes may run on it: upgrade it with ``pgsched migrate``). Raises
        ConnectionFailed, ConfigError, SchemaBehind, SchemaAhead."""
        import os

        dsn = self.dsn or os.environ.get("PGSCHED_DSN")
        if not dsn:
            from . import embedded

            dsn = embedded.start()
        db = Database.connect(dsn)
        try:
            with db.transaction() as tx:
                fresh = migrate.status(tx).applied == []
            if fresh:
                migrate.migrate(dsn)
            with db.transaction() as tx:
                migrate.require_current(tx)
        except BaseException:
            db.close()
            raise
        return db

    def wait(
        self, execution_id: int, timeout: float | None = None, *, tenant: str | None = None
    ) -> Any:
        """Wait for execution ``execution_id`` to end: its result when it succeeded, else
        :class:`~pgsched.waiting.ExecutionFailed` (its ``state`` and ``error``); woken by the
        database's notification of its end (LISTEN, not polling). ``timeout`` seconds
        (None: no limit) then TimeoutError; NotFound for an id the caller's tenant has not.
        ``tenant``: for an installation-wide login (an app login waits in its own)."""
        from . import waiting

        return waiting.wait(waiting.resolve_dsn(self.dsn), execution_id, timeout, tenant)

    async def wait_async(
        self, execution_id: int, timeout: float | None = None, *, tenant: str | None = None
    ) -> Any:
        """:meth:`wait` for asyncio, on psycopg's AsyncConnection."""
        from . import waiting

        dsn = waiting.resolve_dsn(self.dsn)
        return await waiting.wait_async(dsn, execution_id, timeout, tenant)

    def sync(self, db: Database) -> list[str]:
        """Store every registered task that does not exist yet; return the names created.
        Existing tasks of the same name are left as they are; one whose stored schedule,
        zone or target differs from its declaration is logged as a warning (change it with
        ``pgsched task update``). Declared DAGs are applied (``pgsched dag apply``: created
        or updated to match); those created are returned as ``DAG name``."""
        from .stores import dags

        created = []
        for parsed in self.dags.values():
            if dags.apply(db, parsed, source="python").dag == "created":
                created.append(f"DAG {parsed.name}")
        for spec in self.specs.values():
            with db.transaction() as tx:
                made = tasks.create(tx, spec, if_absent=True)
                if made is not None and spec.name in self.webhooks:
                    alerts.configure(tx, spec.name, spec.tenant, **self.webhooks[spec.name])
            if made is not None:
                created.append(spec.name)
                continue
            row = tasks.get(db, spec.name, spec.tenant)
            stored = (
                row["schedule_kind"],
                row["schedule_expr"],
                row["timezone"],
                row["python_target"],
            )
            declared = (spec.schedule_kind, spec.validate().expr, spec.timezone, spec.python_target)
            if stored != declared:
                log.warning(
                    "task %s exists with schedule %s %s (%s), target %s; declared %s %s (%s), target %s. "
                    "sync leaves existing tasks alone: use 'pgsched task update'",
                    spec.name,
                    *stored,
                    *declared,
                )
        return created


def importable_target(func: Callable[..., Any], field: str, decorator: str) -> str:
    """``"module:qualname"``, the path a worker imports ``func`` by. A function of a script
    run directly (module ``__main__``) is found under the script's file name (``python
    tasks.py``: ``tasks``) or the module ``python -m`` ran. Raises ValidationError (naming
    ``field`` and the function) for an ``async def`` function (async handlers are not
    supported yet) and for one no worker could import: nested in another function, or
    defined in an interactive session, ``python -c`` or a script whose file name is not a
    module name."""
    qualname = getattr(func, "__qualname__", None) or repr(func)
    module = getattr(func, "__module__", None) or "?"
    shown = f"{module}:{qualname}"
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        raise ValidationError(
            field,
            shown,
            f"is an async def function: {decorator} does not "
            "support async handlers yet; make it a plain def (it may run its "
            "coroutine with asyncio.run(...) and return the result)",
        )
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        path = getattr(main, "__file__", None)
        stem = Path(path).stem if path else ""
        if spec is not None and spec.name not in ("", "__main__"):
            module = spec.name  # python -m package.module
        elif (
            stem.isidentifier()
            and not keyword.iskeyword(stem)
            and stem not in sys.stdlib_module_names
        ):
            module = stem  # python tasks.py: workers import 'tasks' (their folder, --pythonpath)
        else:
            raise ValidationError(
                field,
                shown,
                "is defined where no worker can import it (an "
                "interactive session, python -c, or a script whose file name is "
                "not a module name): define tasks in a module file such as "
                "tasks.py",
            )
    if "<locals>" in qualname:
        raise ValidationError(
            field,
            shown,
            "is defined inside a function, where no worker can "
            "import it: define it at the top level of its module",
        )
    return f"{module}:{qualname}"


def resolve(target: str, allowed: tuple[str, ...] = ()) -> Callable[..., Any]:
    """Import ``"package.module:function"`` and return the function.

    ``allowed``: module names (and their submodules) a worker may import; when given,
    nothing else is imported at all. Without it, the standard library is never imported
    (importing a module runs its top-level code). Raises ValidationError when the module is
    not allowed, cannot be imported, or the function was not registered with ``@app.task``
    or ``@app.node`` (the worker runs nothing else).
    """
    module_name, _, attr = target.partition(":")
    top = module_name.split(".")[0]
    if allowed and not any(module_name == m or module_name.startswith(m + ".") for m in allowed):
        raise ValidationError(
            "python_target", target, f"is not in this worker's --import list ({', '.join(allowed)})"
        )
    if top in sys.stdlib_module_names:
        raise ValidationError(
            "python_target", target, "is in the standard library, not a module of registered tasks"
        )
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValidationError(
            "python_target", target, f"cannot be imported on this worker: {exc}"
        ) from None
    except BaseException as exc:  # the module's own code failed (even SystemExit): not ours
        raise ValidationError(
            "python_target", target, f"failed while importing: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(obj) or getattr(obj, REGISTERED, None) is None:
        raise ValidationError(
            "python_target", target, "is not a function registered with @app.task (or @app.node)"
        )
    if inspect.iscoroutinefunction(obj) or inspect.isasyncgenfunction(obj):
        raise ValidationError(
            "python_target",
            target,
            "is an async def function: async "
            "handlers are not supported yet; make it a plain def (it may run its "
            "coroutine with asyncio.run(...))",
        )
    return obj
