"""No-op Python tasks for the benchmarks in this folder.

A worker runs them by import path (``noop_tasks:noop``), so it must be started with
``--pythonpath benchmarks`` (``dag_overhead.py`` does that). Both workloads use the same
function, so what is compared is scheduling, not the work.
"""

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
