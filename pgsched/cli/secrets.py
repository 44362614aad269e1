"""``pgsched secret set|list|delete``: a tenant's secrets, which tasks reference as
``{{secret:NAME}}`` in their env or params (docs/security.md, "Secrets").

A value is read from standard input or a prompt, never from the command line (every user
of the host may read a command line in /proc), and sealed here with the key of
``--secret-key-file``, ``PGSCHED_SECRET_KEY`` or ``PGSCHED_SECRET_KEY_FILE``
(:mod:`pgsched.secret_keys`): the database receives ciphertext only.
"""

from __future__ import annotations

import os
import sys

import click

from ..errors import ConfigError, PgschedError
from ..stores import secrets as store
from .output import print_json, table
from .root import Context, main, pass_ctx


@main.group()
def secret() -> None:
    """Secrets of a tenant (--tenant, else the login's own): sealed with a key the database
    never holds, resolved by the worker when a task runs, masked in what it prints."""


def _read_value(from_stdin: bool) -> str:
    """The value: all of standard input (one trailing newline dropped) when it is not a
    terminal or ``from_stdin``, else a hidden prompt asked twice."""
    if from_stdin or not sys.stdin.isatty():
        value = sys.stdin.read()
        if value.endswith("\n"):
            value = value[:-1]
            if value.endswith("\r"):
                value = value[:-1]
        if not value:
            raise PgschedError("secret set: standard input gave an empty value")
        return value
    value = click.prompt("value", hide_input=True, confirmation_prompt=True, prompt_suffix=": ")
    if not value:
        raise PgschedError("secret set: the value is empty")
    return str(value)


@secret.command("set", short_help="Set a secret (value from standard input or a prompt).")
@click.argument("name")
@click.option(
    "--secret-key-file",
    metavar="PATH",
    help="The key file (one base64 key a line, the first seals). Default: "
    "$PGSCHED_SECRET_KEY (one base64 key), else $PGSCHED_SECRET_KEY_FILE.",
)
@click.option(
    "--stdin", "from_stdin", is_flag=True, help="Read the value from standard input (a pipe)."
)
@pass_ctx
def secret_set(c: Context, name: str, secret_key_file: str | None, from_stdin: bool) -> None:
    """Seal a value and store it as secret NAME of the tenant, replacing one of that name.
    Tasks of the tenant reference it as {{secret:NAME}}."""
    from ..secret_keys import KEY_ENV, KEY_FILE_ENV, from_environment

    store.check_secret_name(name)
    keyring = from_environment(os.environ, secret_key_file)
    if keyring is None:
        raise ConfigError(
            f"secret set: no key to seal with: give --secret-key-file, {KEY_ENV} or {KEY_FILE_ENV} "
            "(a key: openssl rand -base64 32)"
        )
    value = _read_value(from_stdin)
    db = c.db()
    created = store.set_secret(db, keyring, c.tenant, name, value)
    click.echo(
        f"secret {name} {'created' if created else 'replaced'} in tenant {c.tenant} "
        f"(key {keyring.current_id})"
    )


@secret.command("list", short_help="The tenant's secrets: names and metadata, never values.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def secret_list(c: Context, as_json: bool) -> None:
    """The secrets of the tenant: name, the key that sealed it, when and by whom it was
    created and last set. Values are never shown."""
    db = c.db()
    rows = store.list_secrets(db, c.tenant)
    if as_json:
        print_json(rows)
        return
    table(rows, ["name", "key_id", "updated_at", "updated_by", "created_at", "created_by"])


@secret.command("delete", short_help="Delete a secret.")
@click.argument("name")
@pass_ctx
def secret_delete(c: Context, name: str) -> None:
    """Delete secret NAME of the tenant: tasks that reference it fail from then on, naming
    the reference (they are not retried)."""
    db = c.db()
    users = store.delete_secret(db, c.tenant, name)
    click.echo(f"secret {name} deleted from tenant {c.tenant}")
    if users:
        click.echo(
            f"warning: task(s) {', '.join(users)} reference {{{{secret:{name}}}}}: their runs "
            f"fail from now on until 'pgsched secret set {name}' (or the reference is removed)",
            err=True,
        )
