"""What a worker is told (:class:`WorkerConfig`) and the figures its parts are tuned by.

No statements here: the CLI and the tests build a config alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..db import CONNECT_TIMEOUT
from ..deadline import STATEMENT_DEADLINE
from ..handlers.isolation import Isolation
from ..login import CREDENTIAL_ENV

if TYPE_CHECKING:
    from ..secret_keys import Keyring

# Params larger than this (bytes of JSON) reach a command in a file (PGSCHED_PARAMS_FILE)
# instead of PGSCHED_PARAMS: Linux caps one environment variable at 128 KB (MAX_ARG_STRLEN).
MAX_ENV_PARAMS = 96 * 1024

# Prefetch (executions claimed beyond the free slots) is at most what the slots get through
# in this many seconds, judged from the recent handler durations: enough to cover a claim
# round trip or ten, never long tasks piling up in one worker while another is idle.
PREFETCH_HORIZON = 0.05

# Another slot thread is woken for buffered executions only while they would wait longer
# than this (seconds of handler time per running slot): waking a thread costs more than a
# no-op handler, so very short handlers are run back to back by the threads already awake.
SPREAD_SECONDS = 0.005

# Outcomes waiting for the writer beyond this many take slots away from claims (the
# database is slow or away: stop claiming instead of piling work up).
RECORD_BACKLOG = 256

# A slot starts no buffered execution while the last heartbeat the database answered
# "alive" was sent more than this many heartbeat intervals ago (the leader declares a worker
# dead after worker_dead_after_heartbeats, 3 by default): the worker may have been declared
# dead meanwhile (stopped by SIGSTOP, a long pause, the database away) and its buffer
# rescued, so starting one would run it beside its rescued copy. Slots wait for the next
# heartbeat to tell.
HEARTBEAT_STALE = 2.0

# The exit status of a worker whose claimer stayed stalled after its connection was cut
# (sysexits' EX_SOFTWARE): its supervisor starts it again, the leader rescues its executions.
EXIT_CLAIMER_STALLED = 70

# Successes logged at INFO per second at most; the rest are counted into the next line.
SUCCESS_LINES_PER_SECOND = 20

# pgsched's own settings are not the task's business, nor is its login: every variable that
# carries or locates a credential (pgsched.login.CREDENTIAL_ENV: PGSCHED_DSN, PGPASSWORD...).
PRIVATE_ENV = frozenset({"PGSCHED_HOME", "PGSCHED_TENANT"}) | CREDENTIAL_ENV


# Where a worker runs Python handlers (WorkerConfig.python_isolation, --python-isolation).
PYTHON_ISOLATIONS = ("process", "thread")


@dataclass
class WorkerConfig:
    """``queues`` to serve, of ``tenants`` (a queue is named within its tenant: the worker
    serves each (tenant, queue); None for every tenant, an explicit choice: ``pgsched
    worker --all-tenants``, ``pgsched dev``; ``pgsched.node.worker_tenants`` decides them for
    ``pgsched worker``); ``concurrency`` executions at once; ``poll_interval``,
    ``heartbeat_interval`` and ``kill_grace`` (after a timeout's SIGTERM) in seconds;
    ``stop_grace``: the same after a cancel or a hand-back; ``shutdown_timeout``: how long a
    stopping worker lets running executions finish before killing them and handing them
    back to the queue; ``max_output_lines`` / ``max_output_bytes``: output kept per attempt;
    ``record_retry_seconds``: how long the end of an attempt is retried while the database
    is unreachable; ``prefetch``: executions claimed at most ahead of the free slots (0:
    claim only for free slots); ``statement_deadline``: seconds a statement of the claimer
    (and of the heartbeat, at most one interval) may go without a reply before its
    connection is cut and opened again (0: none; the claimer's are still cut when the worker
    stops, and its liveness still watched); ``python_isolation``: where Python handlers run,
    ``process`` (a pool of child processes, killed on a timeout or stop) or ``thread`` (the
    slot thread: cannot be stopped inside C code; docs/architecture.md, "Worker");
    ``python_memory_limit``: bytes of address space of each such child (None: no limit);
    ``isolation``: what commands run in
    (:mod:`pgsched.handlers.isolation`, checked at start by its ``resolve``);
    ``secret_keys``, ``secret_env``, ``secret_dir``:
    what secret references resolve with (the keys that open stored secrets, None: none
    given; the providers' values by NAME; their folder: pgsched/worker/secret_resolver.py)."""

    queues: list[str] = field(default_factory=lambda: ["default"])
    tenants: tuple[str, ...] | None = ("default",)
    concurrency: int = 4
    poll_interval: float = 2.0
    heartbeat_interval: float = 5.0
    kill_grace: float = 5.0
    stop_grace: float = 0.5
    shutdown_timeout: float = 30.0
    max_output_lines: int = 10_000
    max_output_bytes: int = 10 * 1024 * 1024
    record_retry_seconds: float = 300.0
    allowed_modules: tuple[str, ...] = ()
    name: str | None = None
    prefetch: int = 100
    statement_deadline: float = STATEMENT_DEADLINE
    python_isolation: str = "process"
    python_memory_limit: int | None = None
    isolation: Isolation = field(default_factory=Isolation)
    secret_keys: Keyring | None = None
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)
    secret_dir: str | None = None

    def claimer_limit(self) -> float:
        """Seconds the claimer may go without a turn of its loop before the heartbeat
        finds it stalled: 3 polls, plus the longest one step may take (a statement up to
        its deadline, or a connection attempt up to CONNECT_TIMEOUT)."""
        return 3 * self.poll_interval + max(self.statement_deadline, CONNECT_TIMEOUT)
