"""``/account``: who you are signed in as, your live sessions, "sign out everywhere", a
password change (users); for an admin, the tenant's users, each with "sign out
everywhere". ``/audit``: the tenant's audit log (admins).

Every action here ends sessions at their next request (they are looked up on each one,
:mod:`pgsched.web.session_store`) and closes their open log streams within about a second.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ..errors import ValidationError
from . import audit, session_store
from .access import actor, database, require
from .api import MAX_ID
from .credentials import authenticate_user, end_user_sessions, list_users, set_password
from .pages import PAGE_SIZE, done, field, keyset, notice
from .rendering import render
from .session import drop_cookie, sign_in


def account(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    return render(
        request,
        "web/account.html",
        {
            "sessions": session_store.live(db, who),
            "users": list_users(db, who.tenant) if who.has("admin") else [],
            "notice": notice(request),
            "error": None,
        },
    )


def sign_out_everywhere(request: Request) -> Response:
    """End every session of the signed-in token or user, this one too."""
    who = require(request, "viewer")
    session_store.sign_out_everywhere(database(request), who, actor(request))
    response = RedirectResponse("/login", status_code=303)
    drop_cookie(response)  # this one has ended with the others
    return response


def change_password(request: Request) -> Response:
    """A user's new password (the current one asked first): every session of theirs ends,
    and this browser is signed in again with a new one."""
    who = require(request, "viewer")
    db = database(request)
    problem = None
    if who.kind != "user":
        problem = "Signed in with a token: a token has no password."
    elif authenticate_user(db, who.ref, str(field(request, "current", max_length=1000))) is None:
        problem = "current: that is not your current password."
    elif field(request, "new", max_length=1000) != field(request, "confirm", max_length=1000):
        problem = "confirm: the two new passwords differ."
    if problem is None:
        try:
            set_password(db, who.ref, field(request, "new"), tenant=who.tenant, by=actor(request))
        except ValidationError as exc:
            problem = str(exc)
    if problem is not None:
        return render(
            request,
            "web/account.html",
            {
                "sessions": session_store.live(db, who),
                "users": [],
                "notice": None,
                "error": problem,
            },
            status_code=422,
        )
    response = done("/account", "password_changed")
    sign_in(request, response, who)  # the old sessions, this browser's too, have ended
    return response


def sign_out_user(request: Request) -> Response:
    """An admin ends every session of a user of the tenant."""
    who = require(request, "admin")
    username = field(request, "username", max_length=200)
    end_user_sessions(database(request), username, tenant=who.tenant, by=actor(request))
    if who.kind == "user" and who.ref == username:
        return RedirectResponse("/login", status_code=303)
    return done("/account", "user_signed_out")


def audit_page(request: Request) -> Response:
    who = require(request, "admin")
    before = request.query_params.get("before", "")
    action = request.query_params.get("action") or None
    rows = audit.events(
        database(request),
        audit.scope(who),
        action=action if action in audit.ACTIONS else None,
        before=int(before) if before.isdigit() and int(before) <= MAX_ID else None,
        limit=PAGE_SIZE + 1,
    )
    return render(
        request,
        "web/audit.html",
        {
            "page": keyset(request, rows, PAGE_SIZE, "id"),
            "actions": audit.ACTIONS,
            "action": action,
        },
    )


routes = [
    Route("/account", account, methods=["GET"], name="account"),
    Route("/account/sign-out-everywhere", sign_out_everywhere, methods=["POST"]),
    Route("/account/password", change_password, methods=["POST"]),
    Route("/users/sign-out", sign_out_user, methods=["POST"]),
    Route("/audit", audit_page, methods=["GET"], name="audit"),
]
