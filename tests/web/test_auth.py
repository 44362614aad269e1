"""Signing in to the web admin: tokens, passwords, sessions, CSRF, security headers."""

from __future__ import annotations

from itsdangerous import URLSafeSerializer
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pgsched.web.access import require
from pgsched.web.credentials import create_user, delete_user, revoke_token
from pgsched.web.session import ANON_COOKIE, COOKIE

from .conftest import csrf_of, sign_in

OPENED_DIRECTLY = {"Sec-Fetch-Site": "none"}  # a link pasted or typed in (Fetch Metadata)


def test_sign_in_with_a_token_opens_the_dashboard(client, token_for):
    assert client.get("/").headers["location"] == "/login?next=%2F"
    response = sign_in(client, token=token_for("viewer", name="ci reader"))
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie
    page = client.get("/")
    assert page.status_code == 200
    assert "ci reader" in page.text and "viewer" in page.text and "default" in page.text


def test_sign_in_with_a_password_and_a_wrong_one(client, db):
    create_user(db, "ada", "correct horse", role="operator", tenant="lab")
    wrong = sign_in(client, username="ada", password="wrong horse")
    assert wrong.status_code == 401 and "Wrong username or password" in wrong.text
    assert client.get("/").status_code == 303  # still not signed in
    unknown = sign_in(client, username="nobody", password="correct horse")
    assert unknown.status_code == 401
    right = sign_in(client, username="ada", password="correct horse")
    assert right.status_code == 303
    page = client.get("/")
    assert page.status_code == 200 and "ada" in page.text and "lab" in page.text
    stored = db.one("web_user_get", username="ada")
    assert (
        stored["password_hash"].startswith("$argon2id$")
        and "correct horse" not in stored["password_hash"]
    )


def test_tampered_or_foreign_cookie_is_refused(client, token_for):
    assert sign_in(client, token=token_for("admin")).status_code == 303
    good = client.cookies[COOKIE]
    assert client.get("/").status_code == 200
    tampered = ("A" if good[0] != "A" else "B") + good[1:]
    client.cookies.clear()
    client.cookies.set(COOKIE, tampered)
    assert client.get("/").status_code == 303
    # an anonymous CSRF cookie signed with another key: its token is not accepted
    forged = URLSafeSerializer("not the key", salt="pgsched.web.csrf.v3").dumps({"csrf": "x" * 43})
    client.cookies.clear()
    client.cookies.set(ANON_COOKIE, forged)
    refused = client.post("/login", data={"csrf_token": "x" * 43, "token": token_for("admin")})
    assert refused.status_code == 403


def test_a_revoked_token_ends_its_session(client, db, token_for):
    sign_in(client, token=token_for("viewer", name="soon gone"))
    assert client.get("/").status_code == 200
    (row,) = db.many("api_token_list", tenant="default")
    revoke_token(db, row["id"])
    assert client.get("/").status_code == 303


def test_a_deleted_user_s_session_does_not_pass_to_a_new_user_of_that_name(client, db):
    create_user(db, "ada", "correct horse", role="admin", tenant="lab")
    assert sign_in(client, username="ada", password="correct horse").status_code == 303
    assert client.get("/").status_code == 200
    delete_user(db, "ada")
    assert client.get("/").status_code == 303  # ended
    create_user(db, "ada", "another horse", role="viewer", tenant="other")  # someone else now
    assert client.get("/").status_code == 303  # the old cookie does not sign in as them


def test_forms_without_the_session_csrf_token_are_refused(client, token_for):
    token = token_for("admin")
    # the sign-in form itself (login CSRF)
    assert client.post("/login", data={"token": token}).status_code == 403
    assert client.post("/login", data={"token": token, "csrf_token": "guess"}).status_code == 403
    assert sign_in(client, token=token).status_code == 303
    assert client.post("/logout", data={}).status_code == 403
    assert client.get("/").status_code == 200  # still signed in
    csrf = csrf_of(client.get("/").text)
    assert client.post("/logout", headers={"X-CSRF-Token": "wrong"}).status_code == 403
    out = client.post("/logout", data={"csrf_token": csrf})
    assert out.status_code == 303
    assert client.get("/").status_code == 303


def test_login_link_signs_in_and_redirects_only_on_this_site(client, token_for):
    token = token_for("admin")
    response = client.get(
        "/login", params={"token": token, "next": "//evil.example/"}, headers=OPENED_DIRECTLY
    )
    assert response.status_code == 303 and response.headers["location"] == "/"
    assert client.get("/").status_code == 200
    for elsewhere in ("/\t/evil.example/", "/\\evil.example", "https://evil.example/", "/ok\n"):
        assert (
            client.get(
                "/login", params={"token": token, "next": elsewhere}, headers=OPENED_DIRECTLY
            ).headers["location"]
            == "/"
        )
    assert (
        client.get(
            "/login", params={"token": token, "next": "/tasks?q=1"}, headers=OPENED_DIRECTLY
        ).headers["location"]
        == "/tasks?q=1"
    )
    bad = client.get("/login", params={"token": "pgs_nope"}, headers=OPENED_DIRECTLY)
    assert bad.status_code == 401


def test_a_login_link_followed_from_another_site_does_not_sign_in(client, token_for):
    # login CSRF: a page elsewhere links to /login?token=<its own token>
    link = {"token": token_for("operator", tenant="attacker")}
    for origin in ("cross-site", "same-site"):
        refused = client.get("/login", params=link, headers={"Sec-Fetch-Site": origin})
        assert refused.status_code == 403
        assert client.get("/").status_code == 303  # still signed out
    opened = client.get("/login", params=link, headers={"Sec-Fetch-Site": "none"})  # pasted in
    assert opened.status_code == 303 and client.get("/").status_code == 200


def test_security_headers_on_pages_api_errors_and_static_files(client):
    for path in ("/login", "/", "/api/v1/nowhere", "/static/pgsched.css", "/no-such-page"):
        headers = client.get(path).headers
        assert headers["content-security-policy"].startswith("default-src 'self'"), path
        assert headers["x-frame-options"] == "DENY", path
        assert headers["x-content-type-options"] == "nosniff", path
        assert headers["referrer-policy"] == "same-origin", path


def test_output_is_escaped(client, token_for):
    sign_in(client, token=token_for("viewer", name="<script>alert(1)</script>"))
    page = client.get("/").text
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_roles_viewer_is_forbidden_an_operator_action(app, client, token_for):
    def act(request: Request) -> JSONResponse:
        who = require(request, "operator")
        return JSONResponse({"by": who.name})

    app.router.routes.append(Route("/api/v1/probe", act, methods=["POST"]))
    app.router.routes.append(Route("/probe", act, methods=["POST"]))
    viewer = {"Authorization": f"Bearer {token_for('viewer')}"}
    operator = {"Authorization": f"Bearer {token_for('operator', name='op')}"}
    assert client.post("/api/v1/probe").status_code == 401
    forbidden = client.post("/api/v1/probe", headers=viewer)
    assert forbidden.status_code == 403
    assert (
        forbidden.json()["error"]["code"] == "forbidden"
        and "'viewer'" in forbidden.json()["error"]["message"]
    )
    assert client.post("/api/v1/probe", headers=operator).json() == {"by": "op"}
    assert (
        client.post("/api/v1/probe", headers={"Authorization": "Bearer pgs_wrong"}).status_code
        == 401
    )
    # a page: not signed in -> sign-in page; a viewer's session -> 403
    sign_in(client, token=token_for("viewer"))
    csrf = csrf_of(client.get("/").text)
    assert client.post("/probe", data={"csrf_token": csrf}).status_code == 403


def test_a_crash_answers_500_with_the_headers_and_no_details(db):
    from starlette.testclient import TestClient

    from pgsched.web.app import create_app

    app = create_app(db)

    def broken(request: Request) -> JSONResponse:
        raise RuntimeError("secret detail")

    app.router.routes.append(Route("/api/v1/broken", broken))
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/api/v1/broken")
    assert response.status_code == 500 and response.json()["error"]["code"] == "internal"
    assert "secret detail" not in response.text
    assert response.headers["x-frame-options"] == "DENY"


def test_odd_forms_and_tokens_are_refused_not_crashed_on(client, token_for):
    page = client.get("/login")
    csrf = csrf_of(page.text)
    assert client.post("/login", data={"csrf_token": "jalapeño"}).status_code == 403
    assert (
        client.post("/logout", headers={"X-CSRF-Token": "caf\xe9".encode("latin-1")}).status_code
        == 403
    )
    broken = client.post(
        "/login",
        content=b"--x\r\nnot a part",
        headers={"content-type": "multipart/form-data; boundary=x"},
    )
    assert broken.status_code in (400, 403)
    no_boundary = client.post(
        "/login", content=b"a=b", headers={"content-type": "multipart/form-data"}
    )
    assert no_boundary.status_code in (400, 403)
    big = client.post(
        "/login",
        content=b"a=" + b"x" * (1024 * 1024 + 1),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert big.status_code == 413
    # the session still works afterwards
    assert (
        client.post("/login", data={"csrf_token": csrf, "token": token_for("viewer")}).status_code
        == 303
    )
