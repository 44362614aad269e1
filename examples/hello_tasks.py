"""Example Python tasks for `pgsched dev`: functions registered with @app.task.

A worker runs them by import path (``hello_tasks:greet``); `pgsched dev` puts this folder
on the import path. Elsewhere, make the module importable (PYTHONPATH) on the workers.
"""

import platform

from pgsched import App

app = App()


@app.task(name="example-python-greet", every="30s", params={"name": "newcomer"}, timeout=10)
def greet(name: str) -> dict:
    """Returns a greeting as the execution's result (stored as JSON)."""
    return {"greeting": f"hello, {name}", "python": platform.python_version()}
