"""The limits' commands as a user runs them, against a real ``pgsched worker``: a queue
paused with ``pgsched queue pause`` is passed over while the worker runs the work of its
other queue, ``execution show``, ``queue list`` and ``status`` say why it waits, and
``queue resume`` starts it within seconds (the worker polls every 30 s; that the resume
notifies the tenant's workers is tests/db/test_limits_api.py's to show: here the worker's
retry of due work it could not claim may come first)."""

from __future__ import annotations

import json

import pytest

from ..helpers import cli, finished, wait_until

pytestmark = pytest.mark.e2e


def test_a_queue_paused_and_resumed_from_the_command_line(dsn, sql, start):
    cli(dsn, "task", "create", "held", "--command", "true", "--queue", "imports")
    cli(dsn, "task", "create", "free", "--command", "true")
    paused = json.loads(
        cli(dsn, "queue", "pause", "imports", "--reason", "deploy", "--json").stdout
    )
    assert paused["paused_by"].startswith("login ") and paused["pause_reason"] == "deploy"
    start("worker", "--queue", "default", "--queue", "imports", "--poll-interval", "30")
    wait_until(
        lambda: sql.execute(
            "SELECT count(*) AS n FROM pgsched.worker WHERE state = 'running'"
        ).fetchone()["n"],
        message="the worker registers",
    )
    held = json.loads(cli(dsn, "task", "trigger", "held", "--json").stdout)["execution_id"]
    free = json.loads(cli(dsn, "task", "trigger", "free", "--json").stdout)["execution_id"]
    assert finished(sql, free)["state"] == "succeeded"  # claimed after `held` was due
    shown = json.loads(cli(dsn, "execution", "show", str(held), "--json").stdout)
    assert shown["state"] == "pending"
    assert shown["wait_reason"] == "queue imports is paused: deploy"
    listed = json.loads(cli(dsn, "queue", "list", "--json").stdout)
    assert [(q["name"], q["ready"], q["waiting"], q["workers"]) for q in listed] == [
        ("default", 0, 0, 1),
        ("imports", 1, 1, 1),
    ]
    assert "queue 'imports' of tenant 'default' is paused" in cli(dsn, "status").stdout
    cli(dsn, "queue", "resume", "imports")
    ran = finished(sql, held, timeout=40)
    assert ran["state"] == "succeeded"
    resumed = sql.execute("SELECT updated_at FROM pgsched.queue WHERE name = 'imports'").fetchone()
    # by the database's clock, from the resume's commit to the start
    assert (ran["started_at"] - resumed["updated_at"]).total_seconds() < 3
