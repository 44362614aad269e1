"""The secrets' store: a tenant's secrets set, listed and deleted (migration 0029;
docs/security.md, "Secrets"), and the sealed rows a worker fetches to resolve an
execution's references.

Values are sealed here, in this process, with the caller's :class:`~pgsched.secret_keys.Keyring`
before they are sent: the database receives ciphertext, nonce and key id, never a value or
a key. Every call goes through a public SQL function that takes its tenant from the login
(``caller_tenant_v1``): a tenant's login acts in its own tenant whatever it passes. Raises
ValidationError naming the field and value for a bad name or value, NotFound for an
unknown tenant or secret, PermissionDenied when the database refuses the login.
"""

from __future__ import annotations

from typing import Any

from ..db import Database, Row, Session
from ..errors import ValidationError
from ..secret_keys import MAX_VALUE_BYTES, Keyring, Sealed
from ..secret_refs import NAME
from ..task_checks import check_name


def check_secret_name(name: object) -> None:
    """Raise ValidationError unless ``name`` is a secret's name (1-64 letters, digits and
    ``. _ -``, starting with a letter or digit: what a reference may name)."""
    check_name("name", name, NAME)


def set_secret(
    db: Database | Session,
    keyring: Keyring,
    tenant: str,
    name: str,
    value: str,
    *,
    by: str | None = None,
) -> bool:
    """Seal ``value`` for secret ``name`` of ``tenant`` with ``keyring``'s current key and
    store it (replacing one of that name). True when it was created. ``value``: 1 byte to
    64 KiB of UTF-8 text without NUL."""
    check_name("tenant", tenant)
    check_secret_name(name)
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ValidationError("value", "…", "must be text, not empty, without NUL characters")
    size = len(value.encode("utf-8", errors="surrogatepass"))
    if size > MAX_VALUE_BYTES:
        raise ValidationError(
            "value", f"{size} bytes", f"must be at most {MAX_VALUE_BYTES} bytes of UTF-8"
        )
    sealed = keyring.seal(tenant, name, value)
    with db.transaction() as tx:
        row = tx.one(
            "secret_set",
            name=name,
            ciphertext=sealed.ciphertext,
            nonce=sealed.nonce,
            key_id=sealed.key_id,
            tenant=tenant,
            by=by,
        )
    assert row is not None
    return bool(row["created"])


def list_secrets(db: Database | Session, tenant: str) -> list[Row]:
    """The secrets of ``tenant`` by name: ``name``, ``key_id`` (the key that sealed it),
    ``created_at``, ``created_by``, ``updated_at``, ``updated_by`` (UTC instants; who:
    ``"login ROLE"``). Never a value nor its ciphertext."""
    check_name("tenant", tenant)
    with db.transaction() as tx:
        return tx.many("secret_list", tenant=tenant)


def delete_secret(db: Database | Session, tenant: str, name: str) -> list[str]:
    """Delete secret ``name`` of ``tenant``. Raises NotFound when it has none of that name:
    tasks that reference it fail from then on, naming the reference. Returns the names of
    the tenant's live tasks whose env or params reference it, those that will fail."""
    check_name("tenant", tenant)
    check_secret_name(name)
    with db.transaction() as tx:
        tx.exec("secret_delete", name=name, tenant=tenant)
        return referencing_tasks(tx, tenant, name)


def referencing_tasks(db: Database | Session, tenant: str, name: str) -> list[str]:
    """The names of ``tenant``'s live tasks whose env or params reference stored secret
    ``name`` (``{{secret:NAME}}`` as written), by name."""
    check_secret_name(name)
    rows = db.many("secret_referencing_tasks", tenant=tenant, ref=f"{{{{secret:{name}}}}}")
    return [r["name"] for r in rows]


def fetch_sealed(db: Database | Session, tenant: str, names: list[str]) -> dict[str, Sealed]:
    """The sealed values of ``names`` in ``tenant`` that exist, by name: what a worker
    opens with its keyring. An engine login fetches its own tenant's only."""
    with db.transaction() as tx:
        rows = tx.many("secret_fetch", tenant=tenant, names=names)
    return {r["name"]: Sealed(bytes(r["ciphertext"]), bytes(r["nonce"]), r["key_id"]) for r in rows}


def authored_params(db: Database | Session, tenant: str, task_id: int) -> dict[str, Any]:
    """The params task ``task_id`` of ``tenant`` was defined with (``{}`` when it is gone):
    the only params whose references a worker resolves."""
    row = db.one("secret_authored_params", id=task_id, tenant=tenant)
    params = row["params"] if row else None
    return params if isinstance(params, dict) else {}
