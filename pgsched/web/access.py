"""What a view asks about the request: who is signed in, may they do this, which
database, which form. Views and API endpoints call these; nothing else reads
``request.state`` directly.

``require(request, "operator")`` is the one check of a role: it returns the
:class:`~pgsched.web.credentials.Principal` or raises :class:`NotSignedIn` (401; a page
redirects to ``/login``) or :class:`Forbidden` (403, recorded in the audit log).
``require(request, "viewer", instance=True)`` also asks for the instance scope: what spans
tenants (the workers and schedulers, a failover, the installation-wide metrics) is no
tenant principal's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request

from ..db import Database
from . import audit
from .credentials import ROLES, Principal
from .session import client_ip


class NotSignedIn(Exception):
    """The request carries no valid token or session (HTTP 401)."""


class Forbidden(Exception):
    """The principal's role is below the one the action needs (HTTP 403)."""


def principal(request: Request) -> Principal | None:
    """The principal of ``request`` (set by the session middleware), or None."""
    return getattr(request.state, "principal", None)


def require(request: Request, role: str = "viewer", *, instance: bool = False) -> Principal:
    """The principal of ``request`` if its role is ``role`` or above (and, with
    ``instance``, it is an instance principal).

    ``role`` is ``"viewer"``, ``"operator"`` or ``"admin"``. Raises NotSignedIn when
    nobody is signed in, Forbidden when the role is too low or the scope a tenant's.
    """
    if role not in ROLES:
        raise ValueError(f"role: {role!r} is not one of {ROLES}")
    who = principal(request)
    if who is None:
        raise NotSignedIn("sign in with a token or a username and password")
    if not who.has(role) or (instance and not who.instance):
        audit.record(
            database(request),
            actor(request),
            "forbidden",
            tenant=who.tenant,
            target=f"{request.method} {request.url.path}"[:500],
            detail={"role": who.role, "needs": role, "instance": instance},
        )
    if not who.has(role):
        raise Forbidden(f"role: {who.role!r} may not do this; it needs {role!r} or above")
    if instance and not who.instance:
        raise Forbidden(
            f"instance: {who.name!r} acts in tenant {who.tenant!r} only; this spans every tenant "
            f"and needs an instance {role} (pgsched token create --instance)"
        )
    return who


def tenant_of_path(request: Request, who: Principal) -> str:
    """The ``{tenant}`` of the request's path, if ``who`` may act in it: its own tenant, or
    any for an instance principal; else Forbidden. The database checks it too, but an
    installation's web login (``pgsched_instance``) passes every tenant's check there."""
    tenant = str(request.path_params["tenant"])
    if tenant != who.tenant and not who.instance:
        raise Forbidden(f"tenant: {who.name!r} acts in tenant {who.tenant!r} only, not {tenant!r}")
    return tenant


def actor(request: Request) -> audit.Actor:
    """Who the request acts as, for the audit log: its principal (``anonymous`` when
    nobody is signed in) and the client's address."""
    who, ip = principal(request), client_ip(request)
    return audit.Actor(who.kind, who.ref, ip) if who else audit.Actor("anonymous", "", ip)


def recheck(request: Request) -> Callable[[], Principal | None]:
    """A function that resolves the request's token or session again (blocking: call it in
    a thread) and returns its principal, or None once it was revoked, ended or expired: a
    response that lasts (a log stream) calls it every second or so."""
    found = getattr(request.state, "recheck", None)
    return found if found is not None else lambda: principal(request)


def database(request: Request) -> Database:
    """The app's connection pool, acting for the request's tenant: each statement runs in a
    transaction that sets it (``pgsched.tenant``), so that row-level security shows a web
    login only that tenant's rows whatever a query forgets (migration 0018,
    docs/security.md). An instance-wide principal acts for every tenant (``"*"``); a
    request nobody signed in to acts for none (it sees only what needs no tenant: the
    sign-in's own tables). Only a principal granted the reveal permission
    (``may_reveal``, migration 0036; whatever its role) reads the values of env and
    sensitive params (``pgsched.reveal``); the others, admins too, are shown them masked
    by the database (migration 0031, docs/security.md)."""
    db: Database = request.app.state.db
    who = principal(request)
    if who is None:
        return db.acting_for("")
    return db.acting_for("*" if who.instance else who.tenant, reveal=who.may_reveal)


def form(request: Request) -> FormData:
    """The submitted form of a POST/PUT/PATCH/DELETE page request (parsed, and its
    ``csrf_token`` checked, by the session middleware); empty for other requests."""
    return getattr(request.state, "form", None) or FormData()


def body(request: Request) -> bytes:
    """The raw body of a non-GET request (read by the session middleware, at most
    :data:`pgsched.web.session.MAX_BODY` bytes), so plain ``def`` endpoints can read it."""
    return getattr(request.state, "body", b"")


def csrf_token(request: Request) -> str:
    """The CSRF token of the request's session: every non-GET form carries it as the
    hidden field ``csrf_token`` (templates have it as ``csrf_token``)."""
    session: dict[str, Any] = getattr(request.state, "session", None) or {}
    return str(session.get("csrf", ""))
