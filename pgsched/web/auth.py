"""Signing in and out of the web admin: ``GET/POST /login``, ``POST /logout``.

A person signs in with an API token or a username and password; either starts a session
stored in the database (:mod:`pgsched.web.session`); each failed check is audited. ``GET /login?token=...`` signs in straight away
(the one-time link ``pgsched dev`` prints) and redirects, when it was opened directly
(:func:`link_source`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from . import audit
from .access import database, form, principal
from .credentials import Principal, authenticate_token, authenticate_user
from .hashing import HashingBusy, PasswordHashing
from .rendering import render
from .session import client_ip, sign_in, sign_out
from .throttle import SignInThrottle


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


def _same_origin(url: str, request: Request) -> bool:
    """Whether ``url`` (an Origin or Referer) is this site: scheme, host and port as the
    request was addressed (its Host header, which the allow-list has vetted)."""
    try:
        given = urlsplit(url)
        port = given.port
    except ValueError:
        return False
    here = request.url
    default = {"http": 80, "https": 443}
    return (
        given.scheme == here.scheme
        and (given.hostname or "") == (here.hostname or "")
        and (port or default.get(given.scheme)) == (here.port or default.get(here.scheme))
    )


def link_source(request: Request) -> str:
    """Where a ``GET /login?token=`` comes from: ``"direct"`` (pasted, typed, opened from a
    terminal, or a link of this site), ``"elsewhere"`` (another site's link or form) or
    ``"unknown"``. Fetch Metadata (``Sec-Fetch-Site``) decides when the browser sends it;
    else ``Origin``, then ``Referer``. Neither is ``"unknown"``: an old browser following
    another site's ``rel=noreferrer`` link sends neither, so the link is then not
    trusted to sign in on its own (see :func:`login_page`)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return "direct" if site in ("none", "same-origin") else "elsewhere"
    for header in ("origin", "referer"):
        value = request.headers.get(header)
        if value:
            return "direct" if _same_origin(value, request) else "elsewhere"
    return "unknown"


def _login_form(
    request: Request,
    target: str,
    *,
    error: str | None = None,
    notice: str | None = None,
    username: str = "",
    token: str = "",
    status_code: int = 200,
    retry_after: int | None = None,
) -> Response:
    response = render(
        request,
        "web/login.html",
        {
            "next": target,
            "error": error,
            "notice": notice,
            "username": username,
            "token": token,
        },
        status_code=status_code,
    )
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


def _address(request: Request) -> str:
    """The client's address as the throttle counts it (:func:`client_ip`; "" when unknown)."""
    return client_ip(request) or ""


def _refused(status: int, message: str, retry_after: int) -> Response:
    """A sign-in refused for now (429, 503): a short text, no page, so that a flood of
    them costs little; ``Retry-After`` says when to try again (seconds)."""
    return PlainTextResponse(
        f"{status}: {message}; try again in {retry_after} s.",
        status_code=status,
        headers={"Retry-After": str(retry_after)},
    )


def _throttled(wait: int) -> Response:
    return _refused(429, "too many failed sign-ins", wait)


def _sign_in_token(request: Request, token: str) -> Principal | int | None:
    """The principal of ``token``, None when it is unknown or revoked, or the seconds to
    wait when this address has failed too often."""
    attempt = throttle(request).attempt(_address(request))
    if isinstance(attempt, int):
        return attempt
    who = authenticate_token(database(request), token)
    if who is not None:
        attempt.succeeded()
    return who


def login_page(request: Request) -> Response:
    target = _next(request.query_params.get("next"))
    token = request.query_params.get("token")
    if token:
        source = link_source(request)
        if source == "elsewhere":
            # login CSRF: another site would sign the visitor in as a principal of its
            # choosing (whose tenant then receives what they create). The link is then pasted.
            return _login_form(
                request,
                target,
                error="A sign-in link only works when "
                "opened directly (pasted or typed in), not followed from another site.",
                status_code=403,
            )
        if source == "unknown":
            # Neither Fetch Metadata nor Origin nor Referer: it may be another site's link, so
            # the form is shown filled in; signing in takes a press of the button (a POST with
            # this session's CSRF token, which another site cannot read nor send)
            return _login_form(
                request,
                target,
                notice="Press Sign in to sign in with the token of this link.",
                token=token,
            )
        who = _sign_in_token(request, token)
        if isinstance(who, int):
            return _throttled(who)
        if who is not None:
            # the link's token leaves the address bar with this redirect
            return _signed_in(request, who, target)
        audit.sign_in_failed(
            database(request), username="", token=token, ip=client_ip(request), reason="link"
        )
        return _login_form(
            request,
            target,
            error="That sign-in link is not valid (the token is unknown, revoked or expired).",
            status_code=401,
        )
    if principal(request) is not None and "next" in request.query_params:
        return RedirectResponse(target, status_code=303)
    return _login_form(request, target)


async def login(request: Request) -> Response:
    """The sign-in form: a token, or a username and password. Throttled before anything is
    hashed (:mod:`pgsched.web.throttle`: 429 with ``Retry-After``); the hash itself runs on
    the bounded executor (:mod:`pgsched.web.hashing`: 503 with ``Retry-After`` when full).
    Refusals are decided here in the event loop, without a thread: a flood of them must
    not queue ahead of other requests for Starlette's thread pool."""
    data = form(request)
    target = _next(data.get("next"))
    token, username, password = (str(data.get(k) or "") for k in ("token", "username", "password"))
    who: Principal | int | None = None
    if token.strip():
        who = await anyio.to_thread.run_sync(_sign_in_token, request, token.strip())
        if isinstance(who, int):
            return _throttled(who)
        error = "That token is unknown, revoked or expired."
    elif username and password:
        attempt = throttle(request).attempt(_address(request), username)
        if isinstance(attempt, int):
            return _throttled(attempt)
        try:
            if hashing(request).full():
                raise HashingBusy()
            who = await anyio.to_thread.run_sync(
                authenticate_user, database(request), username, password, hashing(request)
            )
        except HashingBusy as busy:
            attempt.withdrawn()  # not checked: not held against the username
            return _refused(503, "too many sign-ins at once", busy.retry_after)
        if who is not None:
            attempt.succeeded()
        error = "Wrong username or password."
    else:
        error = "Wrong username or password."
    if who is None:
        await anyio.to_thread.run_sync(_failed, request, token.strip(), username)
        return _login_form(request, target, error=error, username=username, status_code=401)
    assert isinstance(who, Principal)
    return await anyio.to_thread.run_sync(_signed_in, request, who, target)


def _failed(request: Request, token: str, username: str) -> None:
    """Audit a sign-in that was checked and failed (a refused one, 429 or 503, is not: it
    was never checked, and a flood of them must cost nothing)."""
    audit.sign_in_failed(
        database(request),
        username="" if token else username,
        token=token,
        ip=client_ip(request),
        reason="unknown, revoked or expired" if token else "wrong password",
    )


def throttle(request: Request) -> SignInThrottle:
    """The app's sign-in throttle (``app.state.throttle``)."""
    return request.app.state.throttle  # type: ignore[no-any-return]


def hashing(request: Request) -> PasswordHashing:
    """The app's password-hashing executor (``app.state.hashing``)."""
    return request.app.state.hashing  # type: ignore[no-any-return]


def logout(request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303)
    sign_out(request, response)
    return response


routes = [
    Route("/login", login_page, methods=["GET"], name="login_page"),
    Route("/login", login, methods=["POST"], name="login"),
    Route("/logout", logout, methods=["POST"], name="logout"),
]
