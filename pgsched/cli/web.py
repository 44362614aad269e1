"""``pgsched web``, ``pgsched token …``, ``pgsched user …`` and ``pgsched audit list``: the
web admin, who may use it, and what they did (docs/web.md). Every change made here is
recorded in the audit log as done by ``cli`` and the operating system's user."""

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
_reveal_option = click.option(
    "--may-reveal",
    "may_reveal",
    is_flag=True,
    help="Reads env values and sensitive params (whatever the role); without it they are "
    "shown masked, to an admin too. Change later with 'update --may-reveal/--no-may-reveal'.",
)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A Host header name served (repeatable; *.example.com, * for any). Default: the "
    "loopback names on a loopback --host, else --host itself; needed with 0.0.0.0 or ::.",
)
@click.option(
    "--user-failures",
    default=5,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Failed sign-ins per username within --user-window, then 429.",
)
@click.option(
    "--user-window",
    default=300.0,
    show_default=True,
    type=click.FloatRange(1, 86_400),
    help="Seconds over which --user-failures count.",
)
@click.option(
    "--address-failures",
    default=20,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Failed sign-ins per client address within --address-window, then 429.",
)
@click.option(
    "--address-window",
    default=60.0,
    show_default=True,
    type=click.FloatRange(1, 86_400),
    help="Seconds over which --address-failures count.",
)
@click.option(
    "--hash-threads",
    default=2,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Password hashes run at once (64 MiB each).",
)
@click.option(
    "--hash-queue",
    default=8,
    show_default=True,
    type=click.IntRange(0, 1024),
    help="Sign-ins that may wait for a hashing thread; more are answered 503.",
)
@pass_ctx
def web(
    c: Context,
    host: str,
    port: int,
    allowed_hosts: tuple[str, ...],
    user_failures: int,
    user_window: float,
    address_failures: int,
    address_window: float,
    hash_threads: int,
    hash_queue: int,
) -> None:
    """Serve the web admin and the REST API (/api/v1/) until Ctrl-C."""
    from ..node import WebSettings, run_web

    run_web(
        c,
        WebSettings(
            host=host,
            port=port,
            allowed_hosts=allowed_hosts,
            user_failures=user_failures,
            user_window=user_window,
            address_failures=address_failures,
            address_window=address_window,
            hash_threads=hash_threads,
            hash_queue=hash_queue,
        ),
    )


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
@_reveal_option
@click.option("--name", default="", help="What the token is for (shown in listings).")
@click.option(
    "--expires-in",
    "expires_in",
    default=None,
    metavar="DURATION",
    help="Lifetime by the database's clock: 30d, 12h, 90m, 45s, 2w, 1d12h (default: never).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def token_create(
    c: Context,
    role: str,
    tenant: str | None,
    instance: bool,
    may_reveal: bool,
    name: str,
    expires_in: str | None,
    as_json: bool,
) -> None:
    """Create a token and print it. It is shown only now: store it somewhere safe."""
    from ..web.credentials import create_token, parse_duration

    lifetime = None if expires_in is None else parse_duration("expires_in", expires_in)
    secret, row = create_token(
        c.db(),
        role=role,
        tenant=tenant or c.tenant,
        name=name,
        expires_in=lifetime,
        instance=instance,
        may_reveal=may_reveal,
    )
    if as_json:
        print_json({**row, "token": secret})
        return
    click.echo(secret)
    until = f", expires {row['expires_at']:%Y-%m-%d %H:%M:%SZ}" if row["expires_at"] else ""
    click.echo(
        f"token {row['id']}: role {row['role']}, tenant {row['tenant']!r}"
        + (", instance scope" if row["instance"] else "")
        + (", reads sensitive values" if row["may_reveal"] else "")
        + f"{until}. It is not shown again.",
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
        [
            "id",
            "tenant",
            "role",
            "instance",
            "may_reveal",
            "name",
            "created_at",
            "last_used_at",
            "expires_at",
            "revoked_at",
        ],
    )


@token.command("revoke")
@click.argument("token_id", type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def token_revoke(c: Context, token_id: int, as_json: bool) -> None:
    """Revoke token TOKEN_ID: requests, sessions and open log streams using it are refused
    from now on."""
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
@click.option(
    "--role",
    required=True,
    type=click.Choice(ROLES),
    help="viewer reads; operator also acts; admin also manages the tenant's tokens and users.",
)
@_tenant_option
@_instance_option
@_reveal_option
@click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin."
)
@pass_ctx
def user_create(
    c: Context,
    username: str,
    role: str,
    tenant: str | None,
    instance: bool,
    may_reveal: bool,
    password_stdin: bool,
) -> None:
    """Create a web user; the password is asked for (twice), or read with --password-stdin."""
    from ..web.credentials import create_user

    password = _password(password_stdin)
    row = create_user(
        c.db(),
        username,
        password,
        role=role,
        tenant=tenant or c.tenant,
        instance=instance,
        may_reveal=may_reveal,
    )
    click.echo(
        f"user {row['username']!r} created: role {row['role']}, tenant {row['tenant']!r}"
        + (", instance scope" if row["instance"] else "")
        + (", reads sensitive values" if row["may_reveal"] else "")
    )


def _password(from_stdin: bool) -> str:
    """The password: the first line of stdin, or asked for twice on a terminal."""
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if sys.stdin.isatty():
        return str(click.prompt("password", hide_input=True, confirmation_prompt=True))
    raise ConfigError(
        "password: stdin is not a terminal; pass --password-stdin to read it from there"
    )


@user.command("set-password")
@click.argument("username")
@click.option(
    "--password-stdin", is_flag=True, help="Read the new password from the first line of stdin."
)
@pass_ctx
def user_set_password(c: Context, username: str, password_stdin: bool) -> None:
    """Give USERNAME a new password; every session they have ends at its next request."""
    from ..web.credentials import set_password

    ended = set_password(c.db(), username, _password(password_stdin))
    click.echo(f"user {username!r}: password changed, {ended} session(s) ended")


@user.command("sign-out")
@click.argument("username")
@pass_ctx
def user_sign_out(c: Context, username: str) -> None:
    """End every session of USERNAME (sign out everywhere); their password stays."""
    from ..web.credentials import end_user_sessions

    ended = end_user_sessions(c.db(), username)
    click.echo(f"user {username!r}: {ended} session(s) ended")


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
    table(rows, ["username", "tenant", "role", "instance", "may_reveal", "created_at"])


@user.command("delete")
@click.argument("username")
@pass_ctx
def user_delete(c: Context, username: str) -> None:
    """Remove web user USERNAME; their sessions and open log streams end at once."""
    from ..web.credentials import delete_user

    delete_user(c.db(), username)
    click.echo(f"user {username!r} deleted")


@main.group()
def audit() -> None:
    """The audit log: sign-ins, failed sign-ins, token and user changes, role refusals and
    instance actions."""


@audit.command("list")
@click.option(
    "--tenant", "tenant", default=None, help="This tenant's events (default: the global --tenant)."
)
@click.option("--all-tenants", is_flag=True, help="Events of every tenant, and of none.")
@click.option("--action", default=None, help="Only this action (sign_in, token_revoke, ...).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def audit_list(
    c: Context,
    tenant: str | None,
    all_tenants: bool,
    action: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Audit events, newest first."""
    from ..web.audit import events

    rows = events(c.db(), None if all_tenants else tenant or c.tenant, action=action, limit=limit)
    if as_json:
        print_json(rows)
        return
    table(rows, ["id", "at", "tenant", "actor_kind", "actor", "action", "target", "ip"])
