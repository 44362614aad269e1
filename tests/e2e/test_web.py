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

from ..helpers import Process, cli, clock_off, fetch, wait_until

pytestmark = pytest.mark.e2e


def test_web_serves_pages_and_the_api_until_sigterm(dsn, tmp_path):
    token = cli(dsn, "token", "create", "--role", "viewer").stdout.strip()
    port = free_port("127.0.0.1", 18300)
    web = Process(dsn, "web", "--port", str(port), log_dir=tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: fetch(base + "/login")[0] == 200, timeout=30, message="the web admin to answer"
        )
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
    assert (
        busy.stderr.strip() == f"Error: port: {port} is in use on '127.0.0.1'; pass another --port"
    )


def test_a_sign_in_on_a_web_process_whose_clock_is_off_is_valid_on_the_others(dsn, tmp_path):
    """Two web processes share the database and its signing key; one's clock is five
    minutes ahead. A session it signs lasts by the database's clock, so the other accepts
    it (the cookie once carried the signing host's time, and the other refused a session
    "from the future"); and one signed on the true clock is valid on the skewed one."""
    import http.cookiejar

    token = cli(dsn, "token", "create", "--role", "viewer").stdout.strip()
    ports = [free_port("127.0.0.1", 18400), free_port("127.0.0.1", 18500)]
    webs = [
        Process(dsn, "web", "--port", str(ports[0]), log_dir=tmp_path, env=clock_off(300)),
        Process(dsn, "web", "--port", str(ports[1]), log_dir=tmp_path),
    ]
    try:
        for port in ports:
            wait_until(
                lambda port=port: fetch(f"http://127.0.0.1:{port}/login")[0] == 200,
                timeout=30,
                message=f"the web admin on {port} to answer",
            )
        for signer, other in ((ports[0], ports[1]), (ports[1], ports[0])):
            browser = urllib.request.build_opener(
                urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
            )
            link = urllib.request.Request(
                f"http://127.0.0.1:{signer}/login?token={token}",
                headers={"Sec-Fetch-Site": "none"},  # opened directly, as a browser says
            )
            with browser.open(link, timeout=10) as page:
                assert page.url.endswith("/")  # signed in
            with browser.open(f"http://127.0.0.1:{other}/tasks", timeout=10) as page:
                assert page.url.endswith("/tasks"), (
                    f"signed in on {signer}, sent to {page.url} by {other}"
                )
    finally:
        for web in webs:
            web.stop(signal.SIGTERM)


def test_a_sign_in_ends_when_the_database_clock_passes_its_lifetime(dsn, sql):
    from starlette.testclient import TestClient

    from pgsched.db import Database
    from pgsched.web.app import create_app

    token = cli(dsn, "token", "create", "--role", "viewer").stdout.strip()
    db = Database.connect(dsn)
    try:
        with TestClient(create_app(db, session_max_age=2)) as client:
            assert (
                client.get(f"/login?token={token}", headers={"Sec-Fetch-Site": "none"}).url.path
                == "/"
            )
            assert client.get("/tasks").url.path == "/tasks"
            began = sql.execute("SELECT now() AS t").fetchone()["t"]
            wait_until(
                lambda: (
                    (sql.execute("SELECT now() AS t").fetchone()["t"] - began).total_seconds() > 2.2
                ),
                message="the sign-in's two seconds to pass by the database's clock",
            )
            assert client.get("/tasks").url.path == "/login"  # sent to sign in again
    finally:
        db.close()
