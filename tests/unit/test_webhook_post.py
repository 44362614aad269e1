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


def _certificate(name: str, folder) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """A self-signed certificate for ``name`` and its key, as PEM files in ``folder``."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


def test_https_goes_to_the_checked_address_and_still_verifies_the_name(
    allow_loopback: None, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """The connection is pinned to the address checked, yet TLS sends the URL's name (SNI)
    and checks the certificate against it, as without the pin."""
    import ssl

    cert, key = _certificate("hooks.example", tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment]
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(f"{self.headers['Host']} {self.path}")
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    real = socket.getaddrinfo

    def answer(host, port, *args, **kwargs):  # type: ignore[no-untyped-def]
        return real("127.0.0.1" if host == "hooks.example" else host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", answer)
    port = server.server_address[1]
    try:
        untrusted = webhooks.post(f"https://hooks.example:{port}/hook", {}, timeout=5.0)
        assert untrusted is not None and "CERTIFICATE_VERIFY_FAILED" in untrusted
        monkeypatch.setenv("SSL_CERT_FILE", cert)  # now trusted: delivered, name checked
        assert webhooks.post(f"https://hooks.example:{port}/hook", {}, timeout=5.0) is None
        assert names[-1] == "hooks.example" and seen == [f"hooks.example:{port} /hook"]
    finally:
        server.shutdown()
        server.server_close()
