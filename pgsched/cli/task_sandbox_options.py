"""``task create`` and ``task update``'s options for a task's own sandbox settings
(migration 0032; docs/security.md, "Sandbox"): ``--limit-cpu``, ``--limit-memory``,
``--limit-nofile``, ``--limit-nproc``, ``--limit-fsize`` over its worker's, and
``--network``. They apply on a worker that isolates its commands (``--isolation``). And
``--python-isolation`` (migration 0035): where its Python handler runs, over its worker's."""

from __future__ import annotations

from typing import Any

import click

from ..handlers.rlimits import parse_count, parse_seconds, parse_size
from ..task_kinds import PYTHON_ISOLATIONS

# option (its dest: task_limit_*) -> TaskSpec field, parser
_LIMITS = {
    "cpu": ("limit_cpu_seconds", parse_seconds, "SECONDS", "CPU seconds (60s, 2m)"),
    "memory": ("limit_memory_bytes", parse_size, "SIZE", "address space per process (1GB)"),
    "nofile": ("limit_nofile", parse_count, "N", "open files per process"),
    "nproc": ("limit_nproc", parse_count, "N", "processes of its user on the host"),
    "fsize": ("limit_fsize_bytes", parse_size, "SIZE", "size of a file written (1GB)"),
}


def sandbox_options(create: bool) -> list[Any]:
    """The options; on update ``worker`` puts a limit back to the worker's."""
    back = "" if create else "; 'worker': the worker's again"
    options = [
        click.option(
            f"--limit-{name}",
            f"task_limit_{name}",
            metavar=metavar,
            help=f"Its commands' limit: {text}, over the worker's --limit-{name}{back}.",
        )
        for name, (_, _, metavar, text) in _LIMITS.items()
    ]
    options.append(
        click.option(
            "--network",
            "task_network",
            type=click.Choice(["allow", "deny", "worker"]),
            help="Whether its sandboxed commands may use the host's network (worker: as the "
            "worker's --allow-network says, the default).",
        )
    )
    options.append(
        click.option(
            "--python-isolation",
            "task_python_isolation",
            type=click.Choice([*PYTHON_ISOLATIONS, "worker"]),
            help="Where its Python handler runs: a child process (killed on its timeout) or "
            "the worker's thread (no fork; a call blocked in C code is abandoned, not "
            "stopped), over the worker's --python-isolation (worker: the worker's, the "
            "default).",
        )
    )
    return options


def sandbox_fields(o: dict[str, Any]) -> dict[str, Any]:
    """TaskSpec fields from the options given ('worker' or 'unlimited': None). Raises
    ValidationError naming the field."""
    out: dict[str, Any] = {}
    for name, (field, parse, _, _) in _LIMITS.items():
        text = o.get(f"task_limit_{name}")
        if text is not None:
            out[field] = None if text.strip().lower() == "worker" else parse(field, text)
    if o.get("task_network") is not None:
        out["network"] = {"allow": True, "deny": False, "worker": None}[o["task_network"]]
    if o.get("task_python_isolation") is not None:
        chosen = o["task_python_isolation"]
        out["python_isolation"] = None if chosen == "worker" else chosen
    return out


NETWORK_WORDS = {True: "allow", False: "deny", None: "worker"}


def shown_sandbox(row: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``task show``'s view of a task's sandbox settings: ``network`` in the words of
    ``--network`` (allow, deny, worker; a command's only), a Python task's
    ``python_isolation`` (``worker`` when it has none of its own), and a note saying where they
    apply when the task has any (a worker that does not isolate ignores them)."""
    if row.get("handler_kind") == "python":  # where it runs: its own, or its worker's
        return {"python_isolation": row.get("python_isolation") or "worker"}, None
    if row.get("handler_kind") not in ("shell", "argv"):
        return {}, None
    limits = [f for f, _, _, _ in _LIMITS.values() if row.get(f) is not None]
    note = None
    if limits or row.get("network") is not None:
        note = (
            "note: its limit_* and network apply only on a worker that isolates its commands "
            "(--isolation rlimits or sandbox; network: sandbox only, rlimits shares the "
            "host's); a worker with --isolation none ignores them and says so in the "
            "execution's log"
        )
    return {"network": NETWORK_WORDS[row.get("network")]}, note
