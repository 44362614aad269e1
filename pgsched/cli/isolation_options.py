"""``pgsched worker``'s options for what its commands run in and as whom: ``--isolation``,
``--run-as``, ``--tenant-run-as``, ``--allow-run-as``, ``--limit-*`` and ``--allow-network``
(docs/security.md, "Sandbox"; :mod:`pgsched.handlers.isolation`, :mod:`.run_as`)."""

from __future__ import annotations

from typing import Any

import click

_LIMITS = (
    ("--limit-cpu", "SECONDS", "CPU seconds per command (60s, 2m): SIGXCPU, then SIGKILL 1 s on."),
    (
        "--limit-memory",
        "SIZE",
        "Address space per command process (512MB, 1GB: RLIMIT_AS, so virtual memory, mapped "
        "files and thread stacks count): allocations past it fail.",
    ),
    ("--limit-nofile", "N", "Open files per command process (RLIMIT_NOFILE)."),
    (
        "--limit-nproc",
        "N",
        "Processes and threads of the commands' user, all of them on the host (RLIMIT_NPROC): "
        "fork fails past it.",
    ),
    ("--limit-fsize", "SIZE", "Size of a file a command writes (RLIMIT_FSIZE): SIGXFSZ."),
)


def isolation_options(command: Any) -> Any:
    """Adds the options; the command gets ``isolation``, ``run_as``, ``tenant_run_as`` and
    ``allow_run_as`` (tuples of the values given), ``limit_cpu`` ...
    ``limit_fsize`` (text, parsed by :meth:`pgsched.handlers.rlimits.Limits.parse`) and
    ``allow_network``."""
    for flag, metavar, text in reversed(_LIMITS):
        command = click.option(flag, metavar=metavar, default=None, help=text)(command)
    command = click.option(
        "--allow-network",
        is_flag=True,
        help="With --isolation sandbox: let its commands use the host's network (default: "
        "none, not even the host's loopback). Refused with rlimits and none, whose commands "
        "always share the host's network.",
    )(command)
    command = click.option(
        "--allow-run-as",
        "allow_run_as",
        metavar="USER[,USER...]",
        multiple=True,
        help="Crontab users a task may name (the user column of `import-crontab --system`): "
        "its commands run as that user, first of all. On an isolating worker a task naming a "
        "user not listed (none is without this option), or root, fails, not retried, and "
        "never runs as someone else. Repeatable; needs --isolation "
        "rlimits or sandbox (without isolation the column is ignored) and a root worker.",
    )(command)
    command = click.option(
        "--tenant-run-as",
        "tenant_run_as",
        metavar="TENANT=USER",
        multiple=True,
        help="Run the commands of TENANT as USER (a name, UID or UID:GID; needs a root "
        "worker; never root), so that tenants' commands cannot read each other's processes "
        "or files; other tenants' commands run as --run-as. Repeatable, a tenant once.",
    )(command)
    command = click.option(
        "--run-as",
        metavar="USER|UID[:GID]",
        default=None,
        help="Run commands as this user (needs a root worker; never root). A root worker "
        "isolating commands without it runs them as nobody. --tenant-run-as and "
        "--allow-run-as come first.",
    )(command)
    return click.option(
        "--isolation",
        type=click.Choice(["none", "rlimits", "sandbox"]),
        default="none",
        show_default=True,
        help="What commands run in. none: as the worker's user, as before. rlimits: another "
        "user, resource limits, an environment and scratch directory of their own. sandbox: "
        "that inside bubblewrap: own PID, mount and network namespaces, the system read-only, "
        "a private /tmp. The worker refuses to start when the machine cannot give it.",
    )(command)
