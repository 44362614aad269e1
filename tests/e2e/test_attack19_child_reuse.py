"""Attack 19 on a Python handler's child process reused by the next call (issue 19): the
first call is given a secret and leaves a thread that prints it on after the call returned,
while the same child serves the next execution. Its lines then arrive between calls (the
worker's own log) and during the next call (that execution's log, masked with the next
call's secrets only). The secure outcome: the value is nowhere in the database nor in the
worker's log; the mask is in the next execution's output."""

from __future__ import annotations

import base64
import os
import secrets
import textwrap

import pytest

from pgsched.secret_refs import Reference, mask_text

from ..helpers import cli, finished, trigger
from .test_secrets_processes import _log, _rows_holding, _secret_set

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import threading, time
    from pgsched import App

    app = App()

    @app.task()
    def leak(pw):
        def later():
            for _ in range(60):  # 6 s: between the calls and all through the next one
                time.sleep(0.1)
                print("late", pw, flush=True)
        threading.Thread(target=later, daemon=True).start()
        return {}

    @app.task()
    def next_call():
        time.sleep(2)
        return {}
""")


def test_attack19_a_reused_childs_leftover_output_is_masked_in_the_next_call(
    dsn, sql, start, tmp_path
):
    value = "pw-" + secrets.token_hex(12)
    key = base64.b64encode(os.urandom(32)).decode()
    (tmp_path / "reusetasks.py").write_text(MODULE)
    _secret_set(dsn, "api-pw", value, {"PGSCHED_SECRET_KEY": key})
    cli(dsn, "task", "create", "leak", "--python", "reusetasks:leak",
        "--params", '{"pw": "{{secret:api-pw}}"}')  # fmt: skip
    cli(dsn, "task", "create", "next_call", "--python", "reusetasks:next_call")
    worker = start(
        "worker", "--concurrency", "1", "--poll-interval", "0.2", "--pythonpath", str(tmp_path),
        env={"PGSCHED_SECRET_KEY": key},
    )  # fmt: skip
    first = trigger(dsn, "leak")
    assert finished(sql, first)["state"] == "succeeded"
    after = trigger(dsn, "next_call")
    assert finished(sql, after)["state"] == "succeeded"
    mask = mask_text(Reference("db", "api-pw"))
    assert f"late {mask}" in _log(sql, after)  # the attack ran: its lines reached the next call
    assert _rows_holding(sql, value) == []
    worker.stop()
    assert value not in worker.output
