"""App.wait for an application's login (pgsched_app) of tenant A (migration 0038): it
reads its execution through pgsched.execution_v3 (an app login reads no table), so B's
ids are not found; its own ended execution raises its error at once; a pending one times
out; and the end of one it waits for wakes it by NOTIFY, long before the fallback poll."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from pgsched import App, ExecutionFailed
from pgsched.errors import NotFound, PermissionDenied
from pgsched.waiting import FALLBACK_POLL


def test_an_app_login_waits_on_its_own_tenants_executions_only(dsn, ab):
    a, b, _ = ab
    app = App(a.app)
    for other in (b.pending_id, b.dead_id):
        with pytest.raises(NotFound, match=f"no execution {other} in tenant"):
            app.wait(other, timeout=1)
    with pytest.raises(PermissionDenied, match="acts for tenant"):  # naming B is refused
        app.wait(b.pending_id, timeout=1, tenant=b.name)
    with pytest.raises(ExecutionFailed) as caught:
        app.wait(a.dead_id, timeout=5)
    assert (caught.value.state, caught.value.error) == ("dead", "boom")
    with pytest.raises(TimeoutError, match=f"execution {a.pending_id} did not end within"):
        app.wait(a.pending_id, timeout=0.2)


def test_the_end_of_an_execution_wakes_its_waiter(dsn, ab):
    a, _, _ = ab
    answer: list = []

    def run() -> None:
        try:
            App(a.app).wait(a.pending_id, timeout=30)
        except BaseException as exc:
            answer.append((exc, time.monotonic()))

    waiter = threading.Thread(target=run, daemon=True)
    waiter.start()
    time.sleep(0.5)  # it is listening (a wait on an ended one returns at its first read)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT pgsched.cancel_v1(%s, tenant => %s)", [a.pending_id, a.name])
    ended = time.monotonic()
    waiter.join(30)
    exc, at = answer[0]
    assert isinstance(exc, ExecutionFailed) and exc.state == "cancelled"
    assert at - ended < min(1.0, FALLBACK_POLL / 2)  # woken, not found by the poll
