"""``pgsched dlq …`` and ``pgsched execution cancel``: the dead-letter queue and cancels."""

from __future__ import annotations

import re
import time

import click

from ..errors import PgschedError, ValidationError
from ..schedule import parse_interval
from ..stores import dlq as dlq_store
from ..stores import executions
from .executions import execution, execution_show
from .output import print_json, table
from .root import Context, main, pass_ctx


@main.group()
def dlq() -> None:
    """The dead-letter queue: executions that failed for good (attempts used up, or a
    failure the task marks not retryable, or lost with their worker too many times)."""


@dlq.command("list")
@click.option("--task", "task_name", help="Only this task's dead executions.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dlq_list(c: Context, task_name: str | None, limit: int, as_json: bool) -> None:
    """Dead executions, newest first."""
    rows = dlq_store.recent(c.db(), c.tenant, task=task_name, limit=limit)
    if as_json:
        print_json(rows)
        return
    table(
        rows, ["id", "task_name", "finished_at", "attempt", "lost_attempts", "exit_code", "error"]
    )


dlq.add_command(execution_show, "show")


@dlq.command("retry")
@click.argument("execution_id", type=int, required=False)
@click.option(
    "--all", "retry_all", is_flag=True, help="Retry every dead execution (of --task, if given)."
)
@click.option("--task", "task_name", help="With --all: only this task's.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dlq_retry(
    c: Context, execution_id: int | None, retry_all: bool, task_name: str | None, as_json: bool
) -> None:
    """Give dead executions a fresh set of attempts (the task's max attempts) and a fresh
    backoff (the next failure waits the policy's first delay); their earlier attempts are
    kept. One whose idempotency key has since succeeded on its task is marked skipped."""
    if (execution_id is None) == (not retry_all):
        raise PgschedError("dlq retry: give an EXECUTION_ID or --all")
    if task_name and not retry_all:
        raise PgschedError("dlq retry: --task goes with --all")
    db = c.db()
    if retry_all:
        retried = dlq_store.retry_all(db, c.tenant, task_name)
        if as_json:
            print_json({"retried": retried})
        else:
            click.echo(
                f"retried {retried} dead execution(s)" + (f" of {task_name}" if task_name else "")
            )
        return
    assert execution_id is not None
    dlq_store.retry(db, execution_id, c.tenant)
    state = executions.find(db, execution_id, c.tenant)
    if as_json:
        print_json({"id": execution_id, "state": state["state"] if state else None})
    elif state is not None and state["state"] == "skipped":
        click.echo(f"execution {execution_id} skipped: {state['error']}")
    else:
        click.echo(f"execution {execution_id} is queued again")


@dlq.command("purge")
@click.option(
    "--older-than", help="Only those dead for longer than this, with a unit (30s, 12h, 7d)."
)
@click.option(
    "--all", "purge_all", is_flag=True, help="The whole dead-letter queue (of this tenant)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dlq_purge(c: Context, older_than: str | None, purge_all: bool, as_json: bool) -> None:
    """Delete dead executions for good (nothing else is touched): those older than
    --older-than, or with --all every one."""
    if purge_all and older_than is not None:
        raise PgschedError("dlq purge: give --older-than or --all, not both")
    no_filter = older_than is None or older_than.strip() in ("0", "0s")
    if no_filter and not purge_all:
        raise PgschedError(
            "dlq purge: with no filter this deletes the whole dead-letter queue; "
            "give --older-than DURATION (e.g. 7d), or --all to delete every dead "
            "execution"
        )
    if not no_filter and re.fullmatch(r"\s*\d+(\.\d+)?\s*", older_than or ""):
        # a bare number deletes what is older than that many seconds: almost never what a
        # user who typed "--older-than 7" meant, and nothing deleted comes back
        raise ValidationError("older_than", older_than, "needs a unit: 30s, 15m, 12h or 7d")
    seconds = 0.0 if no_filter else parse_interval(older_than or "", "older_than")
    purged = dlq_store.purge(c.db(), c.tenant, seconds)
    if as_json:
        print_json({"purged": purged})
    else:
        click.echo(f"purged {purged} dead execution(s)")


@execution.command("cancel")
@click.argument("execution_id", type=int)
@click.option(
    "--wait",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0, 3600),
    help="Seconds to wait for a running execution to end (0: do not wait).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def execution_cancel(c: Context, execution_id: int, wait: float, as_json: bool) -> None:
    """Cancel an execution: a pending one ends 'cancelled' at once; a running one is
    stopped by the worker holding it (its process group killed; a Python task interrupted)
    and recorded 'cancelled'. An execution that already ended is left as it is."""
    db = c.db()
    outcome = executions.cancel(db, execution_id, c.tenant)
    deadline = time.monotonic() + wait
    while outcome == "cancelling" and time.monotonic() < deadline:
        time.sleep(0.1)
        current = executions.find(db, execution_id, c.tenant)
        if current is not None and current["finished_at"] is not None:
            outcome = current["state"]
    if outcome == "finished":
        current = executions.find(db, execution_id, c.tenant)
        outcome = f"already {current['state'] if current else 'gone'}"
    if as_json:
        print_json({"id": execution_id, "state": outcome})
    elif outcome == "cancelling":
        click.echo(f"execution {execution_id}: cancel requested; the worker has not confirmed yet")
    elif outcome == "cancelled":
        click.echo(f"execution {execution_id} cancelled")
    else:
        click.echo(
            f"execution {execution_id} had already ended: {outcome.removeprefix('already ')}"
        )
