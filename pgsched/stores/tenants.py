"""The tenants' store: tenants made, listed and deleted, and the login roles that act for
one (``pgsched.tenant``, ``pgsched.tenant_role``; migration 0018, docs/security.md).

A login mapped to a tenant sees and changes that tenant's rows only, whatever it asks:
row-level security and the public functions read its tenant from the map. Making or
dropping a login is a change to the cluster's roles and needs CREATEROLE (or a
superuser); the rest needs the rights of an installation-wide login.
"""

from __future__ import annotations

from ..alerts import check_webhook_url
from ..db import Database, Row, Session
from ..errors import NotFound, PgschedError, ValidationError
from ..roles import LoginPurpose
from ..task_checks import check_name

PURPOSES = tuple(p.value for p in LoginPurpose)  # the group role a login gets: pgsched_<purpose>


def create(
    db: Database,
    name: str,
    *,
    logins: tuple[tuple[str, str], ...] = (),
    password: str | None = None,
) -> dict:
    """Make tenant ``name`` (nothing if it exists) and, for each ``(role, purpose)`` of
    ``logins``, a login role acting for it: made if missing, given ``pgsched_<purpose>``,
    mapped to the tenant, with ``password`` if given. One transaction. Returns
    ``{"name", "created_at", "made": bool, "logins": [{"role", "purpose", "made"}]}``.
    Raises ValidationError for a bad name or purpose, DatabaseError (naming the role) when
    a role is in another tenant or acts for the whole installation, PermissionDenied
    without CREATEROLE."""
    check_name("tenant", name)
    for role, purpose in logins:
        check_name("login", role)
        if purpose not in PURPOSES:
            raise ValidationError("purpose", purpose, f"must be one of {', '.join(PURPOSES)}")
    with db.transaction() as tx:
        row = tx.one("tenant_create", name=name)
        assert row is not None
        made = []
        for role, purpose in logins:
            login = tx.one(
                "tenant_login", role=role, tenant=name, purpose=purpose, password=password
            )
            made.append({"role": role, "purpose": purpose, "made": bool(login and login["made"])})
    return {**row, "logins": made}


def list_all(db: Database | Session) -> list[Row]:
    """Every tenant, by name: ``name``, ``created_at``, ``logins`` (``"role:purpose"``),
    ``tasks`` and ``dags`` (live ones)."""
    return db.many("tenant_list")


def delete(db: Database, name: str, *, drop_logins: bool = False) -> list[str]:
    """Delete tenant ``name`` and its logins' mapping (with ``drop_logins``, the login
    roles too, cluster-wide, and their open sessions ended). Refused while it has live
    tasks, DAGs, API tokens or web users, so that nothing goes on acting in a tenant that
    no longer exists. Returns the logins it had. Raises NotFound, PgschedError."""
    check_name("tenant", name)
    with db.transaction() as tx:
        row = tx.one("tenant_get", name=name)
        if row is None:
            raise NotFound(f"tenant: no tenant named {name!r}")
        left = {k: row[k] for k in ("tasks", "dags", "tokens", "users") if row[k]}
        if left:
            what = ", ".join(f"{n} {k if n != 1 else k[:-1]}" for k, n in left.items())
            raise PgschedError(
                f"tenant: {name!r} still has {what}; delete the tasks and DAGs, revoke the "
                "tokens (pgsched token revoke) and delete the users (pgsched user delete) first"
            )
        logins = list(row["logins"])
        if drop_logins:
            for role in logins:
                tx.exec("tenant_drop_login", role=role, tenant=name)
        tx.exec("tenant_delete", name=name)
    return logins


def alert_webhook(db: Database | Session, tenant: str) -> Row:
    """``{"tenant", "alert_webhook"}``: where ``tenant``'s own alerts (a quota reached) are
    POSTed, None for nowhere (migration 0034). NotFound for a tenant this login cannot see
    (another tenant's, to a tenant's login)."""
    check_name("tenant", tenant)
    row = db.one("tenant_alert_webhook", tenant=tenant)
    if row is None:
        raise NotFound(f"tenant: no tenant {tenant!r}")
    return row


def set_alert_webhook(db: Database | Session, tenant: str, url: str | None) -> Row:
    """Send ``tenant``'s own alerts to ``url`` (http or https; None: to nowhere), as
    :func:`alert_webhook` returns it. The installation may, and the web acting for the
    tenant; PermissionDenied for any other login. ValidationError names a bad URL, NotFound
    an unknown tenant."""
    check_name("tenant", tenant)
    if url is not None:
        check_webhook_url("alert_webhook", url)
    with db.transaction() as tx:
        row = tx.one("tenant_alert_webhook_set", tenant=tenant, url=url)
        assert row is not None  # the function raises no_data_found
        return row
