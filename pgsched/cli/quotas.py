"""``pgsched tenant quota show|set``: a tenant's quotas beside what it uses now
(docs/limits.md). Reading is the tenant's; setting is the installation's."""

from __future__ import annotations

import click

from .. import limits, quota_use
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
    """The quotas as rows of a table: what is used of what is allowed, and the state
    (:func:`pgsched.quota_use.state`: ok, at quota, over; empty without a quota)."""
    used = {
        "compute_minutes": f"{row['compute_minutes']:.1f}",
        "log_bytes": limits.format_bytes(row["log_bytes"]),
    }
    return [
        {
            "quota": u.unit,
            "used": used.get(u.quota, int(u.used)),
            "limit": limits.format_bytes(u.limit) if u.quota == "log_bytes" else u.limit,
            "state": u.state or "",
        }
        for u in quota_use.uses(row)
    ]


def _say(row: dict, as_json: bool) -> None:
    if as_json:
        print_json(row)
        return
    click.echo(f"tenant {row['tenant']} (weight {row['weight']})")
    table(
        [{**r, "limit": "none" if r["limit"] is None else r["limit"]} for r in _shown(row)],
        ["quota", "used", "limit", "state"],
    )
    held = [u.quota for u in quota_use.uses(row) if u.holds]
    if held:
        measured = set(held) & {"compute_minutes", "log_bytes"}
        click.echo(
            f"held by {', '.join(held)}: its new work waits until its use is below the quota"
            + (f" (usage measured {fmt(row['measured_at'])})" if measured else "")
        )


@quota.command("show", short_help="A tenant's quotas and what it uses of each.")
@click.argument("name", metavar="[TENANT]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def quota_show(c: Context, name: str | None, as_json: bool) -> None:
    """TENANT's quotas (default: --tenant, or the login's own) and what it uses now. A
    tenant's login sees its own only."""
    _say(store.tenant_quotas(c.db(), name or c.tenant), as_json)


@quota.command("set", short_help="Set a tenant's quotas and weight (installation-wide login).")
@click.argument("name", metavar="TENANT")
@click.option(
    "--max-running",
    metavar="N|none",
    help="Executions at once, across every worker (a new tenant: 100).",
)
@click.option(
    "--max-starts-per-hour",
    metavar="N|none",
    help="Starts per clock hour, UTC (a new tenant: 10000).",
)
@click.option(
    "--max-compute-minutes-per-month",
    metavar="N|none",
    help="Handler minutes per calendar month (UTC), as the leader's usage job measures "
    "them (a new tenant: 50000).",
)
@click.option(
    "--max-log-bytes",
    metavar="SIZE|none",
    help="Stored log bytes: 100GB, 512MiB, 1000000 (a new tenant: 100GB).",
)
@click.option(
    "--weight", metavar="N", help="Share of a claim against other tenants, 1 to 100 (never none)."
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
    weight: str | None,
    as_json: bool,
) -> None:
    """Set TENANT's quotas; what is not given stays, 'none' removes one (0 starts
    nothing). Needs an installation-wide login. Raising one wakes the tenant's workers."""
    given = {
        "max_running": max_running,
        "max_starts_per_hour": max_starts_per_hour,
        "max_compute_minutes_per_month": max_compute_minutes_per_month,
        "max_log_bytes": max_log_bytes,
        "weight": weight,
    }
    changes = {f: limits.parse_quota(f, text) for f, text in given.items() if text is not None}
    if not changes:
        raise PgschedError("tenant quota set: nothing to change (see --help)")
    _say(store.tenant_set_quotas(c.db(), name, **changes), as_json)
