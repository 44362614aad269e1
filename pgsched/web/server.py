"""Serving the app with uvicorn in a thread, stopped by an event (``pgsched web`` and
``pgsched dev`` run it beside their signal handling)."""

from __future__ import annotations

import errno
import socket
import threading

import uvicorn
from starlette.applications import Starlette

from ..errors import ConfigError


def free_port(host: str, first: int, tries: int = 20) -> int:
    """The first port from ``first`` on which ``host`` can listen (``tries`` ports at most).
    Raises ConfigError when none is free."""
    for port in range(first, first + tries):
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            try:
                probe.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    continue
                raise ConfigError(
                    f"host: cannot listen on {host!r} port {port}: {exc.strerror}"
                ) from None
            return port
    if tries == 1:
        raise ConfigError(f"port: {first} is in use on {host!r}; pass another --port")
    raise ConfigError(
        f"port: {first} to {first + tries - 1} are all in use on {host!r}; pass --port"
    )


def serve_until(app: Starlette, host: str, port: int, stop: threading.Event) -> None:
    """Serve ``app`` in the calling thread until ``stop`` is set (then end open log
    streams, through the app's ``state.closing`` event, finish open requests and return)."""
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=5,
        )
    )

    def watch() -> None:
        stop.wait()
        closing = getattr(app.state, "closing", None)
        if closing is not None:
            closing.set()
        server.should_exit = True

    threading.Thread(target=watch, name="web-stop", daemon=True).start()
    server.run()  # outside the main thread uvicorn installs no signal handlers
