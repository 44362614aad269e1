"""A Python handler's child process serves one tenant only (issue 19,
pgsched/handlers/process_pool.py): a worker serving tenants A and B with one slot runs A's
handler, which stores a value in a module global (and leaves its child with it), then B's
handler on the same worker: B's sees no value, and its call ran in another process. A's
next call still finds its child (reuse within a tenant stays)."""

from __future__ import annotations

import json
import textwrap
import uuid

import pytest

from ..helpers import alive, cli, finished

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import os
    from pgsched import App

    app = App()
    STASH = {}

    @app.task()
    def stash(value):
        STASH["value"] = value
        return {"pid": os.getpid()}

    @app.task()
    def peek():
        return {"pid": os.getpid(), "seen": STASH.get("value")}
""")


def _trigger(dsn: str, tenant: str, task: str, value: str | None = None) -> int:
    params = ("--params", json.dumps({"value": value})) if value is not None else ()
    out = cli(dsn, "--tenant", tenant, "task", "trigger", task, *params, "--json").stdout
    return json.loads(out)["execution_id"]


def test_a_child_that_served_tenant_a_never_runs_tenant_bs_handler(dsn, sql, start, tmp_path):
    (tmp_path / "tenanttasks.py").write_text(MODULE)
    tag = uuid.uuid4().hex[:8]
    a, b = f"ta_{tag}", f"tb_{tag}"
    for tenant in (a, b):
        cli(dsn, "tenant", "create", tenant)
        for name in ("stash", "peek"):
            cli(dsn, "--tenant", tenant, "task", "create", name, "--python", f"tenanttasks:{name}")
    worker = start(
        "worker", "--concurrency", "1", "--poll-interval", "0.2", "--pythonpath", str(tmp_path),
        "--tenant", a, "--tenant", b,
    )  # fmt: skip
    secret = "a-only-" + tag
    stored = finished(sql, _trigger(dsn, a, "stash", secret))
    assert stored["state"] == "succeeded", stored
    seen_by_a = finished(sql, _trigger(dsn, a, "peek"))
    assert seen_by_a["result"] == {"pid": stored["result"]["pid"], "seen": secret}  # reused
    seen_by_b = finished(sql, _trigger(dsn, b, "peek"))
    assert seen_by_b["state"] == "succeeded", seen_by_b
    assert seen_by_b["result"]["seen"] is None, seen_by_b["result"]
    assert seen_by_b["result"]["pid"] != stored["result"]["pid"]
    assert alive(seen_by_b["result"]["pid"])
    worker.stop()
