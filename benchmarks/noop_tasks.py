"""No-op Python tasks for the benchmarks in this folder.

A worker runs them by import path (``noop_tasks:noop``), so it must be started with
``--pythonpath benchmarks`` (``dag_overhead.py`` and ``run.py`` do that). Every workload
uses the same no-op functions, so what is compared is scheduling, not the work.
"""

import time

from pgsched import App

app = App()


@app.task(name="bench-noop")
def noop() -> None:
    """Does nothing: the plain executions and every DAG node run this."""
    return


@app.task(name="bench-warmup")
def warmup() -> None:
    """Does nothing either: run before the clock starts, so that the worker has imported
    this module and opened its pool connections."""
    return


@app.task(name="bench-job")
def job(seq: int = 0) -> None:
    """Does nothing with its one parameter: the runs of ``run.py``'s enqueue and drain
    parts carry a sequence number, as the peers' jobs do."""
    return


@app.task(name="bench-stamp")
def stamp(seq: int = 0) -> float:
    """Returns the worker's clock when the call started (``time.time()``), stored as the
    execution's result: ``run.py``'s latency part subtracts the enqueue time from it."""
    return time.time()


@app.task(name="bench-sleep")
def sleep_10ms(seq: int = 0) -> None:
    """Sleeps 10 ms (a handler that waits, e.g. on I/O): ``python_isolation.py`` drains it
    with Python handlers in child processes and in threads."""
    time.sleep(0.01)
