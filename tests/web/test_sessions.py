"""Sessions stored in the database: every way of revoking one ends it at the next request,
also for a copy of the cookie taken before; tokens that expire; no row for visitors who
have not signed in."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from pgsched.cli import main
from pgsched.errors import ValidationError
from pgsched.web import session_store
from pgsched.web.credentials import create_token, create_user, delete_user, parse_duration
from pgsched.web.session import ANON_COOKIE, COOKIE

from .conftest import csrf_of, sign_in

PASSWORD = "correct horse"


def copy_of(app, client: TestClient) -> TestClient:
    """Another browser holding a copy of ``client``'s session cookie (as a thief would)."""
    thief = TestClient(app, follow_redirects=False)
    thief.cookies.set(COOKIE, client.cookies[COOKIE])
    return thief


def signed_in(app, **fields: str) -> TestClient:
    browser = TestClient(app, follow_redirects=False)
    assert sign_in(browser, **fields).status_code == 303
    assert browser.get("/").status_code == 200
    return browser


def post(client: TestClient, path: str, **fields: str):
    """A form on a page, submitted with the page's CSRF token."""
    token = csrf_of(client.get("/account").text)
    return client.post(path, data={"csrf_token": token, **fields})


def test_the_cookie_holds_a_random_id_and_the_row_only_its_hash(app, db, sql, token_for):
    browser = signed_in(app, token=token_for("viewer"))
    cookie = browser.cookies[COOKIE]
    assert len(cookie) == 43 and "." not in cookie  # token_urlsafe(32): no payload, no signature
    (row,) = sql.execute(
        "SELECT id_sha256, tenant, expires_at - created_at AS life FROM pgsched.web_session"
    ).fetchall()
    assert row["id_sha256"] == session_store.digest(cookie) and row["tenant"] == "default"
    assert row["life"].total_seconds() == 12 * 3600


def test_signing_out_ends_a_copy_of_the_cookie_taken_before(app, token_for):
    browser = signed_in(app, token=token_for("operator"))
    thief = copy_of(app, browser)
    assert thief.get("/").status_code == 200
    token = csrf_of(browser.get("/").text)
    out = browser.post("/logout", data={"csrf_token": token})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert thief.get("/").status_code == 303  # the copy signs nobody in any more
    assert thief.get("/api/v1/tasks").status_code == 401
    assert browser.get("/").status_code == 303


def test_sign_out_everywhere_ends_every_session_of_the_user(app, db):
    create_user(db, "ada", PASSWORD, role="viewer", tenant="lab")
    create_user(db, "bob", PASSWORD, role="viewer", tenant="lab")
    laptop, phone = (signed_in(app, username="ada", password=PASSWORD) for _ in range(2))
    bob = signed_in(app, username="bob", password=PASSWORD)
    assert "Sign out everywhere" in laptop.get("/account").text
    out = post(laptop, "/account/sign-out-everywhere")
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert laptop.get("/").status_code == 303 and phone.get("/").status_code == 303
    assert bob.get("/").status_code == 200  # another user's sessions stay


def test_sign_out_everywhere_with_a_token_ends_its_sessions_and_keeps_the_token(app, db):
    token, _ = create_token(db, role="viewer")
    one, two = signed_in(app, token=token), signed_in(app, token=token)
    assert post(one, "/account/sign-out-everywhere").status_code == 303
    assert one.get("/").status_code == 303 and two.get("/").status_code == 303
    api = TestClient(app, headers={"Authorization": f"Bearer {token}"})
    assert api.get("/api/v1/tasks").status_code == 200  # the token itself still works


def test_an_admin_signs_a_user_of_the_tenant_out_everywhere(app, db):
    create_user(db, "root", PASSWORD, role="admin", tenant="lab")
    create_user(db, "ada", PASSWORD, role="viewer", tenant="lab")
    create_user(db, "mallory", PASSWORD, role="viewer", tenant="other")
    admin = signed_in(app, username="root", password=PASSWORD)
    ada = signed_in(app, username="ada", password=PASSWORD)
    eve = signed_in(app, username="mallory", password=PASSWORD)
    page = admin.get("/account").text
    assert "<td>ada<" in page and "mallory" not in page  # the tenant's users only
    done = post(admin, "/users/sign-out", username="ada")
    assert done.status_code == 303 and "user_signed_out" in done.headers["location"]
    assert ada.get("/").status_code == 303
    # another tenant's user: not found, and still signed in
    assert post(admin, "/users/sign-out", username="mallory").status_code == 404
    assert eve.get("/").status_code == 200
    # a viewer may not
    ada = signed_in(app, username="ada", password=PASSWORD)
    assert post(ada, "/users/sign-out", username="root").status_code == 403
    assert admin.get("/").status_code == 200


def test_a_password_change_ends_the_other_sessions_and_keeps_this_browser(app, db):
    create_user(db, "ada", PASSWORD, role="operator", tenant="lab")
    here, elsewhere = (signed_in(app, username="ada", password=PASSWORD) for _ in range(2))
    wrong = post(
        here, "/account/password", current="not it", new="new horse!", confirm="new horse!"
    )
    assert wrong.status_code == 422 and "current" in wrong.text
    differ = post(here, "/account/password", current=PASSWORD, new="new horse!", confirm="other")
    assert differ.status_code == 422 and "confirm" in differ.text
    assert elsewhere.get("/").status_code == 200  # nothing changed yet
    changed = post(
        here, "/account/password", current=PASSWORD, new="new horse!", confirm="new horse!"
    )
    assert changed.status_code == 303 and "password_changed" in changed.headers["location"]
    assert elsewhere.get("/").status_code == 303  # ended
    assert here.get("/").status_code == 200  # signed in again with a new session
    assert sign_in(TestClient(app), username="ada", password=PASSWORD).status_code == 401
    assert signed_in(app, username="ada", password="new horse!")


def test_set_password_from_the_command_line_ends_the_user_s_sessions(app, db, dsn):
    create_user(db, "ada", PASSWORD, role="viewer")
    browser = signed_in(app, username="ada", password=PASSWORD)
    result = CliRunner().invoke(
        main,
        ["--dsn", dsn, "user", "set-password", "ada", "--password-stdin"],
        input="newer horse\n",
    )
    assert result.exit_code == 0 and "1 session(s) ended" in result.output, result.output
    assert browser.get("/").status_code == 303
    assert signed_in(app, username="ada", password="newer horse")
    short = CliRunner().invoke(
        main, ["--dsn", dsn, "user", "set-password", "ada", "--password-stdin"], input="short\n"
    )
    assert short.exit_code == 1 and "password" in short.output


def test_sign_out_from_the_command_line_and_user_deletion_end_sessions(app, db, dsn):
    create_user(db, "ada", PASSWORD, role="viewer")
    browser = signed_in(app, username="ada", password=PASSWORD)
    result = CliRunner().invoke(main, ["--dsn", dsn, "user", "sign-out", "ada"])
    assert result.exit_code == 0 and "1 session(s) ended" in result.output, result.output
    assert browser.get("/").status_code == 303
    browser = signed_in(app, username="ada", password=PASSWORD)
    delete_user(db, "ada")
    assert browser.get("/").status_code == 303


def test_revoking_a_token_through_the_api_ends_its_sessions(app, db, api):
    token, row = create_token(db, role="viewer")
    browser = signed_in(app, token=token)
    assert api("admin").delete(f"/api/v1/tokens/{row['id']}").status_code == 200
    assert browser.get("/").status_code == 303


def test_an_expired_token_is_refused_like_a_revoked_one(app, db, sql):
    token, row = create_token(db, role="viewer", expires_in=3600)
    api = TestClient(app, headers={"Authorization": f"Bearer {token}"})
    browser = signed_in(app, token=token)
    assert api.get("/api/v1/tasks").status_code == 200
    # an hour passes, by the database's clock
    sql.execute(
        "UPDATE pgsched.api_token SET expires_at = now() - interval '1 second' WHERE id = %s",
        (row["id"],),
    )
    refused = api.get("/api/v1/tasks")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert browser.get("/").status_code == 303  # its session ends with it
    again = sign_in(TestClient(app), token=token)
    assert again.status_code == 401 and "expired" in again.text


def test_a_token_s_lifetime_is_the_database_s_clock_and_checked(app, db, dsn, sql, api):
    made = CliRunner().invoke(
        main, ["--dsn", dsn, "token", "create", "--role", "viewer", "--expires-in", "30d", "--json"]
    )
    assert made.exit_code == 0, made.output
    created = json.loads(made.output)
    life = sql.execute(
        "SELECT expires_at - created_at AS life FROM pgsched.api_token WHERE id = %s",
        (created["id"],),
    ).fetchone()["life"]
    assert life.total_seconds() == 30 * 86400
    bad = CliRunner().invoke(
        main, ["--dsn", dsn, "token", "create", "--role", "viewer", "--expires-in", "30x"]
    )
    assert bad.exit_code == 1 and "expires_in: '30x' must be a duration" in bad.output
    through_api = api("admin").post(
        "/api/v1/tokens", json={"role": "viewer", "expires_in": "1d12h"}
    )
    assert through_api.status_code == 201
    assert through_api.json()["expires_at"] is not None
    refused = api("admin").post("/api/v1/tokens", json={"role": "viewer", "expires_in": "0s"})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "expires_in"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45s", 45),
        ("90m", 5400),
        ("12h", 43200),
        ("30d", 2592000),
        ("2w", 1209600),
        ("1d12h", 129600),
    ],
)
def test_durations(text, seconds):
    assert parse_duration("expires_in", text) == seconds


@pytest.mark.parametrize("text", ["", "30", "d", "30x", "1.5d", "-1d", "0s", "11000d", "1d 2h", 30])
def test_bad_durations_name_the_field_and_the_value(text):
    with pytest.raises(ValidationError) as info:
        parse_duration("expires_in", text)
    assert str(info.value).startswith(f"expires_in: {text!r}")


def test_visitors_who_have_not_signed_in_write_no_row(app, client, sql):
    for _ in range(20):
        assert client.get("/login").status_code == 200
    client.cookies.clear()
    for _ in range(5):
        assert client.get("/login").status_code == 200  # each a new visitor
    assert sql.execute("SELECT count(*) AS n FROM pgsched.web_session").fetchone()["n"] == 0
    assert ANON_COOKIE in client.cookies and COOKIE not in client.cookies


def test_a_token_or_user_keeps_a_bounded_number_of_sessions(app, db, token_for, monkeypatch):
    monkeypatch.setattr(session_store, "SESSIONS_PER_BACKER", 2)
    token = token_for("viewer")
    first, second, third = (signed_in(app, token=token) for _ in range(3))
    assert first.get("/").status_code == 303  # the oldest ended
    assert second.get("/").status_code == 200 and third.get("/").status_code == 200


def test_a_bearer_request_leaves_the_browser_s_session_cookie_alone(app, token_for):
    browser = signed_in(app, token=token_for("viewer"))
    both = browser.get("/api/v1/tasks", headers={"Authorization": f"Bearer {token_for('viewer')}"})
    assert both.status_code == 200
    assert not any(v.startswith(COOKIE + "=") for v in both.headers.get_list("set-cookie"))
    assert browser.get("/").status_code == 200
    ended = TestClient(app, follow_redirects=False)
    ended.cookies.set(COOKIE, "not-a-session")
    dropped = ended.get("/login")
    assert any(v.startswith(COOKIE + '=""') for v in dropped.headers.get_list("set-cookie"))
