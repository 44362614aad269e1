"""``pgsched alert list``: the tenant's alerts (missed schedules, failure rates, quotas;
:mod:`pgsched.alerts`), as the dashboard shows them."""

from __future__ import annotations

import click

from .. import alerts
from .output import print_json, table
from .root import Context, main, pass_ctx


@main.group()
def alert() -> None:
    """Alerts of the tenant: a task that missed a schedule or fails too often, a quota the
    tenant reached (opened by the scheduler's leader; resolved when the cause has gone)."""


@alert.command("list")
@click.option("--all", "include_resolved", is_flag=True, help="Resolved alerts too.")
@click.option(
    "--limit",
    default=200,
    show_default=True,
    type=click.IntRange(1, 100_000),
    metavar="N",
    help="At most N alerts.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def alert_list(c: Context, include_resolved: bool, limit: int, as_json: bool) -> None:
    """Open alerts (with --all, resolved ones too), open first, newest first. A quota
    alert has no task: DETAILS names the quota, its use and its limit."""
    rows = alerts.active(c.db(), c.tenant, include_resolved=include_resolved, limit=limit)
    if as_json:
        print_json(rows)
        return
    table(rows, ["id", "kind", "task_name", "opened_at", "resolved_at", "details"])
