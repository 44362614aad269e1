"""Errors of the web admin and the API, and how each becomes a response.

The API answers every error with one JSON shape::

    {"error": {"code": "validation", "message": "name: '' must be ...", "field": "name"}}

(``field`` is null when no single field is at fault). Pages show the message on an error
page, and a page that needs a sign-in redirects to ``/login``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from ..errors import (
    ConnectionFailed,
    DatabaseError,
    NotFound,
    PgschedError,
    TransientError,
    ValidationError,
)
from .access import Forbidden, NotSignedIn

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "validation",
    503: "unavailable",
}


class ApiError(Exception):
    """An error answered with HTTP ``status``; ``code`` is a stable word for programs,
    ``message`` names the field and the value, ``field`` the field at fault (or None)."""

    def __init__(
        self, status: int, message: str, *, code: str | None = None, field: str | None = None
    ):
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message
        self.field = field


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def error_response(
    request: Request,
    status: int,
    message: str,
    *,
    code: str | None = None,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """The error as JSON for the API, as the error page otherwise."""
    if is_api(request):
        body = {
            "error": {
                "code": code or _CODES.get(status, "error"),
                "message": message,
                "field": field,
            }
        }
        return JSONResponse(body, status_code=status, headers=dict(headers or {}))
    from .rendering import render

    return render(
        request, "web/error.html", {"status": status, "message": message}, status_code=status
    )


def _classify(exc: Exception) -> tuple[int, str | None, str | None]:
    """(status, code, field) of an exception raised by a view."""
    if isinstance(exc, ApiError):
        return exc.status, exc.code, exc.field
    if isinstance(exc, ValidationError):
        return 422, "validation", exc.field
    if isinstance(exc, NotFound):
        return 404, None, None
    if isinstance(exc, TransientError):
        return 409, "conflict", None
    if isinstance(exc, ConnectionFailed):
        return 503, None, None
    if isinstance(exc, DatabaseError):  # a value PostgreSQL refused (a constraint, a range)
        return 422, "rejected", None
    return 400, None, None


async def on_error(request: Request, exc: Exception) -> Response:
    """Exception handler for ApiError and every PgschedError."""
    status, code, field = _classify(exc)
    message = exc.message if isinstance(exc, ApiError) else str(exc)
    return error_response(request, status, message, code=code, field=field)


async def on_not_signed_in(request: Request, exc: Exception) -> Response:
    if is_api(request):
        return error_response(request, 401, str(exc), headers={"WWW-Authenticate": "Bearer"})
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)


async def on_forbidden(request: Request, exc: Exception) -> Response:
    return error_response(request, 403, str(exc))


async def on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = exc.detail if exc.status_code != 404 else f"path: {request.url.path!r} does not exist"
    return error_response(request, exc.status_code, str(message), headers=exc.headers)


async def on_crash(request: Request, exc: Exception) -> Response:
    """A bug: the error shape (no details; the traceback goes to the server's log)."""
    if is_api(request):
        return error_response(
            request, 500, "internal error; the server log has the details", code="internal"
        )
    return PlainTextResponse("500: internal error; the server log has the details", status_code=500)


HANDLERS: dict[Any, Any] = {
    ApiError: on_error,
    PgschedError: on_error,
    NotSignedIn: on_not_signed_in,
    Forbidden: on_forbidden,
    HTTPException: on_http,
}
