"""Example Python tasks for `pgsched dev`: functions registered with @app.task.

A worker runs them by import path (``hello_tasks:greet``); `pgsched dev` puts this folder
on the import path and serves the ``examples`` queue. Elsewhere:
``pgsched worker --queue examples --pythonpath examples``.
"""

import platform

from pgsched import App

app = App()


# Its own queue: only a worker that can import this module (pgsched dev's) should take it.
@app.task(name="example-python-greet", every="30s", params={"name": "newcomer"}, timeout=10, queue="examples")
def greet(name: str) -> dict:
    """Returns a greeting as the execution's result (stored as JSON)."""
    return {"greeting": f"hello, {name}", "python": platform.python_version()}
