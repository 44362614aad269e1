"""The composition root of the web admin and the REST API.

Routes come from the modules listed in :data:`ROUTE_MODULES`: each exposes
``routes: list[starlette.routing.BaseRoute]``, and :func:`create_app` mounts them in that
order (the first match wins). To add pages, write ``pgsched/web/pages_<subject>.py`` with
its ``routes`` and list the module here.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ..db import Database
from ..resources import resource_dir
from . import (
    api_admin,
    api_dags,
    api_executions,
    api_limits,
    api_tasks,
    auth,
    openapi,
    pages_account,
    pages_cluster,
    pages_dags,
    pages_dashboard,
    pages_dlq,
    pages_executions,
    pages_limits,
    pages_secrets,
    pages_tasks,
    prometheus,
    session_store,
)
from .credentials import Principal, authenticate_token, session_key
from .errors import HANDLERS, error_response, on_crash
from .hashing import PasswordHashing
from .headers import SecurityHeadersMiddleware
from .hosts import AllowedHostsMiddleware
from .preview import install_loader
from .rendering import templates
from .session import SessionCodec, SessionMiddleware
from .throttle import Limit, SignInGate, SignInThrottle

if TYPE_CHECKING:
    from ..node import WebSettings

ROUTE_MODULES: tuple[ModuleType, ...] = (
    auth,
    pages_dashboard,
    pages_tasks,
    pages_executions,
    pages_dags,
    pages_dlq,
    pages_limits,
    pages_cluster,
    pages_account,
    pages_secrets,
    api_tasks,
    api_executions,
    api_dags,
    api_admin,
    api_limits,
    openapi,
    prometheus,
)
"""Modules whose ``routes`` make up the app, in matching order."""

SESSION_MAX_AGE = 12 * 3600  # seconds a sign-in lasts


def routes() -> list[BaseRoute]:
    """Every route of the app: those of :data:`ROUTE_MODULES`, then ``/static``."""
    found: list[BaseRoute] = [route for module in ROUTE_MODULES for route in module.routes]
    found.append(
        Mount(
            "/static",
            StaticFiles(directory=resource_dir("templates") / "web" / "static"),
            name="static",
        )
    )
    return found


class _WebApp(Starlette):
    """Starlette with the security headers outside everything, so that even the answer to
    a crash (sent by Starlette's outermost ServerErrorMiddleware) carries them."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeadersMiddleware(super().build_middleware_stack())


def create_app(
    dsn_or_db: str | Database,
    *,
    secret: str | None = None,
    session_max_age: int = SESSION_MAX_AGE,
    pool_size: int = 8,
    throttle: SignInThrottle | None = None,
    hashing: PasswordHashing | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The web admin and API over the database ``dsn_or_db`` (a DSN, whose pool the app
    opens now and closes at shutdown, or an open :class:`Database`, left open).

    ``secret`` signs the anonymous CSRF cookie; by default the key stored in the database
    (made once, shared by every web process). ``session_max_age``: seconds a sign-in lasts.
    ``throttle`` limits failed sign-ins (default: :class:`SignInThrottle`'s limits);
    ``hashing`` runs password hashes on its bounded threads (default: 2 threads, 8 more
    waiting; its idle threads cost nothing); ``allowed_hosts``: the Host names served
    (:mod:`pgsched.web.hosts`; None: any, as for tests and embedding).
    Raises ConnectionFailed when the database cannot be reached.
    """
    install_loader()  # a jsonb value nested too deep for json.loads loads as TooDeep, not a 500
    owned = isinstance(dsn_or_db, str)
    db = (
        Database.connect(dsn_or_db, max_size=pool_size, application_name="pgsched web")
        if isinstance(dsn_or_db, str)
        else dsn_or_db
    )
    codec = SessionCodec(secret or session_key(db), session_max_age)

    def resolve(bearer: str | None, session_id: str | None) -> tuple[Principal | None, str | None]:
        if bearer is not None:
            return authenticate_token(db, bearer), None
        live = session_store.resolve(db, session_id)
        return (live.principal, live.csrf) if live else (None, None)

    def refused(request: Request, status: int, message: str) -> Response:
        return error_response(request, status, message)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if owned:
                db.close()

    passwords = hashing or PasswordHashing()
    sign_ins = throttle or SignInThrottle()
    middleware = [
        Middleware(SignInGate, throttle=sign_ins),
        Middleware(SessionMiddleware, codec=codec, resolve=resolve, on_refused=refused),
    ]
    if allowed_hosts is not None:
        middleware.insert(0, Middleware(AllowedHostsMiddleware, hosts=allowed_hosts))

    app = _WebApp(
        routes=routes(),
        middleware=middleware,
        exception_handlers={**HANDLERS, Exception: on_crash},
        lifespan=lifespan,
    )
    app.state.db = db
    app.state.sessions = codec
    app.state.closing = threading.Event()  # set by the server when it stops: open log streams end
    app.state.templates = templates()
    app.state.throttle = sign_ins
    app.state.hashing = passwords
    return app


def protections(settings: WebSettings) -> dict[str, Any]:
    """The keyword arguments of :func:`create_app` that ``settings`` give: the sign-in
    throttle, the password-hashing executor and the Host allow-list."""
    return {
        "throttle": SignInThrottle(
            Limit(settings.user_failures, settings.user_window),
            Limit(settings.address_failures, settings.address_window),
        ),
        "hashing": PasswordHashing(settings.hash_threads, settings.hash_queue),
        "allowed_hosts": settings.hosts(),
    }
