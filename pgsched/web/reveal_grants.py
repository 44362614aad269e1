"""Who reads sensitive values: granting and withdrawing the reveal permission of a web user
or an API token (``may_reveal``, migration 0036; docs/security.md, "Sensitive values and who
sees them").

It is apart from the role: the web, acting for a principal that holds it, sets
``pgsched.reveal`` to ``'on'`` (:func:`pgsched.web.access.database`) and reads env values and
sensitive params; without it every role, an admin too, is shown the masks. A change holds
from the principal's next request (its sessions are looked up on each one) and is recorded
in the audit log (``reveal_change``) in the same transaction. ``by`` says who made it (None:
the local command).

A principal may grant it only while holding it itself (:func:`check_grant`): an admin shown
the masks cannot make itself, or a token, that reads them.
"""

from __future__ import annotations

from ..db import Database, Row, Session
from ..errors import NotFound
from . import audit
from .access import Forbidden
from .credentials import Principal, check_instance


def check_grant(who: Principal, may_reveal: object) -> bool:
    """``may_reveal`` if ``who`` may give it: a bool, and ``who`` reveals when it is true.
    Raises ValidationError for a non-bool, Forbidden (403) for a grant ``who`` lacks."""
    granted = check_instance(may_reveal, "may_reveal")
    if granted and not who.may_reveal:
        raise Forbidden(
            f"may_reveal: {who.name!r} does not read sensitive values itself and may not grant "
            "it (pgsched user update --may-reveal, pgsched token update --may-reveal)"
        )
    return granted


def set_user_reveal(
    db: Database,
    username: str,
    may_reveal: bool,
    *,
    tenant: str | None = None,
    by: audit.Actor | None = None,
) -> Row:
    """Grant (``may_reveal``) or withdraw the reveal permission of web user ``username`` (of
    ``tenant`` when given) and record it; the user's row. Raises NotFound."""
    check_instance(may_reveal, "may_reveal")
    with db.transaction() as tx:
        row = tx.one("web_user_set_reveal", username=username, may_reveal=may_reveal, tenant=tenant)
        if row is None:
            raise NotFound(
                f"user: no web user named {username!r}"
                + (f" in tenant {tenant!r}" if tenant else "")
            )
        _record(tx, by, row["tenant"], f"user {username}", row)
    return row


def set_token_reveal(
    db: Database,
    token_id: int,
    may_reveal: bool,
    *,
    tenant: str | None = None,
    by: audit.Actor | None = None,
) -> Row:
    """Grant (``may_reveal``) or withdraw the reveal permission of API token ``token_id`` (of
    ``tenant`` when given) and record it; the token's row (never the token). Raises
    NotFound."""
    check_instance(may_reveal, "may_reveal")
    with db.transaction() as tx:
        row = tx.one("api_token_set_reveal", id=token_id, may_reveal=may_reveal, tenant=tenant)
        if row is None:
            raise NotFound(
                f"token: no token {token_id}" + (f" in tenant {tenant!r}" if tenant else "")
            )
        _record(tx, by, row["tenant"], f"token {token_id}", row)
    return row


def _record(tx: Session, by: audit.Actor | None, tenant: str, target: str, row: Row) -> None:
    audit.record(
        tx,
        by,
        "reveal_change",
        tenant=tenant,
        target=target,
        detail={"may_reveal": row["may_reveal"], "before": row.pop("before")},
    )
