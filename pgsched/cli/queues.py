"""``pgsched queue …``: the queues of a tenant, their limits across every worker, and
their pauses (docs/limits.md)."""

from __future__ import annotations

import click

from .. import limits
from ..errors import NotFound, PgschedError
from ..stores import limits as store
from .output import fmt, print_fields, print_json, table
from .root import Context, main, pass_ctx


@main.group()
def queue() -> None:
    """Queues: pause and resume them, and limit them across every worker (executions at
    once, starts per period). A queue exists as soon as a task names it (--queue); work
    over a limit waits, pending, and says why (pgsched execution show ID)."""


def _shown(row: dict) -> dict:
    """A queue row as people read it: the state, the rate as N/PERIOD."""
    return {
        **row,
        "state": "paused" if row["paused_at"] else "active",
        "rate": limits.format_rate(row["rate_limit"], row["rate_period_seconds"]),
    }


def _say(row: dict, as_json: bool) -> None:
    if as_json:
        print_json(row)
        return
    r = _shown(row)
    limit = ", ".join(
        f"{k} {v}"
        for k, v in (("max_running", r["max_running"]), ("rate", r["rate"]))
        if v is not None
    )
    paused = (
        f"paused since {fmt(r['paused_at'])} by {r['paused_by']}"
        + (f": {r['pause_reason']}" if r["pause_reason"] else "")
        if r["paused_at"]
        else "active"
    )
    click.echo(f"queue {r['name']} (tenant {r['tenant']}): {paused}; limits: {limit or 'none'}")


@queue.command("list", short_help="The tenant's queues: limits, pause, what runs and waits.")
@click.option(
    "--all-tenants",
    is_flag=True,
    help="Every tenant's queues that this login may see (an installation-wide login: all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def queue_list(c: Context, all_tenants: bool, as_json: bool) -> None:
    """The tenant's queues that have limits, a pause, work or a worker: what runs, what is
    ready, and how much of it a limit holds back (WAITING)."""
    rows = store.queues(c.db(), None if all_tenants else c.tenant)
    if as_json:
        print_json(rows)
        return
    columns = ["name", "state", "max_running", "rate", "running", "ready", "waiting", "workers"]
    table(
        [_shown(r) for r in rows],
        (["tenant"] if all_tenants else []) + columns + ["paused_by", "pause_reason"],
    )


@queue.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def queue_show(c: Context, name: str, as_json: bool) -> None:
    """One queue: its limits, its pause, and its work."""
    row = store.queue(c.db(), c.tenant, name)
    if as_json:
        print_json(row)
        return
    print_fields(_shown(row))


def _known(c: Context, name: str) -> bool:
    """Whether queue ``name`` of the tenant has limits, work or a worker; when not, says on
    standard error that it is new (a mistyped name would otherwise pause nothing that runs)."""
    try:
        store.queue(c.db(), c.tenant, name)
    except NotFound:
        click.echo(
            f"note: queue {name!r} of tenant {c.tenant!r} has no limits, work or worker yet: "
            "it is made now (pgsched queue list shows the queues there are)",
            err=True,
        )
        return False
    return True


@queue.command("pause", short_help="Pause queue NAME: its work waits until resumed.")
@click.argument("name")
@click.option("--reason", help="Why (shown with the work that waits, at most 500 characters).")
@click.option("--json", "as_json", is_flag=True, help="Print the queue as JSON.")
@pass_ctx
def queue_pause(c: Context, name: str, reason: str | None, as_json: bool) -> None:
    """Pause queue NAME: no worker starts anything of it until it is resumed; what runs
    goes on. Recorded as paused by this login. A queue that nothing uses yet may be paused
    before its work comes (said on standard error)."""
    _known(c, name)
    _say(store.queue_pause(c.db(), c.tenant, name, reason), as_json)


@queue.command("resume")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the queue as JSON.")
@pass_ctx
def queue_resume(c: Context, name: str, as_json: bool) -> None:
    """Resume queue NAME: its workers take its work again at once."""
    _say(store.queue_resume(c.db(), c.tenant, name), as_json)


@queue.command("set", short_help="Set the limits of queue NAME (executions at once, rate).")
@click.argument("name")
@click.option(
    "--max-running",
    metavar="N|none",
    help="Executions of the queue running at once, across every worker; 'none' removes it.",
)
@click.option(
    "--rate-limit",
    metavar="N/PERIOD|none",
    help="At most N starts per PERIOD, a sliding window: 60/1m, 10/30s, 1000/1h; a PERIOD "
    "from 0.001 s to 366 days; 'none' removes it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the queue as JSON.")
@pass_ctx
def queue_set(
    c: Context, name: str, max_running: str | None, rate_limit: str | None, as_json: bool
) -> None:
    """Set the limits of queue NAME; what is not given stays. Raising or removing one
    wakes the workers at once."""
    changes: dict = {}
    if max_running is not None:
        changes["max_running"] = limits.parse_count("max_running", max_running)
    if rate_limit is not None:
        rate = limits.parse_rate("rate_limit", rate_limit)
        changes["rate_limit"], changes["rate_period_seconds"] = rate or (None, None)
    if not changes:
        raise PgschedError("queue set: nothing to change (give --max-running or --rate-limit)")
    _known(c, name)
    _say(store.queue_set_limits(c.db(), c.tenant, name, **changes), as_json)
