"""``pgsched user update`` and ``pgsched token update``: grant or withdraw the reveal
permission of a web user or an API token (``--may-reveal``/``--no-may-reveal``, migration
0036; docs/security.md, "Sensitive values and who sees them"). It holds from the principal's
next request and is recorded in the audit log as done by ``cli``."""

from __future__ import annotations

import click

from .output import print_json
from .root import Context, pass_ctx
from .web import token, user

_reveal_switch = click.option(
    "--may-reveal/--no-may-reveal",
    "may_reveal",
    default=None,
    help="Grant (or withdraw) reading env values and sensitive params, whatever the role.",
)


def _said(may_reveal: bool | None) -> bool:
    if may_reveal is None:
        raise click.UsageError("nothing to change: give --may-reveal or --no-may-reveal")
    return may_reveal


@user.command("update")
@click.argument("username")
@_reveal_switch
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def user_update(c: Context, username: str, may_reveal: bool | None, as_json: bool) -> None:
    """Change what web user USERNAME may do (today: whether it reads sensitive values)."""
    from ..web.reveal_grants import set_user_reveal

    row = set_user_reveal(c.db(), username, _said(may_reveal))
    if as_json:
        print_json(row)
        return
    click.echo(
        f"user {username!r}: "
        + (
            "reads sensitive values"
            if row["may_reveal"]
            else "sees sensitive values masked (no reveal permission)"
        )
    )


@token.command("update")
@click.argument("token_id", type=click.IntRange(1))
@_reveal_switch
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def token_update(c: Context, token_id: int, may_reveal: bool | None, as_json: bool) -> None:
    """Change what token TOKEN_ID may do (today: whether it reads sensitive values)."""
    from ..web.reveal_grants import set_token_reveal

    row = set_token_reveal(c.db(), token_id, _said(may_reveal))
    if as_json:
        print_json(row)
        return
    click.echo(
        f"token {token_id}: "
        + (
            "reads sensitive values"
            if row["may_reveal"]
            else "sees sensitive values masked (no reveal permission)"
        )
    )
