"""The worker process: wires its parts and runs them until told to stop.

One execution's way, one direction: the :class:`~.claimer.Claimer` claims it into the
:class:`~.holdings.Holdings`; a slot of the :class:`~.executor.Executor` takes it, asks
the :class:`~.heartbeat.Heartbeat`'s start gate, runs its handler and hands the
:class:`~pgsched.handlers.Outcome` to the :class:`~.recorder.Recorder`, which decides its
record once (:mod:`.outcome`) and writes it, a final one through the
:class:`~.completer.Completer` (group commit).

Every claim carries a lease id; an outcome is stored only while the lease is still held,
so a worker that was declared dead (and whose executions were rescued by the scheduler
leader) can never record over the rescued attempt (docs/reliability.md).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

from ..clock import ClockProbe, DatabaseClock
from ..db import Database
from ..errors import PgschedError
from ..handlers.guardian import Guardian
from ..handlers.process_pool import ProcessPool
from ..handlers.python import PythonHandler
from ..handlers.watchdog import Watchdog
from .claimer import Claimer
from .completer import Completer
from .config import PRIVATE_ENV, WorkerConfig
from .executor import Executor
from .heartbeat import Heartbeat
from .holdings import Holdings
from .recorder import OnFinish, Recorder
from .secret_resolver import SecretResolver

log = logging.getLogger(__name__)


class Worker:
    """One worker: ``run(stop)`` blocks until ``stop`` is set, then drains and returns.

    ``on_finish(row, outcome, tail, final)`` is called after each attempt is recorded, with
    the last lines of its output and the state the execution ended in (None: it will be
    retried; ``"lost"``: the worker stopped it and handed it back, to run again without the
    attempt counting); ``pgsched dev`` prints from it. It may be called from the writer thread.
    """

    def __init__(self, db: Database, config: WorkerConfig, on_finish: OnFinish | None = None):
        self.db = db
        self.config = config
        self.on_finish = on_finish
        self.id: int | None = None
        self.urgent = threading.Event()
        self._done = threading.Event()
        # Instants this worker records (when a slot started an execution, when it ended,
        # its output lines) are the database's, never this host's clock (DESIGN "Time").
        self.clock = DatabaseClock()
        self.holdings = Holdings(config)
        self.hard_stop = self.holdings.hard_stop
        self.claimer = Claimer(db, config, self.holdings, self.clock, self._worker_id)
        self.recorder = Recorder(
            db, config, self.holdings, self.clock, self._worker_id, self.urgent, on_finish
        )
        self.heartbeat = Heartbeat(
            db,
            config,
            self.holdings,
            self.clock,
            self._worker_id,
            self._register,
            self.claimer.liveness,
            lambda: self.claimer.deadline,
            self._done,
        )
        self.executor = Executor(
            config, self.holdings, self.clock, self.heartbeat, self.recorder, self.claimer.poke
        )
        self.executor.secrets = SecretResolver(
            db, config.secret_keys, config.secret_env, config.secret_dir
        )
        self.completer: Completer | None = None
        self.watchdog: Watchdog | None = None

    def _worker_id(self) -> int | None:
        return self.id

    def _register(self) -> None:
        """Register this worker (``worker_register``): a new id, alive from now on."""
        cfg = self.config
        host = socket.gethostname()
        sent = time.monotonic()
        probe = ClockProbe()  # its round trip is unknown yet: the offset is within one
        row = self.db.one(
            "worker_register",
            name=cfg.name or f"{host}:{os.getpid()}",
            hostname=host,
            pid=os.getpid(),
            queues=cfg.queues,
            tenants=None if cfg.tenants is None else list(cfg.tenants),
            concurrency=cfg.concurrency,
            heartbeat_interval=cfg.heartbeat_interval,
            **probe.send(),
        )
        assert row is not None
        self.id = row["id"]
        self.clock.read(row["now"], sent, time.monotonic())
        self.holdings.confirm_alive(sent)

    def run(self, stop: threading.Event) -> None:
        cfg = self.config
        self._register()
        log.info(
            "worker %s started: queues=%s tenants=%s concurrency=%d isolation: %s",
            self.id,
            ",".join(cfg.queues),
            "all" if cfg.tenants is None else ",".join(cfg.tenants),
            cfg.concurrency,
            cfg.isolation.describe(),
        )
        if cfg.secret_keys is not None or cfg.secret_env or cfg.secret_dir:
            log.info(  # ids and names only: which keys open stored secrets, which providers
                "secrets: keys %s; env providers %s; folder %s",
                ", ".join(cfg.secret_keys.ids) if cfg.secret_keys else "none",
                ", ".join(sorted(cfg.secret_env)) or "none",
                cfg.secret_dir or "none",
            )
        guard = _start_guardian(self.id)
        self.completer = self.recorder.completer = Completer(
            self.db, self._worker_id, retry_seconds=cfg.record_retry_seconds
        )
        self.watchdog = Watchdog()
        self.executor.python = PythonHandler(self.watchdog, cfg.allowed_modules, cfg.stop_grace)
        self.executor.lock_dsn = self.db.dsn
        # after the guardian: its token is in os.environ. Every worker has the pool: a task
        # may ask for process isolation on a thread worker (migration 0035); its zygote starts
        # now on a process worker, at the first such task on a thread worker
        env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        self.executor.pool = ProcessPool(
            env, cfg.allowed_modules, cfg.stop_grace, cfg.python_memory_limit
        )
        if cfg.python_isolation == "process":
            self.executor.pool.start()
        self.heartbeat.start()
        self.executor.start()
        try:
            self.claimer.run(stop)
        finally:
            self.claimer.hand_back_buffer()
            self._drain()
            if self.executor.pool is not None:
                self.executor.pool.close()
            if guard is not None:  # what the commands left running goes too
                guard.stop(cfg.stop_grace)
            self.completer.close(cfg.record_retry_seconds + 10)
            self._done.set()
            try:
                self.db.exec("worker_stop", id=self.id)
            except PgschedError as exc:
                log.warning("could not mark worker %s stopped: %s", self.id, exc)
            self.claimer.close()
            log.info("worker %s stopped", self.id)

    def _drain(self) -> None:
        h = self.holdings
        deadline = time.monotonic() + self.config.shutdown_timeout
        if h.running:
            log.info(
                "worker %s: waiting up to %.0fs for %d running execution(s)",
                self.id,
                self.config.shutdown_timeout,
                h.running,
            )
        while h.running and time.monotonic() < deadline and not self.urgent.is_set():
            time.sleep(0.05)
        if h.running:
            log.warning(
                "worker %s: stopping %d execution(s) still running; they go back to the queue",
                self.id,
                h.running,
            )
            h.end_all("handback")
        while h.running or h.recording:  # ended, they record (a retry after a database blip)
            time.sleep(0.02)

    def stop_now(self) -> None:
        """Second signal: stop waiting for running executions; kill their process groups
        (1 s grace) and hand them back to the queue."""
        self.urgent.set()
        if self.completer is not None:
            self.completer.stopping.set()
        self.holdings.end_all("handback")

    def cancel(self, execution_id: int) -> bool:
        """End a running execution of this worker as cancelled (kill its process group);
        False when this worker does not hold it."""
        return self.holdings.cancel(execution_id)


def _start_guardian(worker_id: int | None) -> Guardian | None:
    """Start this worker's guardian (:mod:`pgsched.handlers.guardian`) and say what containment the
    worker's commands have; None when it could not start (then only the PDEATHSIG of each
    command's own child holds)."""
    try:
        guard = Guardian.start()
    except (OSError, RuntimeError) as exc:
        log.warning(
            "worker %s: commands die with the worker only in part: pdeathsig of each command's own "
            "process, no guardian for what it starts (%s)",
            worker_id,
            exc,
        )
        return None
    log.info(
        "worker %s: commands die with the worker: pdeathsig + guardian (pid %s)",
        worker_id,
        guard.pid,
    )
    return guard
