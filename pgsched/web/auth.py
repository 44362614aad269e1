"""Signing in and out of the web admin: ``GET/POST /login``, ``POST /logout``.

A person signs in with an API token or a username and password; either starts a signed
session (:mod:`pgsched.web.session`). ``GET /login?token=...`` signs in straight away
(the one-time link ``pgsched dev`` prints) and redirects.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from . import audit
from .access import database, form, principal
from .credentials import Principal, authenticate_token, authenticate_user
from .rendering import render
from .session import client_ip, sign_in, sign_out


def _next(value: object) -> str:
    """Where to go after signing in: a path on this site only (no ``//host`` or scheme),
    so the login page cannot be used to redirect elsewhere."""
    # browsers drop tabs and newlines from URLs ("/\t/evil" is "//evil") and read "\" as "/"
    if (
        isinstance(value, str)
        and value.startswith("/")
        and len(value) <= 2000
        and not any(ch <= " " or ch == "\\" for ch in value)
        and not value.startswith("//")
    ):
        return value
    return "/"


def _signed_in(request: Request, who: Principal, target: str) -> Response:
    response = RedirectResponse(target, status_code=303)
    sign_in(request, response, who)
    return response


def _followed_from_elsewhere(request: Request) -> bool:
    """Whether the browser says this request comes from a link or form of another site
    (Fetch Metadata, ``Sec-Fetch-Site``). A sign-in link opened from a terminal or typed in
    is ``none``; clients that send no such header are not browsers, or old ones."""
    return request.headers.get("sec-fetch-site", "none") in ("cross-site", "same-site")


def login_page(request: Request) -> Response:
    target = _next(request.query_params.get("next"))
    token = request.query_params.get("token")
    if token and _followed_from_elsewhere(request):
        # login CSRF: another site would sign the visitor in as a principal of its choosing
        # (whose tenant then receives what they create). The link is then pasted instead.
        return render(
            request,
            "web/login.html",
            {
                "next": target,
                "error": "A sign-in link only works when "
                "opened directly (pasted or typed in), not followed from another site.",
                "username": "",
            },
            status_code=403,
        )
    if token:
        who = authenticate_token(database(request), token)
        if who is not None:
            # the link's token leaves the address bar with this redirect
            return _signed_in(request, who, target)
        audit.sign_in_failed(
            database(request), username="", token=token, ip=client_ip(request), reason="link"
        )
        return render(
            request,
            "web/login.html",
            {
                "next": target,
                "error": "That sign-in link is not valid (the token is unknown or revoked).",
                "username": "",
            },
            status_code=401,
        )
    if principal(request) is not None and "next" in request.query_params:
        return RedirectResponse(target, status_code=303)
    return render(request, "web/login.html", {"next": target, "error": None, "username": ""})


def login(request: Request) -> Response:
    data = form(request)
    target = _next(data.get("next"))
    token, username, password = (str(data.get(k) or "") for k in ("token", "username", "password"))
    db = database(request)
    if token.strip():
        who = authenticate_token(db, token.strip())
        error = "That token is unknown, revoked or expired."
    else:
        who = authenticate_user(db, username, password) if username and password else None
        error = "Wrong username or password."
    if who is None:
        audit.sign_in_failed(
            db,
            username="" if token.strip() else username,
            token=token.strip(),
            ip=client_ip(request),
            reason="unknown, revoked or expired" if token.strip() else "wrong password",
        )
        return render(
            request,
            "web/login.html",
            {"next": target, "error": error, "username": username},
            status_code=401,
        )
    return _signed_in(request, who, target)


def logout(request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303)
    sign_out(request, response)
    return response


routes = [
    Route("/login", login_page, methods=["GET"], name="login_page"),
    Route("/login", login, methods=["POST"], name="login"),
    Route("/logout", logout, methods=["POST"], name="logout"),
]
