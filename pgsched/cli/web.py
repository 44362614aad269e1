"""``pgsched web``, ``pgsched token …`` and ``pgsched user …``: the web admin and who may
use it (docs/web.md)."""

from __future__ import annotations

import sys

import click

from ..errors import ConfigError
from ..web.credentials import ROLES
from .output import print_json, table
from .root import Context, main, pass_ctx

_tenant_option = click.option(
    "--tenant",
    "tenant",
    default=None,
    help="Tenant the principal belongs to (default: the global --tenant).",
)
_instance_option = click.option(
    "--instance",
    is_flag=True,
    help="Of the instance scope: also sees what spans tenants (workers, schedulers with their "
    "hosts, installation-wide /metrics) and, as an admin, forces a scheduler failover. "
    "Without it the principal sees its tenant's rows alone.",
)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@pass_ctx
def web(c: Context, host: str, port: int) -> None:
    """Serve the web admin and the REST API (/api/v1/) until Ctrl-C."""
    from ..node import WebSettings, run_web

    run_web(c, WebSettings(host=host, port=port))


@main.group()
def token() -> None:
    """API tokens: for the REST API (Authorization: Bearer TOKEN) and for signing in to the
    web admin."""


@token.command("create")
@click.option(
    "--role",
    required=True,
    type=click.Choice(ROLES),
    help="viewer reads; operator also acts; admin also manages tokens and failover.",
)
@_tenant_option
@_instance_option
@click.option("--name", default="", help="What the token is for (shown in listings).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def token_create(
    c: Context, role: str, tenant: str | None, instance: bool, name: str, as_json: bool
) -> None:
    """Create a token and print it. It is shown only now: store it somewhere safe."""
    from ..web.credentials import create_token

    secret, row = create_token(
        c.db(), role=role, tenant=tenant or c.tenant, name=name, instance=instance
    )
    if as_json:
        print_json({**row, "token": secret})
        return
    click.echo(secret)
    click.echo(
        f"token {row['id']}: role {row['role']}, tenant {row['tenant']!r}"
        + (", instance scope" if row["instance"] else "")
        + ". It is not shown again.",
        err=True,
    )


@token.command("list")
@_tenant_option
@click.option("--all-tenants", is_flag=True, help="Tokens of every tenant.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def token_list(c: Context, tenant: str | None, all_tenants: bool, as_json: bool) -> None:
    """Tokens (never the tokens themselves), newest first."""
    from ..web.credentials import list_tokens

    rows = list_tokens(c.db(), None if all_tenants else tenant or c.tenant)
    if as_json:
        print_json(rows)
        return
    table(
        rows,
        ["id", "tenant", "role", "instance", "name", "created_at", "last_used_at", "revoked_at"],
    )


@token.command("revoke")
@click.argument("token_id", type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def token_revoke(c: Context, token_id: int, as_json: bool) -> None:
    """Revoke token TOKEN_ID: requests and sessions using it are refused from now on."""
    from ..web.credentials import revoke_token

    row = revoke_token(c.db(), token_id)
    if as_json:
        print_json(row)
        return
    click.echo(f"token {row['id']} revoked")


@main.group()
def user() -> None:
    """People who sign in to the web admin with a password."""


@user.command("create")
@click.argument("username")
@click.option("--role", required=True, type=click.Choice(ROLES))
@_tenant_option
@_instance_option
@click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin."
)
@pass_ctx
def user_create(
    c: Context, username: str, role: str, tenant: str | None, instance: bool, password_stdin: bool
) -> None:
    """Create a web user; the password is asked for (twice), or read with --password-stdin."""
    from ..web.credentials import create_user

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    else:
        raise ConfigError(
            "password: stdin is not a terminal; pass --password-stdin to read it from there"
        )
    row = create_user(
        c.db(), username, password, role=role, tenant=tenant or c.tenant, instance=instance
    )
    click.echo(
        f"user {row['username']!r} created: role {row['role']}, tenant {row['tenant']!r}"
        + (", instance scope" if row["instance"] else "")
    )


@user.command("list")
@_tenant_option
@click.option("--all-tenants", is_flag=True, help="Users of every tenant.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def user_list(c: Context, tenant: str | None, all_tenants: bool, as_json: bool) -> None:
    """Web users (never their password hashes)."""
    from ..web.credentials import list_users

    rows = list_users(c.db(), None if all_tenants else tenant or c.tenant)
    if as_json:
        print_json(rows)
        return
    table(rows, ["username", "tenant", "role", "instance", "created_at"])


@user.command("delete")
@click.argument("username")
@pass_ctx
def user_delete(c: Context, username: str) -> None:
    """Remove web user USERNAME; their sessions end at their next request."""
    from ..web.credentials import delete_user

    delete_user(c.db(), username)
    click.echo(f"user {username!r} deleted")
