"""``pgsched tenant quota show|set``: a tenant's quotas beside what it uses now
(docs/limits.md). Reading is the tenant's; setting is the installation's."""

from __future__ import annotations

import click

from .. import limits
from ..errors import PgschedError
from ..stores import limits as store
from .output import fmt, print_json, table
from .root import Context, pass_ctx
from .tenants import tenant


@tenant.group("quota")
def quota() -> None:
    """A tenant's quotas: executions at once, starts per hour, compute minutes per month,
    stored log bytes, and its weight in the share of claims. Work over a quota waits (it
    never fails)."""


def _shown(row: dict) -> list[dict]:
    """The quotas as rows of a table: what is used of what is allowed."""
    return [
        {"quota": "executions at once", "used": row["running"], "limit": row["max_running"]},
        {
            "quota": "starts this hour (UTC)",
            "used": row["hour_starts"],
            "limit": row["max_starts_per_hour"],
        },
        {
            "quota": "compute minutes this month (UTC)",
            "used": round(row["compute_minutes"], 1),
            "limit": row["max_compute_minutes_per_month"],
        },
        {
            "quota": "stored log bytes",
            "used": limits.format_bytes(row["log_bytes"]),
            "limit": limits.format_bytes(row["max_log_bytes"]),
        },
    ]


def _say(row: dict, as_json: bool) -> None:
    if as_json:
        print_json(row)
        return
    click.echo(f"tenant {row['tenant']} (weight {row['weight']})")
    table(
        [{**r, "limit": "none" if r["limit"] is None else r["limit"]} for r in _shown(row)],
        ["quota", "used", "limit"],
    )
    if row["over"]:
        click.echo(
            f"over: {', '.join(row['over'])}: it starts nothing until it is back under "
            f"(measured {fmt(row['measured_at'])})"
        )


@quota.command("show")
@click.argument("name", metavar="[TENANT]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def quota_show(c: Context, name: str | None, as_json: bool) -> None:
    """TENANT's quotas (default: --tenant, or the login's own) and what it uses now. A
    tenant's login sees its own only."""
    _say(store.tenant_quotas(c.db(), name or c.tenant), as_json)


@quota.command("set")
@click.argument("name", metavar="TENANT")
@click.option("--max-running", metavar="N|none", help="Executions at once, across every worker.")
@click.option("--max-starts-per-hour", metavar="N|none", help="Starts per clock hour (UTC).")
@click.option(
    "--max-compute-minutes-per-month",
    metavar="N|none",
    help="Handler minutes per calendar month (UTC), as the leader's usage job measures them.",
)
@click.option(
    "--max-log-bytes", metavar="SIZE|none", help="Stored log bytes: 100GB, 512MiB, 1000000."
)
@click.option(
    "--weight",
    type=click.IntRange(1, 100),
    metavar="N",
    help="Share of a claim against other tenants, 1 to 100.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the quotas as JSON.")
@pass_ctx
def quota_set(
    c: Context,
    name: str,
    max_running: str | None,
    max_starts_per_hour: str | None,
    max_compute_minutes_per_month: str | None,
    max_log_bytes: str | None,
    weight: int | None,
    as_json: bool,
) -> None:
    """Set TENANT's quotas; what is not given stays, 'none' removes one (0 starts
    nothing). Needs an installation-wide login. Raising one wakes the tenant's workers."""
    changes: dict = {}
    for field, text in (
        ("max_running", max_running),
        ("max_starts_per_hour", max_starts_per_hour),
        ("max_compute_minutes_per_month", max_compute_minutes_per_month),
    ):
        if text is not None:
            high = limits.BIGINT_MAX if field.startswith("max_compute") else limits.INT_MAX
            changes[field] = limits.parse_count(field, text, 0, high)
    if max_log_bytes is not None:
        changes["max_log_bytes"] = limits.parse_bytes("max_log_bytes", max_log_bytes)
    if weight is not None:
        changes["weight"] = weight
    if not changes:
        raise PgschedError("tenant quota set: nothing to change (see --help)")
    _say(store.tenant_set_quotas(c.db(), name, **changes), as_json)
