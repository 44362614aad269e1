"""The web admin in a real browser: what an operator clicks, and what the database holds
after each click. Screenshots of every page visited go to the artifacts folder."""

from __future__ import annotations

import re

from pgsched import dag as dag_module
from pgsched.stores import dags, tasks
from pgsched.taskspec import TaskSpec

from ..helpers import wait_until
from .conftest import Stack, Visitor

# prints eight lines over about two seconds, after a pause that lets the page open first
LINES = "sleep 0.5; for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.25; done"


def state_of(stack: Stack, ident: int) -> str | None:
    row = stack.one("SELECT state FROM pgsched.execution_all WHERE id = %s", ident)
    return row["state"] if row else None


def test_create_trigger_follow_the_log_pause_and_resume(stack: Stack, visitor: Visitor):
    page = visitor.page
    visitor.shot("dashboard")
    visitor.go("/tasks")
    page.fill("#c-name", "browser-lines")
    page.fill("#c-command", LINES)
    page.fill("#c-tags", "browser demo")
    visitor.shot("tasks-create-form")
    page.click("form.create button[type=submit]")
    page.wait_for_url(re.compile(r"/tasks/browser-lines"))
    row = stack.one(
        "SELECT command, queue, tags, enabled FROM pgsched.task WHERE name = 'browser-lines' "
        "AND deleted_at IS NULL"
    )
    assert row == {
        "command": LINES,
        "queue": "default",
        "tags": ["browser", "demo"],
        "enabled": True,
    }
    visitor.shot("task-created")

    page.click("form[action='/tasks/trigger'] button")
    page.wait_for_selector(".notice")
    ident = int(re.search(r"execution (\d+) is queued", page.inner_text(".notice")).group(1))
    assert (
        stack.one("SELECT trigger FROM pgsched.execution_all WHERE id = %s", ident)["trigger"]
        == "manual"
    )
    visitor.shot("task-triggered")

    visitor.go(f"/executions/{ident}")
    assert page.inner_text("#live") == "live"  # the page follows the log while it runs
    page.wait_for_selector("#log .line", timeout=15_000)
    visitor.shot("execution-running")
    page.wait_for_selector("#log-end:not([hidden])", timeout=20_000)
    assert page.get_attribute("#log-end", "data-state") == "succeeded"
    lines = [line.split(" ", 1)[1] for line in page.inner_text("#log").splitlines()]
    assert lines == [f"line {i}" for i in range(1, 9)]
    assert page.inner_text("#live") == "ended"
    assert page.query_selector("form[action$='/cancel']") is None  # nothing left to cancel
    assert state_of(stack, ident) == "succeeded"
    visitor.shot("execution-ended")

    visitor.go("/tasks/browser-lines")
    page.click("form[action='/tasks/pause'] button")
    page.wait_for_selector("text=Paused: the schedule stops firing")
    assert (
        stack.one("SELECT enabled FROM pgsched.task WHERE name = 'browser-lines'")["enabled"]
        is False
    )
    visitor.shot("task-paused")
    page.click("form[action='/tasks/resume'] button")
    page.wait_for_selector("text=Resumed")
    assert (
        stack.one("SELECT enabled FROM pgsched.task WHERE name = 'browser-lines'")["enabled"]
        is True
    )
    visitor.shot("task-resumed")


def test_cancel_a_running_execution(stack: Stack, visitor: Visitor):
    tasks.create(stack.db, TaskSpec(name="browser-sleeper", command="echo started; sleep 60"))
    ident = tasks.trigger(stack.db, "browser-sleeper")
    wait_until(lambda: state_of(stack, ident) == "running", message="the worker starts it")
    visitor.go(f"/executions/{ident}")
    visitor.page.wait_for_selector("#log .line")
    visitor.shot("running")
    visitor.page.click(f"form[action='/executions/{ident}/cancel'] button")
    visitor.page.wait_for_selector(".notice")
    wait_until(lambda: state_of(stack, ident) == "cancelled", message="the worker stops it")
    attempt = stack.one(
        "SELECT state FROM pgsched.execution_attempt WHERE execution_id = %s", ident
    )
    assert attempt["state"] == "cancelled"
    visitor.go(f"/executions/{ident}")
    assert visitor.page.inner_text("#state") == "cancelled"
    visitor.shot("cancelled")


def test_retry_a_dead_letter(stack: Stack, visitor: Visitor):
    tasks.create(stack.db, TaskSpec(name="browser-failing", command="echo 'no disk' >&2; exit 3"))
    ident = tasks.trigger(stack.db, "browser-failing")
    wait_until(lambda: state_of(stack, ident) == "dead", message="it fails for good")
    visitor.go("/dlq")
    visitor.shot("dlq")
    visitor.page.click(f"form[action='/dlq/{ident}/retry'] button")
    visitor.page.wait_for_selector("text=is queued again with fresh attempts")
    # the same execution runs again (attempt 2) and, failing again, dies again
    wait_until(
        lambda: (
            stack.one("SELECT attempt, state FROM pgsched.execution_all WHERE id = %s", ident)
            == {"attempt": 2, "state": "dead"}
        ),
        message="the retried execution runs again",
    )
    attempts = stack.sql.execute(
        "SELECT attempt, exit_code FROM pgsched.execution_attempt "
        "WHERE execution_id = %s ORDER BY attempt",
        [ident],
    ).fetchall()
    assert attempts == [{"attempt": 1, "exit_code": 3}, {"attempt": 2, "exit_code": 3}]
    visitor.shot("dlq-retried")
    visitor.go(f"/executions/{ident}")
    visitor.shot("dead-execution")

    # retry all: the confirm step shows the count, and what is confirmed is retried
    visitor.go("/dlq")
    visitor.page.click("a[href^='/dlq/retry-all']")
    count = int(visitor.page.get_attribute("input[name=count]", "value"))
    dead = stack.one(
        "SELECT count(*) AS n FROM pgsched.execution_history h JOIN pgsched.task t ON t.id = h.task_id "
        "WHERE h.state = 'dead' AND t.deleted_at IS NULL"
    )["n"]
    assert count == dead >= 1
    visitor.shot("dlq-retry-all-confirm")
    visitor.page.click("form[action='/dlq/retry-all'] button")
    assert visitor.page.inner_text(".notice") == f"Retried {count} dead execution(s)."
    wait_until(
        lambda: (
            stack.one("SELECT attempt, state FROM pgsched.execution_all WHERE id = %s", ident)
            == {"attempt": 3, "state": "dead"}
        ),
        message="retried again by retry all",
    )
    visitor.shot("dlq-retried-all")


def test_open_a_dag_run_and_every_page(stack: Stack, visitor: Visitor):
    data = {
        "name": "browser-etl",
        "nodes": [
            {"id": "extract_orders", "command": "echo orders"},
            {"id": "extract_users", "command": "echo users"},
            {
                "id": "merge",
                "command": "echo merged",
                "depends_on": ["extract_orders", "extract_users"],
            },
            {"id": "report", "command": "echo report", "depends_on": ["merge"]},
            {"id": "broken", "command": "exit 1", "depends_on": ["extract_users"]},
            {"id": "after_broken", "command": "true", "depends_on": ["broken"]},
        ],
    }
    dags.apply(stack.db, dag_module.parse(data))
    visitor.go("/dags/browser-etl")
    visitor.page.click("form[action='/dags/trigger'] button")
    visitor.page.wait_for_url(re.compile(r"/dags/runs/\d+"))
    run_id = int(re.search(r"/dags/runs/(\d+)", visitor.page.url).group(1))
    wait_until(
        lambda: (
            stack.one("SELECT state FROM pgsched.dag_run WHERE id = %s", run_id)["state"]
            not in ("running", "failing")
        ),
        message="the run ends",
    )
    visitor.go(f"/dags/runs/{run_id}")
    states = {
        n.get_attribute("data-node"): n.get_attribute("data-state")
        for n in visitor.page.query_selector_all("svg.dag g.node")
    }
    stored = {
        r["node_id"]: r["state"]
        for r in stack.sql.execute(
            "SELECT node_id, state FROM pgsched.dag_node_run WHERE run_id = %s", [run_id]
        )
    }
    assert states == stored
    assert stored["report"] == "succeeded" and stored["broken"] == "failed"
    assert stored["after_broken"] == "upstream_failed"
    assert len(visitor.page.query_selector_all("svg.dag path[data-edge]")) == 5
    visitor.shot("dag-run")
    for path in (
        "/",
        "/tasks",
        "/executions",
        "/dags",
        "/dags/browser-etl",
        "/dlq",
        "/workers",
        "/scheduler",
    ):
        visitor.go(path)
        assert visitor.page.query_selector("main h1") is not None, path
        visitor.shot(path.strip("/").replace("/", "-") or "dashboard")
