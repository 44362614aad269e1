"""Session cookies, CSRF checks and the principal of each request.

A signed-in browser carries the cookie ``pgsched_session``: a random session id and nothing
else (256 bits, ``secrets.token_urlsafe(32)``), whose SHA-256 names a row of
``pgsched.web_session`` (:mod:`pgsched.web.session_store`). Every request looks the row up
against the database's ``now()``: sign-out, a password change, "sign out everywhere", a
revoked or expired token and a deleted user end a session at its next request, whichever
web process serves it, and a stolen copy of the cookie ends with it. A session lasts
``max_age`` seconds by the database's clock (the web hosts' clocks play no part). Both
cookies are HttpOnly and SameSite=Lax, Secure behind HTTPS.

A visitor who has not signed in needs a CSRF token too, for the sign-in form (login CSRF).
It gets the cookie ``pgsched_csrf``: ``{"csrf": ...}`` signed with itsdangerous (HMAC over
the payload with the key stored in ``pgsched.web_key``), and no row: a flood of anonymous
page views writes nothing to the database. That cookie lets nobody in; it only proves, on
the form's POST, that the form came from this site.

CSRF (OWASP's synchronizer token pattern): every request that is not GET/HEAD/OPTIONS must
carry the session's token (or, signed out, the anonymous cookie's) as the form field
``csrf_token`` or the header ``X-CSRF-Token``, unless it authenticates with an
``Authorization: Bearer`` header (which a browser never adds on its own to a cross-site
request). Without it: 403.
"""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Callable

import anyio.to_thread
from itsdangerous import BadSignature, URLSafeSerializer
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import audit, session_store
from .credentials import Principal

COOKIE = "pgsched_session"  # the session id of a signed-in browser
ANON_COOKIE = "pgsched_csrf"  # the signed CSRF token of a visitor not signed in
MAX_BODY = 1024 * 1024  # bytes of a request body; forms and API objects are far smaller
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

Resolver = Callable[[str | None, str | None], tuple[Principal | None, str | None]]
"""``resolve(bearer_token_or_None, session_id_or_None) -> (principal, session_csrf)`` (runs
in a thread): who the request acts as (None: nobody), and the CSRF token of its live
session (None: no live session)."""


class SessionCodec:
    """The cookies: signs and reads the anonymous CSRF cookie with ``secret``; ``max_age``:
    seconds a sign-in lasts (and the session cookie's Max-Age, for the browser)."""

    def __init__(self, secret: str, max_age: int):
        self.serializer = URLSafeSerializer(secret, salt="pgsched.web.csrf.v3")
        self.max_age = max_age

    def load_anonymous(self, cookie: str | None) -> str | None:
        """The CSRF token in an anonymous ``cookie``, or None when missing or tampered with."""
        if not cookie:
            return None
        try:
            data = self.serializer.loads(cookie)
        except BadSignature:
            return None
        csrf = data.get("csrf") if isinstance(data, dict) else None
        return csrf if isinstance(csrf, str) else None

    def anonymous_cookie(self, csrf: str, secure: bool) -> str:
        """A ``Set-Cookie`` value carrying the anonymous CSRF token ``csrf`` (a session
        cookie for the browser: it goes when the browser closes)."""
        return _cookie(ANON_COOKIE, self.serializer.dumps({"csrf": csrf}), None, secure)

    def session_cookie(self, session_id: str, secure: bool) -> str:
        """A ``Set-Cookie`` value carrying ``session_id``."""
        return _cookie(COOKIE, session_id, self.max_age, secure)


def _cookie(name: str, value: str, max_age: int | None, secure: bool) -> str:
    response = Response()
    response.set_cookie(
        name, value, max_age=max_age, path="/", httponly=True, samesite="lax", secure=secure
    )
    return response.headers["set-cookie"]


def client_ip(request: Request) -> str | None:
    """The address the request came from (the proxy's, behind one: a forwarded header is
    not trusted, anyone can send it)."""
    return request.client.host if request.client else None


def sign_in(request: Request, response: Response, who: Principal) -> bool:
    """Start a new session for ``who`` on ``response`` and record the sign-in (a new CSRF
    token too: the anonymous one may have been seen by someone else before signing in).
    False when ``who``'s token or user went away meanwhile (nobody is signed in)."""
    codec: SessionCodec = request.app.state.sessions
    started = session_store.start(
        request.app.state.db,
        who,
        max_age=codec.max_age,
        by=audit.Actor(who.kind, who.ref, client_ip(request)),
    )
    if started is None:
        return False
    response.headers.append(
        "set-cookie", codec.session_cookie(started[0], request.url.scheme == "https")
    )
    return True


def sign_out(request: Request, response: Response) -> None:
    """End the request's session (its row: a copy of the cookie no longer signs in) and
    record it; the browser drops the cookie."""
    session_id = request.cookies.get(COOKIE)
    who: Principal | None = getattr(request.state, "principal", None)
    if session_id and who is not None:
        session_store.end(
            request.app.state.db, session_id, audit.Actor(who.kind, who.ref, client_ip(request))
        )
    drop_cookie(response)


def drop_cookie(response: Response) -> None:
    """The browser drops its session cookie (the session itself is ended elsewhere)."""
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="lax")


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when it exceeds MAX_BODY."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # http.disconnect

    return replay


class SessionMiddleware:
    """Puts ``session`` (``{"csrf": ..., "id": session id or None}``), ``principal``,
    ``recheck`` (a function, to call in a thread, that resolves the request's credential
    again: the principal, or None once it ended) and (non-GET) ``body`` and ``form`` on
    ``request.state``, and refuses non-GET requests without the CSRF token.

    ``on_refused(request, status, message)`` builds the 400/403/413 response (JSON for the
    API, a page otherwise).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        codec: SessionCodec,
        resolve: Resolver,
        on_refused: Callable[[Request, int, str], Response],
    ):
        self.app = app
        self.codec = codec
        self.resolve = resolve
        self.on_refused = on_refused

    def _recheck(self, bearer: str | None, session_id: str | None) -> Principal | None:
        return self.resolve(bearer, session_id)[0]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        state = scope.setdefault("state", {})
        bearer = _bearer(request)
        session_id = request.cookies.get(COOKIE)
        who, session_csrf = await anyio.to_thread.run_sync(self.resolve, bearer, session_id)
        anonymous = (
            None if session_csrf else self.codec.load_anonymous(request.cookies.get(ANON_COOKIE))
        )
        known = session_csrf or anonymous  # a CSRF token this browser was given before
        csrf = known or secrets.token_urlsafe(32)
        state["session"] = {"csrf": csrf, "id": session_id if session_csrf else None}
        state["principal"] = who
        state["recheck"] = functools.partial(self._recheck, bearer, session_id)
        if request.method not in SAFE_METHODS:
            body = await _read_body(receive)
            if body is None:
                await self.on_refused(request, 413, f"body: larger than {MAX_BODY} bytes")(
                    scope, receive, send
                )
                return
            receive = _replay(body, receive)
            state["body"] = body
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
                try:
                    state["form"] = await Request(scope, _replay(body, receive)).form()
                except (HTTPException, MultiPartException) as exc:  # a malformed multipart body
                    detail = exc.detail if isinstance(exc, HTTPException) else exc.message
                    await self.on_refused(request, 400, f"body: not a readable form ({detail})")(
                        scope, receive, send
                    )
                    return
            # an API call with neither a token nor a cookie is answered 401 by its endpoint
            if bearer is None and (known or not scope["path"].startswith("/api/")):
                given = request.headers.get("x-csrf-token") or (state.get("form") or {}).get(
                    "csrf_token"
                )
                if not (
                    known
                    and isinstance(given, str)
                    and hmac.compare_digest(given.encode(errors="replace"), known.encode())
                ):
                    await self.on_refused(
                        request,
                        403,
                        "csrf_token: missing or not this session's; "
                        "reload the page and submit again",
                    )(scope, receive, send)
                    return
        cookies: list[str] = []
        secure = request.url.scheme == "https"
        if session_id and not session_csrf and bearer is None:  # ended or unknown: dropped
            cookies.append(_cookie(COOKIE, "", 0, secure))
        if not known and not scope["path"].startswith("/api/"):
            cookies.append(self.codec.anonymous_cookie(csrf, secure))
        if not cookies:
            await self.app(scope, receive, send)
            return

        async def send_with_cookies(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                set_already = headers.getlist("set-cookie")
                for cookie in cookies:
                    name = cookie.partition("=")[0]
                    if not any(v.startswith(name + "=") for v in set_already):
                        headers.append("set-cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_with_cookies)
