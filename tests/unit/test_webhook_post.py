"""POSTing a webhook to a real local HTTP receiver: what counts as delivered."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pgsched import webhooks


@pytest.fixture
def redirecting(allow_loopback: None) -> Iterator[tuple[str, list[str]]]:
    """A receiver whose /hook answers 302 to /landed (which answers 200 to anything); its
    base URL and the requests it saw ("METHOD path")."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if self.path == "/hook":
                self.send_response(302)
                self.send_header("Location", "/landed")
            else:
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_a_redirect_is_a_failed_delivery_and_is_not_followed(redirecting) -> None:
    base, seen = redirecting
    error = webhooks.post(base + "/hook", {"event": "failure"}, timeout=5.0)
    assert error is not None and error.startswith("HTTP 302") and "/landed" in error
    assert seen == ["POST /hook"]  # the payload was not turned into a GET elsewhere


@pytest.fixture
def trickling(allow_loopback: None) -> Iterator[str]:
    """A receiver that answers "200 OK" and then one header line every 0.2 s for 20 s:
    each read gets a byte well within any socket timeout. Its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            for _ in range(100):
                if done.wait(0.2):
                    return
                try:
                    conn.sendall(b"X-Slow: yes\r\n")
                except OSError:  # the sender gave up
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    done.set()
    thread.join(5)
    listener.close()


def test_the_timeout_bounds_the_whole_answer_not_each_read(trickling) -> None:
    began = time.monotonic()
    error = webhooks.post(trickling, {"event": "failure"}, timeout=1.0)
    took = time.monotonic() - began
    assert error is not None and error.startswith("TimeoutError"), error  # not delivered
    assert took < 3.0, f"the POST took {took:.1f} s with a 1 s timeout"
