"""Signed session cookies, CSRF checks and the principal of each request.

The cookie ``pgsched_session`` holds ``{"csrf": ..., "kind": "token"|"user", "ref": ...,
"until": ...}`` (and for a user ``"since"``, when the account was made) signed with
itsdangerous (HMAC-SHA1 over the payload; a changed byte makes it invalid). It is HttpOnly
and SameSite=Lax, Secure behind HTTPS. A sign-in lasts ``max_age`` seconds by the
database's clock: ``until`` is the database's ``now()`` at sign-in plus ``max_age`` (seconds
since the epoch), checked against the database's ``now()`` when the session is resolved
(:func:`pgsched.web.credentials.principal_of_session`). The web hosts' clocks play no part:
a sign-in on one whose clock is minutes off is valid on the others (itsdangerous's own
timestamp was that host's clock, and the others refused it as not yet made). Every visitor of a page gets one, signed in or not, so that the sign-in
form has a CSRF token too (login CSRF).

CSRF (OWASP's synchronizer token pattern): every request that is not GET/HEAD/OPTIONS must
carry the session's token as the form field ``csrf_token`` or the header ``X-CSRF-Token``,
unless it authenticates with an ``Authorization: Bearer`` header (which a browser never
adds on its own to a cross-site request). Without it: 403.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from itsdangerous import BadSignature, URLSafeSerializer
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .credentials import Principal

COOKIE = "pgsched_session"
MAX_BODY = 1024 * 1024  # bytes of a request body; forms and API objects are far smaller
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

Resolver = Callable[[str | None, dict[str, Any]], Principal | None]
"""``resolve(bearer_token_or_None, session) -> Principal | None`` (runs in a thread)."""


class SessionCodec:
    """Signs and reads session cookies with ``secret``; ``max_age``: seconds a sign-in lasts
    (and the cookie's own Max-Age, for the browser)."""

    def __init__(self, secret: str, max_age: int):
        self.serializer = URLSafeSerializer(secret, salt="pgsched.web.session.v2")
        self.max_age = max_age

    def load(self, cookie: str | None) -> dict[str, Any] | None:
        """The session in ``cookie``, or None when it is missing or tampered with (whether a
        sign-in it holds has expired is the database's to tell: ``until``)."""
        if not cookie:
            return None
        try:
            data = self.serializer.loads(cookie)
        except BadSignature:
            return None
        return data if isinstance(data, dict) and isinstance(data.get("csrf"), str) else None

    def cookie(self, session: dict[str, Any], secure: bool) -> str:
        """A ``Set-Cookie`` value carrying ``session``."""
        response = Response()
        response.set_cookie(
            COOKIE,
            self.serializer.dumps(session),
            max_age=self.max_age,
            path="/",
            httponly=True,
            samesite="lax",
            secure=secure,
        )
        return response.headers["set-cookie"]


def new_session(**fields: Any) -> dict[str, Any]:
    """A session with a fresh CSRF token and ``fields`` (``kind``, ``ref``)."""
    return {"csrf": secrets.token_urlsafe(32), **fields}


def sign_in(request: Request, response: Response, who: Principal) -> None:
    """Start a new session for ``who`` on ``response`` (a new CSRF token too: the old
    session's token may have been seen by someone else before signing in)."""
    codec: SessionCodec = request.app.state.sessions
    account = {"since": who.since} if who.since else {}
    until = request.app.state.db.now().timestamp() + codec.max_age  # the database's clock
    response.headers.append(
        "set-cookie",
        codec.cookie(
            new_session(kind=who.kind, ref=who.ref, until=until, **account),
            request.url.scheme == "https",
        ),
    )


def sign_out(response: Response) -> None:
    """End the session: the browser drops the cookie."""
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
    """Puts ``session``, ``principal`` and (non-GET) ``body`` and ``form`` on
    ``request.state``, and refuses non-GET requests without the session's CSRF token.

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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        state = scope.setdefault("state", {})
        loaded = self.codec.load(request.cookies.get(COOKIE))
        session = loaded or new_session()
        state["session"] = session
        bearer = _bearer(request)
        state["principal"] = await anyio.to_thread.run_sync(
            self.resolve, bearer, session if loaded else {}
        )
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
            # an API call with neither a token nor a session is answered 401 by its endpoint
            if bearer is None and (loaded or not scope["path"].startswith("/api/")):
                given = request.headers.get("x-csrf-token") or (state.get("form") or {}).get(
                    "csrf_token"
                )
                if not (
                    loaded
                    and isinstance(given, str)
                    and hmac.compare_digest(
                        given.encode(errors="replace"), session["csrf"].encode()
                    )
                ):
                    await self.on_refused(
                        request,
                        403,
                        "csrf_token: missing or not this session's; "
                        "reload the page and submit again",
                    )(scope, receive, send)
                    return
        if loaded or scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        cookie = self.codec.cookie(session, request.url.scheme == "https")

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if not any(v.startswith(COOKIE + "=") for v in headers.getlist("set-cookie")):
                    headers.append("set-cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_with_cookie)
