"""Who may use the web admin and the API: API tokens and web users, and the
:class:`Principal` a request acts as.

Roles are ordered ``viewer < operator < admin``: a viewer reads, an operator also acts
(trigger, pause, cancel, retry ...), an admin also manages tokens and forces a scheduler
failover. Every principal belongs to one tenant and sees only that tenant's rows; an
*instance* principal (``instance``, migration 0020) also sees and acts on what spans
tenants: the workers and schedulers with their hosts, a forced failover (an instance
admin), the installation-wide metrics. Role and scope are apart: an instance viewer reads
the cluster views, only an instance admin forces a failover. Reading env values and
sensitive params is apart from both (``may_reveal``, migration 0036): an admin without it
is shown the masks, a viewer with it the values (:mod:`pgsched.web.reveal_grants`).

Tokens are ``secrets.token_urlsafe(32)`` (256 random bits), shown once and stored as their
SHA-256 (see migrations/0005_web.sql for why that is enough); a token may expire
(``expires_at``, by the database's clock). Passwords are hashed with argon2id (argon2-cffi's
defaults, RFC 9106's second recommended profile).

Every change of a token or user ends the sessions it backs (revoking a token, deleting a
user, changing a password) and is recorded in the audit log (:mod:`pgsched.web.audit`) in
the same transaction; ``by`` says who made it (None: the local command,
:func:`pgsched.web.audit.local`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ..db import Database, Row, Session
from ..errors import NotFound, ValidationError
from ..roles import ROLES
from ..task_checks import TASK_NAME, check_name
from . import audit, session_store
from .hashing import PasswordHashing

TOKEN_PREFIX = "pgs_"  # makes a leaked token easy to recognise (secret scanners, logs)
_hasher = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """Verified against when the username is unknown, so both failures take the same
    time. Made on first use: an argon2 hash takes 64 MiB and a quarter second, which every
    pgsched process (workers import this module through the CLI) would otherwise pay."""
    return _hasher.hash("not a password of anyone")


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: ``kind`` is ``"token"`` or ``"user"``, ``ref`` the token id
    or the username, ``name`` what to show (token name or username), ``role`` one of
    :data:`ROLES`, ``tenant`` the only tenant whose rows it sees; ``since``, for a user,
    when the account was made (ISO 8601): a session names it too, so that a user deleted
    and made again under the same name does not inherit the old account's sessions;
    ``instance``: whether it may see and act on what spans tenants (the cluster views);
    ``may_reveal``: whether it reads env values and sensitive params (migration 0036)."""

    kind: str
    ref: str
    name: str
    role: str
    tenant: str
    since: str = ""
    instance: bool = False
    may_reveal: bool = False

    def has(self, role: str) -> bool:
        """Whether this principal's role is ``role`` or above it."""
        return ROLES.index(self.role) >= ROLES.index(role)


def check_role(role: object) -> str:
    """``role`` if it is one of :data:`ROLES`; ValidationError otherwise."""
    if role not in ROLES:
        raise ValidationError("role", role, f"must be one of {', '.join(ROLES)}")
    return str(role)


_DURATION = re.compile(r"(\d{1,9})([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_TOKEN_LIFETIME = 10 * 366 * 86400  # seconds: ten years; longer is "never" (no expiry)


def parse_duration(field: str, text: object) -> int:
    """Seconds in a duration such as ``30d``, ``12h``, ``90m``, ``45s``, ``2w`` or ``1d12h``
    (a number and a unit, repeated). Raises ValidationError naming ``field`` and ``text``
    when it is not one, is zero, or is over ten years."""
    value = text.strip().lower() if isinstance(text, str) else ""
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValidationError(
            field, text, "must be a duration such as 30d, 12h, 90m, 45s, 2w or 1d12h"
        )
    seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not 0 < seconds <= MAX_TOKEN_LIFETIME:
        raise ValidationError(field, text, "must be more than 0 seconds and at most 10 years")
    return seconds


def check_instance(instance: object, field: str = "instance") -> bool:
    """``instance`` if it is a bool; ValidationError (naming ``field``) otherwise."""
    if not isinstance(instance, bool):
        raise ValidationError(field, instance, "must be true or false")
    return instance


def token_digest(token: str) -> bytes:
    """The SHA-256 of ``token`` as stored in ``api_token.token_sha256``."""
    return hashlib.sha256(token.encode()).digest()


def create_token(
    db: Database | Session,
    *,
    role: str,
    tenant: str = "default",
    name: str = "",
    expires_in: int | None = None,
    by: audit.Actor | None = None,
    instance: bool = False,
    may_reveal: bool = False,
) -> tuple[str, Row]:
    """Create an API token (``instance``: of the instance scope; ``may_reveal``: reading
    sensitive values), expiring ``expires_in``
    seconds from now by the database's clock (None: never), and record it; return
    ``(token, row)``. The token is not stored and cannot be shown again. Raises
    ValidationError for a bad role, tenant, name (at most 200 characters) or lifetime (1
    second to 10 years)."""
    check_role(role)
    check_instance(instance)
    check_instance(may_reveal, "may_reveal")
    check_name("tenant", tenant)
    if not isinstance(name, str) or len(name) > 200:
        raise ValidationError("name", name, "must be text of at most 200 characters")
    if expires_in is not None and not (
        isinstance(expires_in, int) and 0 < expires_in <= MAX_TOKEN_LIFETIME
    ):
        raise ValidationError("expires_in", expires_in, "must be 1 second to 10 years")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with db.transaction() as tx:
        row = tx.one(
            "api_token_insert",
            tenant=tenant,
            role=role,
            name=name,
            token_sha256=token_digest(token),
            expires_in=expires_in,
            instance=instance,
            may_reveal=may_reveal,
        )
        assert row is not None
        expires = row["expires_at"].isoformat() if row["expires_at"] else None
        audit.record(
            tx,
            by,
            "token_create",
            tenant=tenant,
            target=f"token {row['id']}",
            detail={
                "role": role,
                "name": name,
                "expires_at": expires,
                "instance": instance,
                "may_reveal": may_reveal,
            },
        )
    return token, row


def list_tokens(db: Database | Session, tenant: str | None) -> list[Row]:
    """Tokens of ``tenant`` (every tenant when None), newest first, without their hashes."""
    return db.many("api_token_list", tenant=tenant)


def revoke_token(
    db: Database, token_id: int, tenant: str | None = None, *, by: audit.Actor | None = None
) -> Row:
    """Revoke token ``token_id`` (of ``tenant`` when given), end the sessions signed in with
    it and record it, in one transaction; idempotent. Raises NotFound."""
    with db.transaction() as tx:
        row = tx.one("api_token_revoke", id=token_id, tenant=tenant)
        if row is None:
            raise NotFound(
                f"token: no token {token_id}" + (f" in tenant {tenant!r}" if tenant else "")
            )
        ended = session_store.end_all(tx, token_id=token_id)
        audit.record(
            tx,
            by,
            "token_revoke",
            tenant=row["tenant"],
            target=f"token {token_id}",
            detail={"sessions": ended},
        )
    return row


def authenticate_token(db: Database | Session, token: str) -> Principal | None:
    """The principal of a live ``token``, or None (unknown, revoked, or expired by the
    database's clock)."""
    if not token or len(token) > 200:
        return None
    row = db.one("api_token_authenticate", token_sha256=token_digest(token))
    return _token_principal(row) if row else None


def _token_principal(row: Row) -> Principal:
    return Principal(
        "token",
        str(row["id"]),
        row["name"] or f"token {row['id']}",
        row["role"],
        row["tenant"],
        instance=bool(row["instance"]),
        may_reveal=bool(row["may_reveal"]),
    )


def create_user(
    db: Database | Session,
    username: str,
    password: str,
    *,
    role: str,
    tenant: str = "default",
    by: audit.Actor | None = None,
    instance: bool = False,
    may_reveal: bool = False,
) -> Row:
    """Create a web user (``instance``: of the instance scope; ``may_reveal``: reading
    sensitive values); return its row (without the
    hash). Raises ValidationError for a bad username (as task names: 1-200 letters, digits
    and ``. _ : @ / -``), a password under 8 characters, a bad role or tenant, or a username
    that is taken."""
    check_name("username", username, TASK_NAME)
    check_role(role)
    check_instance(instance)
    check_instance(may_reveal, "may_reveal")
    check_name("tenant", tenant)
    _check_password(password)
    password_hash = _hasher.hash(password)
    with db.transaction() as tx:
        row = tx.one(
            "web_user_insert",
            username=username,
            tenant=tenant,
            role=role,
            password_hash=password_hash,
            instance=instance,
            may_reveal=may_reveal,
        )
        if row is None:
            raise ValidationError("username", username, "is taken")
        audit.record(
            tx,
            by,
            "user_create",
            tenant=tenant,
            target=f"user {username}",
            detail={"role": role, "instance": instance, "may_reveal": may_reveal},
        )
    return row


def _check_password(password: object) -> None:
    if not isinstance(password, str) or len(password) < 8:
        raise ValidationError("password", "***", "must be at least 8 characters")
    if len(password) > 1000:
        raise ValidationError("password", "***", "must be at most 1000 characters")


def set_password(
    db: Database,
    username: str,
    password: str,
    *,
    tenant: str | None = None,
    by: audit.Actor | None = None,
) -> int:
    """Give web user ``username`` (of ``tenant`` when given) a new password, end every
    session they have and record it, in one transaction; how many sessions ended. Raises
    ValidationError for a password under 8 characters, NotFound for no such user."""
    _check_password(password)
    password_hash = _hasher.hash(password)
    with db.transaction() as tx:
        row = tx.one("web_user_set_password", username=username, password_hash=password_hash)
        if row is None or (tenant is not None and row["tenant"] != tenant):
            raise NotFound(_no_user(username, tenant))
        ended = session_store.end_all(tx, username=username)
        audit.record(
            tx,
            by,
            "password_change",
            tenant=row["tenant"],
            target=f"user {username}",
            detail={"sessions": ended},
        )
    return ended


def _no_user(username: str, tenant: str | None) -> str:
    return f"user: no web user named {username!r}" + (f" in tenant {tenant!r}" if tenant else "")


def end_user_sessions(
    db: Database, username: str, *, tenant: str | None = None, by: audit.Actor | None = None
) -> int:
    """End every session of web user ``username`` (of ``tenant`` when given) and record it
    ("sign out everywhere", by the user or an admin); how many ended. Raises NotFound."""
    row = db.one("web_user_get", username=username) if len(username) <= 200 else None
    if row is None or (tenant is not None and row["tenant"] != tenant):
        raise NotFound(_no_user(username, tenant))
    return session_store.sign_out_everywhere(db, _user_principal(row), by or audit.local())


def list_users(db: Database | Session, tenant: str | None) -> list[Row]:
    """Web users of ``tenant`` (every tenant when None) by username, without hashes."""
    return db.many("web_user_list", tenant=tenant)


def delete_user(
    db: Database, username: str, *, tenant: str | None = None, by: audit.Actor | None = None
) -> None:
    """Remove web user ``username`` (of ``tenant`` when given) and record it, in one
    transaction; their sessions go with them (``ON DELETE CASCADE``), so they end at their
    next request. Raises NotFound."""
    with db.transaction() as tx:
        row = tx.one("web_user_delete", username=username, tenant=tenant)
        if row is None:
            raise NotFound(_no_user(username, tenant))
        audit.record(tx, by, "user_delete", tenant=row["tenant"], target=f"user {username}")


def _verify(stored: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored if stored is not None else _dummy_hash(), password)
    except (VerificationError, InvalidHashError):
        return False


def authenticate_user(
    db: Database | Session,
    username: str,
    password: str,
    hashing: PasswordHashing | None = None,
) -> Principal | None:
    """The principal of ``username`` when ``password`` is theirs, else None. Rehashes a
    password stored with older argon2 parameters. With ``hashing``, the argon2 work runs
    on its bounded threads (:mod:`pgsched.web.hashing`), which raises HashingBusy when
    they are all taken; without it, in the calling thread."""
    row = db.one("web_user_get", username=username) if username and len(username) <= 200 else None
    stored = row["password_hash"] if row else None
    ok = hashing.run(_verify, stored, password) if hashing else _verify(stored, password)
    if row is None or not ok:
        return None
    if _hasher.check_needs_rehash(row["password_hash"]):
        fresh = hashing.run(_hasher.hash, password) if hashing else _hasher.hash(password)
        db.exec("web_user_rehash", username=username, password_hash=fresh)
    return _user_principal(row)


def _user_principal(row: Row) -> Principal:
    return Principal(
        "user",
        row["username"],
        row["username"],
        row["role"],
        row["tenant"],
        row["created_at"].isoformat(),
        instance=bool(row["instance"]),
        may_reveal=bool(row["may_reveal"]),
    )


def session_key(db: Database) -> str:
    """The key that signs the anonymous CSRF cookie (:mod:`pgsched.web.session`), generated
    (256 random bits) and stored the first time any web process asks."""
    row = db.one("web_key_ensure", name="session", value=secrets.token_urlsafe(32))
    if row is None:  # another process stored its key between our snapshot and our insert
        row = db.one("web_key_get", name="session")
    assert row is not None
    return str(row["value"])
