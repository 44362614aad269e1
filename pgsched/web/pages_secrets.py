"""``/secrets``: a tenant's secrets (issue 19, item 3; docs/security.md, "Secrets"), for its
admins alone: names, the key that sealed each, who set it when; never a value, nor its
length. A value is set through a password-type field and sealed here, in the web process,
with the key of ``PGSCHED_SECRET_KEY`` / ``PGSCHED_SECRET_KEY_FILE`` (read at the start of
``pgsched web``; without one the page lists and deletes, and says it cannot seal). Deleting
asks first. Every change is recorded in the audit log (``secret_set``, ``secret_delete``)
with the name, never the value.

The value is read from the form as sent, never passed to :func:`pgsched.web.pages.field`
(whose error would quote it) and never put back into a page: a refused form comes back
with the name filled in and the value empty.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import NotFound, ValidationError
from ..secret_keys import MAX_VALUE_BYTES, Keyring
from ..stores import secrets as store
from . import audit
from .access import actor, database, form, require
from .credentials import Principal
from .pages import done, field, notice
from .rendering import render

MAX_VALUE_CHARS = MAX_VALUE_BYTES  # characters a value field may hold (bytes: the store checks)


def keyring(request: Request) -> Keyring | None:
    """The key this web process seals with (``app.state.secret_keyring``), or None."""
    return getattr(request.app.state, "secret_keyring", None)


def _page(
    request: Request, who: Principal, *, error: str | None = None, name: str = "", status: int = 200
) -> Response:
    return render(
        request,
        "web/secrets.html",
        {
            "secrets": store.list_secrets(database(request), who.tenant),
            "can_seal": keyring(request) is not None,
            "notice": notice(request),
            "error": error,
            "name": name,
        },
        status_code=status,
    )


def secret_list(request: Request) -> Response:
    return _page(request, require(request, "admin"))


def _value(request: Request) -> str:
    """The value field as sent (a browser sends a password field unchanged; one trailing
    newline of a paste is dropped). Raises ValidationError that never quotes it."""
    value = form(request).get("value")
    text = value if isinstance(value, str) else ""
    text = text[:-1] if text.endswith("\n") else text
    text = text[:-1] if text.endswith("\r") else text
    if not text:
        raise ValidationError("value", "…", "is required")
    if len(text) > MAX_VALUE_CHARS:
        raise ValidationError("value", "…", f"must be at most {MAX_VALUE_CHARS} characters")
    return text


def secret_set(request: Request) -> Response:
    """Seal the form's value and store it as the named secret of the admin's tenant."""
    who = require(request, "admin")
    name = str(form(request).get("name") or "").strip()[:200]
    ring = keyring(request)
    try:
        name = field(request, "name", max_length=64)
        if ring is None:
            raise ValidationError(
                "value",
                "…",
                "cannot be sealed: this web server has no secret key "
                "(start pgsched web with PGSCHED_SECRET_KEY or PGSCHED_SECRET_KEY_FILE)",
            )
        store.check_secret_name(name)
        value = _value(request)
        with database(request).transaction() as tx:
            created = store.set_secret(tx, ring, who.tenant, name, value, by=_by(who))
            audit.record(
                tx,
                actor(request),
                "secret_set",
                tenant=who.tenant,
                target=f"secret {name}",
                detail={"created": created, "key_id": ring.current_id},
            )
    except ValidationError as exc:
        return _page(request, who, error=str(exc), name=name, status=422)
    return done("/secrets", "secret_created" if created else "secret_replaced")


def secret_confirm_delete(request: Request) -> Response:
    """Ask before deleting: tasks that reference it fail from then on."""
    who = require(request, "admin")
    name = str(request.path_params["name"])
    found = [s for s in store.list_secrets(database(request), who.tenant) if s["name"] == name]
    if not found:
        raise NotFound(f"secret: no secret {name[:80]!r} in tenant {who.tenant!r}")
    users = store.referencing_tasks(database(request), who.tenant, name)
    return render(request, "web/secret_delete.html", {"secret": found[0], "users": users})


def secret_delete(request: Request) -> Response:
    who = require(request, "admin")
    name = str(request.path_params["name"])
    with database(request).transaction() as tx:
        store.delete_secret(tx, who.tenant, name)
        audit.record(
            tx, actor(request), "secret_delete", tenant=who.tenant, target=f"secret {name}"
        )
    return done("/secrets", "secret_deleted")


def _by(who: Principal) -> str:
    return f"{who.kind} {who.ref}"


routes = [
    Route("/secrets", secret_list, methods=["GET"], name="secrets"),
    Route("/secrets", secret_set, methods=["POST"]),
    Route("/secrets/{name}/delete", secret_confirm_delete, methods=["GET"]),
    Route("/secrets/{name}/delete", secret_delete, methods=["POST"]),
]
