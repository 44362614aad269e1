"""Sign-ins under attack, through real requests on a real database: the throttle (429 with
Retry-After, before any hash), the bounded hashing executor (503 when full), login links
without Fetch Metadata, and the Host allow-list."""

from __future__ import annotations

import random
import threading

import pytest
from starlette.testclient import TestClient

from pgsched.errors import ValidationError
from pgsched.node import WebSettings
from pgsched.web import credentials
from pgsched.web.app import create_app
from pgsched.web.hashing import HashingBusy, PasswordHashing
from pgsched.web.hosts import allowed, default_hosts, host_of
from pgsched.web.throttle import Limit, SignInThrottle

from ..helpers import cli
from .conftest import csrf_of, sign_in


@pytest.fixture
def hashes(monkeypatch) -> list[str]:
    """Counts argon2 verifications (the real ones still run)."""
    seen: list[str] = []
    real = credentials._verify

    def counted(stored, password):
        seen.append(password)
        return real(stored, password)

    monkeypatch.setattr(credentials, "_verify", counted)
    return seen


def test_failed_sign_ins_per_username_are_refused_429_before_any_hash(db, hashes):
    credentials.create_user(db, "ada", "correct horse", role="viewer")
    app = create_app(db, throttle=SignInThrottle(Limit(3, 300), Limit(100, 60)))
    with TestClient(app, follow_redirects=False) as client:
        for i in range(3):
            assert sign_in(client, username="ada", password=f"wrong{i}").status_code == 401
        assert len(hashes) == 3
        refused = sign_in(client, username="ada", password="correct horse")
        assert refused.status_code == 429
        assert 299 <= int(refused.headers["retry-after"]) <= 300
        assert "too many failed sign-ins" in refused.text
        assert len(hashes) == 3  # refused before hashing: not even the right password is tried
        # another username from the same address is not held by ada's failures
        assert sign_in(client, username="bob", password="whatever1").status_code == 401


def test_failed_sign_ins_per_address_are_refused_at_the_gate_tokens_too(db, hashes):
    credentials.create_user(db, "ada", "correct horse", role="viewer")
    token = credentials.create_token(db, role="viewer")[0]
    app = create_app(db, throttle=SignInThrottle(Limit(100, 300), Limit(4, 60)))
    with TestClient(app, follow_redirects=False) as client:
        for i in range(3):
            assert sign_in(client, username=f"user{i}", password="wrong").status_code == 401
        assert sign_in(client, token="pgs_guess").status_code == 401  # a token guess counts
        for fields in ({"username": "ada", "password": "correct horse"}, {"token": token}):
            refused = sign_in(client, **fields)
            assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 59
        link = client.get("/login", params={"token": token}, headers={"Sec-Fetch-Site": "none"})
        assert link.status_code == 429 and "retry-after" in link.headers
        assert len(hashes) == 3
        assert client.get("/login").status_code == 200  # the form itself still shows


def test_a_success_clears_the_username_and_takes_its_attempt_back(db):
    credentials.create_user(db, "ada", "correct horse", role="viewer")
    app = create_app(db, throttle=SignInThrottle(Limit(2, 300), Limit(2, 60)))
    with TestClient(app, follow_redirects=False) as client:
        assert sign_in(client, username="ada", password="wrong").status_code == 401
        assert sign_in(client, username="ada", password="correct horse").status_code == 303
        client.cookies.clear()
        assert sign_in(client, username="ada", password="wrong").status_code == 401


def test_sign_ins_beyond_the_hashing_threads_and_queue_are_answered_503_at_once(db):
    credentials.create_user(db, "ada", "correct horse", role="viewer")
    hashing = PasswordHashing(threads=1, queue=0)
    release, started = threading.Event(), threading.Event()

    def held() -> None:
        started.set()
        release.wait(30)

    app = create_app(db, hashing=hashing)
    blocker = threading.Thread(target=lambda: hashing.run(held))
    blocker.start()
    try:
        assert started.wait(10)
        with pytest.raises(HashingBusy):
            hashing.run(lambda: None)
        with TestClient(app, follow_redirects=False) as client:
            busy = sign_in(client, username="ada", password="correct horse")
            assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
            release.set()
            blocker.join(10)
            # not counted as a failure: the password was never checked
            assert sign_in(client, username="ada", password="correct horse").status_code == 303
    finally:
        release.set()
        blocker.join(10)


@pytest.mark.parametrize(
    ("headers", "signs_in"),
    [
        ({"Origin": "http://evil.example"}, False),
        ({"Referer": "http://evil.example/page"}, False),
        ({"Origin": "null"}, False),
        ({"Referer": "http://testserver:8080/tasks"}, False),  # another port: another origin
        ({"Referer": "https://testserver/tasks"}, False),  # another scheme
        ({"Referer": "http://testserver/tasks"}, True),  # a link on this site
        ({"Origin": "http://testserver", "Referer": "http://evil.example/"}, True),
        ({"Sec-Fetch-Site": "cross-site", "Referer": "http://testserver/"}, False),
        ({"Sec-Fetch-Site": "same-origin"}, True),
    ],
)
def test_a_login_link_without_fetch_metadata_is_judged_by_origin_then_referer(
    client, token_for, headers, signs_in
):
    response = client.get("/login", params={"token": token_for("viewer")}, headers=headers)
    if signs_in:
        assert response.status_code == 303 and client.get("/").status_code == 200
    else:
        assert response.status_code == 403 and client.get("/").status_code == 303


def test_a_login_link_with_no_hint_of_its_source_only_fills_the_form_in(client, token_for):
    """No Sec-Fetch-Site, Origin or Referer: an old browser following another site's
    rel=noreferrer link looks like this, so the link does not sign in by itself."""
    token = token_for("viewer")
    page = client.get("/login", params={"token": token, "next": "/tasks"})
    assert page.status_code == 200 and client.get("/").status_code == 303  # not signed in
    assert f'value="{token}"' in page.text and "Press Sign in" in page.text
    # the person presses the button: a POST with this session's CSRF token
    pressed = client.post(
        "/login", data={"csrf_token": csrf_of(page.text), "token": token, "next": "/tasks"}
    )
    assert pressed.status_code == 303 and pressed.headers["location"] == "/tasks"
    assert client.get("/").status_code == 200


def test_a_request_naming_another_host_is_refused_400(db, token_for):
    app = create_app(db, allowed_hosts=default_hosts("127.0.0.1"))
    token = token_for("viewer")
    with TestClient(app, base_url="http://127.0.0.1:8080", follow_redirects=False) as client:
        assert client.get("/login").status_code == 200
        for host in ("localhost:8080", "[::1]:8080", "LOCALHOST", "127.0.0.1"):
            assert client.get("/login", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "evil.example:8080", "127.0.0.1.evil.example", ""):
            page = client.get("/login", headers={"Host": host})
            assert page.status_code == 400, host
            assert "not an allowed host" in page.text
            assert page.headers["x-frame-options"] == "DENY"  # still the security headers
        api = client.get(
            "/api/v1/tasks", headers={"Host": "rebound.example", "Authorization": f"Bearer {token}"}
        )
        assert api.status_code == 400
        assert api.json()["error"] == {
            "code": "bad_request",
            "message": "host: 'rebound.example' is not an allowed host of this web admin",
            "field": "host",
        }


def test_host_patterns():
    assert default_hosts("127.0.0.1") == ("127.0.0.1", "localhost", "::1")
    assert default_hosts("::1") == ("::1", "localhost", "127.0.0.1")
    assert default_hosts("admin.example.com") == ("admin.example.com",)
    assert host_of("[::1]:8080") == "::1" and host_of("Example.COM:80") == "example.com"
    assert host_of("::1") == "::1"
    assert allowed("a.example.com", ["*.example.com"])
    assert not allowed("example.com", ["*.example.com"])
    assert not allowed("evilexample.com", ["*.example.com"])
    assert allowed("anything", ["*"])


def test_web_settings_name_the_field_and_the_value():
    WebSettings().validate()
    for fields, field in (
        ({"user_failures": 0}, "user_failures"),
        ({"address_window": 0.5}, "address_window"),
        ({"hash_threads": 65}, "hash_threads"),
        ({"hash_queue": -1}, "hash_queue"),
        ({"allowed_hosts": ("a b",)}, "allowed_hosts"),
        ({"host": "0.0.0.0"}, "allowed_hosts"),
    ):
        with pytest.raises(ValidationError) as caught:
            WebSettings(**fields).validate()
        assert caught.value.field == field, fields
    WebSettings(host="0.0.0.0", allowed_hosts=("admin.example.com",)).validate()
    assert WebSettings(host="0.0.0.0", allowed_hosts=("a.example",)).hosts() == ("a.example",)


def test_pgsched_web_on_every_address_asks_for_allowed_hosts(dsn):
    out = cli(dsn, "web", "--host", "0.0.0.0", check=False)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("Error: allowed_hosts: [] must name the hosts clients use")


@pytest.mark.e2e
def test_pgsched_web_serves_only_its_allowed_hosts(dsn, tmp_path):
    """A real ``pgsched web``: on 127.0.0.1 the loopback names by default; with
    ``--allowed-host`` only the names given."""
    from pgsched.web.server import free_port

    from ..helpers import Process, wait_until
    from .test_signin_flood import request

    def listening(port: int) -> bool:
        try:
            return request(port, "GET", "/login")[0] in (200, 400)
        except OSError:
            return False

    for options, served, refused in (
        ((), ("127.0.0.1", "localhost", "[::1]"), ("evil.example", "127.0.0.1.nip.io")),
        (
            ("--allowed-host", "admin.example", "--allowed-host", "*.lab.example"),
            ("admin.example", "a.lab.example"),
            ("127.0.0.1", "lab.example", "evil.example"),
        ),
    ):
        port = free_port("127.0.0.1", random.randrange(20_000, 30_000))
        web = Process(dsn, "web", "--port", str(port), *options, log_dir=tmp_path)
        try:
            wait_until(
                lambda: web.proc.poll() is not None or "web admin on" in web.output,
                message="pgsched web to start",
            )
            wait_until(
                lambda: web.proc.poll() is not None or listening(port),
                message="pgsched web to answer",
            )
            assert web.proc.poll() is None, web.output
            for host in served:
                status = request(port, "GET", "/login", headers={"Host": f"{host}:{port}"})[0]
                assert status == 200, (options, host)
            for host in refused:
                status, _, body = request(port, "GET", "/login", headers={"Host": host})
                assert status == 400 and "not an allowed host" in body, (options, host)
        finally:
            web.stop()
