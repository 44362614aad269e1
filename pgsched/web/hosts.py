"""The Host allow-list: a request whose ``Host`` header names another host is answered 400.

A page of another site can make a browser reach a web admin on 127.0.0.1 under its own
name (DNS rebinding: evil.example resolves to 127.0.0.1 a moment later), and the browser
then treats the admin as evil.example's own origin; refusing a Host that is not the
admin's own name stops it. By default (:func:`default_hosts`) the names of the address it
listens on are allowed; ``--allowed-host`` names others (``*.example.com`` for a domain's
hosts, ``*`` for any).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listening address or name) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_hosts(bind: str) -> tuple[str, ...]:
    """The hosts allowed when none are given, for a server listening on ``bind``: the
    loopback names when it is a loopback address, ``bind`` itself otherwise. An address
    that listens everywhere (``0.0.0.0``, ``::``) has no name of its own: it needs
    ``--allowed-host`` (:meth:`pgsched.node.WebSettings.validate` says so)."""
    if is_loopback(bind):
        return tuple(dict.fromkeys((bind.strip("[]").lower(), *LOOPBACK_NAMES)))
    return (bind.strip("[]").lower(),)


def host_of(header: str) -> str:
    """The host of a ``Host`` header, without its port, lowercased (``[::1]:8080`` is
    ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def allowed(host: str, patterns: Iterable[str]) -> bool:
    """Whether ``host`` (see :func:`host_of`) matches one of ``patterns``: a name, ``*``, or
    ``*.domain`` (the domain's hosts, not the domain itself)."""
    for pattern in patterns:
        if pattern == "*" or host == pattern:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
            return True
    return False


class AllowedHostsMiddleware:
    """Answers 400 (the API's error shape under ``/api/``, plain text otherwise) to a request
    whose Host is not allowed; passes everything else to ``app``."""

    def __init__(self, app: ASGIApp, *, hosts: Iterable[str]):
        self.app = app
        self.hosts = tuple(h.strip("[]").lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope).get("host", "")
        if allowed(host_of(given), self.hosts):
            await self.app(scope, receive, send)
            return
        message = f"host: {given[:100]!r} is not an allowed host of this web admin"
        if scope["path"].startswith("/api/"):
            body = json.dumps(
                {"error": {"code": "bad_request", "message": message, "field": "host"}}
            ).encode()
            kind = b"application/json"
        else:
            body, kind = f"400: {message}".encode(), b"text/plain; charset=utf-8"
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
