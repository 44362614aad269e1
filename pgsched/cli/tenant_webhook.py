"""``pgsched tenant webhook show|set``: where a tenant's own alerts (a quota reached) are
POSTed (migration 0034; docs/limits.md, "The alert")."""

from __future__ import annotations

import click

from ..stores import tenants as tenant_store
from .output import print_json
from .root import Context, pass_ctx
from .tenants import tenant


@tenant.group("webhook")
def webhook() -> None:
    """Where a tenant's own alerts go: each quota alert, when it opens, is POSTed there as
    JSON (event "quota"), retried as task webhooks are. A task's failures, dead letters
    and missed fires have webhooks of their own (pgsched task update --on-failure URL,
    --on-dlq URL, --on-missed URL)."""


def _say(row: dict, as_json: bool) -> None:
    if as_json:
        print_json(row)
        return
    click.echo(f"tenant {row['tenant']}: alerts to {row['alert_webhook'] or 'nowhere (none set)'}")


@webhook.command("show", short_help="Where a tenant's alerts are POSTed.")
@click.argument("name", metavar="[TENANT]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def webhook_show(c: Context, name: str | None, as_json: bool) -> None:
    """Where TENANT's own alerts are POSTed (default: --tenant, or the login's own)."""
    _say(tenant_store.alert_webhook(c.db(), name or c.tenant), as_json)


@webhook.command("set", short_help="POST a tenant's alerts to URL ('none': nowhere).")
@click.argument("name", metavar="TENANT")
@click.argument("url", metavar="URL|none")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def webhook_set(c: Context, name: str, url: str, as_json: bool) -> None:
    """POST TENANT's own alerts (each quota reached) to URL, an http:// or https:// URL;
    'none' sends them nowhere (they are still listed: pgsched alert list). An
    installation-wide login may; in the web, the tenant's admin. A loopback, private or
    link-local address is refused, here and when sent to, unless allowed with
    pgsched --webhook-allow CIDR (docs/security.md)."""
    target = None if url == "none" else url
    _say(tenant_store.set_alert_webhook(c.db(), name, target), as_json)
