"""``pgsched execution …``: list and inspect executions and their logs."""

from __future__ import annotations

import time

import click

from ..lifecycle import ExecutionState
from ..stores import executions, limits
from .output import fmt, json_line, print_fields, print_json, table
from .root import Context, main, pass_ctx

# --- executions ------------------------------------------------------------------------


@main.group()
def execution() -> None:
    """List, inspect and cancel executions; read their logs."""


# the states ``execution list --state`` offers
LISTED_STATES = [
    s.value
    for s in (
        ExecutionState.PENDING,
        ExecutionState.RUNNING,
        ExecutionState.SUCCEEDED,
        ExecutionState.DEAD,
        ExecutionState.CANCELLED,
        ExecutionState.SKIPPED,
    )
]


@execution.command("list")
@click.option("--task", "task_name", help="Only this task's executions.")
@click.option(
    "--state",
    type=click.Choice(LISTED_STATES),
    help="Only executions in this state (dead: failed for good, the dead-letter queue).",
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def execution_list(
    c: Context, task_name: str | None, state: str | None, limit: int, as_json: bool
) -> None:
    """Executions, newest first; a pending one says why it waits (``wait_reason``, as
    ``execution show``: a limit, its retry backoff, its due time, no worker for its queue)."""
    db = c.db()
    rows = executions.recent(db, c.tenant, task=task_name, state=state, limit=limit)
    pending = [r["id"] for r in rows if r["state"] == ExecutionState.PENDING]
    reasons = limits.wait_reasons(db, c.tenant, pending)
    rows = [{**r, "wait_reason": reasons.get(r["id"])} for r in rows]
    if as_json:
        print_json(rows)
        return
    columns = [
        "id",
        "task_name",
        "state",
        "trigger",
        "scheduled_at",
        "attempt",
        "exit_code",
        "duration_seconds",
    ]
    table(rows, columns + (["wait_reason"] if reasons else []))


@execution.command("show")
@click.argument("execution_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def execution_show(c: Context, execution_id: int, as_json: bool) -> None:
    """One execution with its attempts; a pending one with the limit that holds it back
    (wait_reason), if one does."""
    db = c.db()
    row = executions.get(db, execution_id, c.tenant)
    if row["state"] == ExecutionState.PENDING:  # what holds it back, when a limit does
        row = {**row, "wait_reason": limits.wait_reason(db, c.tenant, execution_id)}
    attempts = executions.attempts(db, execution_id)
    if as_json:
        print_json({**row, "attempts": attempts})
        return
    print_fields(row)
    if attempts:
        click.echo("attempts:")
        table(
            attempts,
            [
                "attempt",
                "state",
                "worker_id",
                "started_at",
                "duration_seconds",
                "exit_code",
                "next_run_at",
                "error",
            ],
        )


LOG_BATCH = 1000  # log lines read at a time


@execution.command("logs")
@click.argument("execution_id", type=int)
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing new lines until the execution ends."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@pass_ctx
def execution_logs(c: Context, execution_id: int, follow: bool, as_json: bool) -> None:
    """Captured stdout/stderr of an execution, with times."""
    db = c.db()
    executions.get(db, execution_id, c.tenant)
    after = (0, 0)
    while True:
        # The state is read before the lines: a line flushed in between is printed on the
        # next pass, never lost.
        current = executions.find(db, execution_id, c.tenant)
        while True:  # a batch at a time: a log of millions of lines is never held whole
            lines = executions.log_page(db, execution_id, after, LOG_BATCH)
            for line in lines:
                after = (line["attempt"], line["seq"])
                if as_json:
                    click.echo(json_line(line))
                else:
                    click.echo(
                        f"{fmt(line['logged_at'])} [{line['attempt']}] {line['stream']}: {line['line']}"
                    )
            if len(lines) < LOG_BATCH:
                break
        if not follow:
            return
        if current is None or current["finished_at"] is not None:
            if current is not None and not as_json:
                code = f" (exit {current['exit_code']})" if current["exit_code"] is not None else ""
                click.echo(f"-- execution {execution_id} ended {current['state']}{code}")
            return
        time.sleep(0.5)
