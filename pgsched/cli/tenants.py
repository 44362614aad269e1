"""``pgsched tenant …``: the tenants of the installation and the logins that act for them
(docs/security.md)."""

from __future__ import annotations

import sys

import click

from ..errors import PgschedError
from ..stores import tenants as tenant_store
from .output import print_json, table
from .root import Context, main, pass_ctx


@main.group()
def tenant() -> None:
    """Tenants: each sees only its own tasks, executions and DAGs, enforced by PostgreSQL
    (row-level security, and the login roles mapped to it)."""


@tenant.command("create")
@click.argument("name")
@click.option(
    "--login",
    "app_logins",
    multiple=True,
    metavar="ROLE",
    help="A login role for the tenant's applications (made if missing, given pgsched_app): "
    "it may call the public SQL API and INSERT INTO pgsched.run_request, in this tenant only. "
    "Repeatable.",
)
@click.option(
    "--engine-login",
    "engine_logins",
    multiple=True,
    metavar="ROLE",
    help="A login role for workers bound to this tenant (given pgsched_engine): it sees only "
    "this tenant's rows. Repeatable.",
)
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the logins' password from the first line of standard input.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def tenant_create(
    c: Context,
    name: str,
    app_logins: tuple[str, ...],
    engine_logins: tuple[str, ...],
    password_stdin: bool,
    as_json: bool,
) -> None:
    """Make tenant NAME (nothing happens if it exists) and, on request, its login roles.
    Making a role needs a connection with CREATEROLE."""
    password = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
        if not password:
            raise PgschedError("--password-stdin: standard input gave an empty password")
        if not (app_logins or engine_logins):
            raise PgschedError("--password-stdin: give --login or --engine-login too")
    logins = tuple((r, "app") for r in app_logins) + tuple((r, "engine") for r in engine_logins)
    result = tenant_store.create(c.db(), name, logins=logins, password=password)
    if as_json:
        print_json(result)
        return
    click.echo(f"tenant {name} {'created' if result['made'] else 'exists'}")
    for login in result["logins"]:
        how = "created" if login["made"] else "existing role"
        click.echo(f"  login {login['role']} ({how}): pgsched_{login['purpose']}, tenant {name}")


@tenant.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def tenant_list(c: Context, as_json: bool) -> None:
    """Every tenant with its logins and its live tasks and DAGs."""
    rows = tenant_store.list_all(c.db())
    if as_json:
        print_json(rows)
        return
    table(
        [{**r, "logins": ", ".join(r["logins"]) or "-"} for r in rows],
        ["name", "tasks", "dags", "logins", "created_at"],
    )


@tenant.command("delete")
@click.argument("name")
@click.option(
    "--drop-logins",
    is_flag=True,
    help="Drop the tenant's login roles too (cluster-wide); without it they stay, acting "
    "for no tenant (they see nothing).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def tenant_delete(c: Context, name: str, drop_logins: bool, as_json: bool) -> None:
    """Delete tenant NAME. Refused while it has live tasks or DAGs."""
    logins = tenant_store.delete(c.db(), name, drop_logins=drop_logins)
    if as_json:
        print_json({"name": name, "logins": logins, "dropped": drop_logins})
        return
    click.echo(f"tenant {name} deleted")
    if logins:
        click.echo(f"  logins {'dropped' if drop_logins else 'unmapped'}: {', '.join(logins)}")
