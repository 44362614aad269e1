"""``pgsched web`` as people run it: a real uvicorn process serving the admin and the API,
stopped by SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import urllib.error
import urllib.request

import pytest

from pgsched.web.server import free_port

from ..helpers import Process, cli, wait_until

pytestmark = pytest.mark.e2e


def fetch(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def test_web_serves_pages_and_the_api_until_sigterm(dsn, tmp_path):
    token = cli(dsn, "token", "create", "--role", "viewer").stdout.strip()
    port = free_port("127.0.0.1", 18300)
    web = Process(dsn, "web", "--port", str(port), log_dir=tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: fetch(base + "/login")[0] == 200, timeout=30, message="the web admin to answer")
        status, body = fetch(base + "/api/v1/tasks", token)
        assert status == 200 and json.loads(body) == {"items": [], "next_cursor": None}
        assert fetch(base + "/api/v1/tasks")[0] == 401
    finally:
        assert web.stop(signal.SIGTERM) == 0, web.output
    assert web.output.rstrip().endswith("stopped")
    # a port in use is one line
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = cli(dsn, "web", "--port", str(port), check=False)
    assert busy.returncode == 1 and "Traceback" not in busy.stderr
    assert busy.stderr.strip() == f"Error: port: {port} is in use on '127.0.0.1'; pass another --port"
