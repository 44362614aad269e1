"""Sessions, revocation and the audit log with the web admin on a real web login (a member
of pgsched_web, under row-level security: migration 0018) rather than the superuser the
other tests connect as, and the leader's prune on an installation-wide engine login."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from psycopg import sql as pgsql
from starlette.testclient import TestClient

from pgsched.db import Database
from pgsched.scheduler.access_prune import prune_access
from pgsched.web.app import create_app
from pgsched.web.credentials import create_token, create_user

from ..tenancy import drop_roles, login_dsn
from .conftest import csrf_of, sign_in

PASSWORD = "correct horse"


@pytest.fixture
def logins(sql, dsn) -> Iterator[dict[str, str]]:
    """DSNs of a web login and an installation-wide engine login, dropped afterwards."""
    tag = uuid.uuid4().hex[:8]
    made = {"web": f"web_{tag}", "engine": f"eng_{tag}"}
    for purpose, role in made.items():
        sql.execute(
            pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                pgsql.Identifier(role), pgsql.Identifier(f"pgsched_{purpose}")
            )
        )
    # installation-wide: what the scheduler (which runs the prune) logs in as
    sql.execute(pgsql.SQL("GRANT pgsched_instance TO {}").format(pgsql.Identifier(made["engine"])))
    try:
        yield {purpose: login_dsn(dsn, role) for purpose, role in made.items()}
    finally:
        drop_roles(dsn, list(made.values()))


@pytest.fixture
def web_app(logins, db):
    web_db = Database.connect(logins["web"], max_size=4)
    try:
        yield create_app(web_db, secret="k" * 43)  # the key row is written by the superuser
    finally:
        web_db.close()


def test_sign_in_revocation_and_the_audit_log_hold_on_a_web_login(web_app, db, sql):
    create_user(db, "ada", PASSWORD, role="admin", tenant="lab")
    create_user(db, "bob", PASSWORD, role="viewer", tenant="other")
    browser = TestClient(web_app, follow_redirects=False)
    assert sign_in(browser, username="nobody", password="guess guess").status_code == 401
    assert sign_in(browser, username="bob", password="guess guess").status_code == 401
    assert sign_in(browser, username="ada", password=PASSWORD).status_code == 303
    assert browser.get("/account").status_code == 200
    phone = TestClient(web_app, follow_redirects=False)
    assert sign_in(phone, username="ada", password=PASSWORD).status_code == 303
    token, row = create_token(db, role="viewer", tenant="lab")
    viewer = TestClient(web_app, headers={"Authorization": f"Bearer {token}"})
    assert viewer.get("/api/v1/tokens").status_code == 403  # refused, and recorded
    page = browser.get("/account")
    done = browser.post("/account/sign-out-everywhere", data={"csrf_token": csrf_of(page.text)})
    assert done.status_code == 303
    assert phone.get("/").status_code == 303 and browser.get("/").status_code == 303
    # the log, as the web login reads it for an admin of lab: lab's events only
    assert sign_in(browser, username="ada", password=PASSWORD).status_code == 303
    listed = browser.get("/audit")
    assert listed.status_code == 200
    for shown in ("sign_out_everywhere", "forbidden", "sign_in"):
        assert shown in listed.text
    assert "user bob" not in listed.text and "user nobody" not in listed.text
    recorded = sql.execute(
        "SELECT tenant, action, target FROM pgsched.audit_event"
        " WHERE action <> 'user_create' AND action <> 'token_create' ORDER BY id"
    ).fetchall()
    assert [(r["tenant"], r["action"], r["target"]) for r in recorded] == [
        (None, "sign_in_failed", "user nobody"),
        ("other", "sign_in_failed", "user bob"),
        ("lab", "sign_in", "user ada"),
        ("lab", "sign_in", "user ada"),
        ("lab", "forbidden", "GET /api/v1/tokens"),
        ("lab", "sign_out_everywhere", "user ada"),
        ("lab", "sign_in", "user ada"),
    ]
    # an admin revokes the token through the API: it and its sessions end
    admin_token, _ = create_token(db, role="admin", tenant="lab")
    admin = TestClient(web_app, headers={"Authorization": f"Bearer {admin_token}"})
    assert admin.delete(f"/api/v1/tokens/{row['id']}").status_code == 200
    assert viewer.get("/api/v1/tasks").status_code == 401


def test_the_leader_prunes_on_an_engine_login(logins, db, sql):
    sql.execute(
        "INSERT INTO pgsched.audit_event (at, tenant, actor_kind, action) VALUES"
        " (now() - interval '91 days', 'lab', 'cli', 'user_create'),"
        " (now() - interval '91 days', NULL, 'anonymous', 'sign_in_failed'),"
        " (now(), 'lab', 'cli', 'user_delete')"
    )
    create_user(db, "ada", PASSWORD, role="viewer", tenant="lab")
    sql.execute(
        "INSERT INTO pgsched.web_session (id_sha256, tenant, username, csrf, created_at,"
        " expires_at) VALUES (sha256('x'), 'lab', 'ada', repeat('c', 32),"
        " now() - interval '3 days', now() - interval '2 days')"
    )
    engine = Database.connect(logins["engine"], max_size=1)
    try:
        assert prune_access(engine) == (2, 1)
    finally:
        engine.close()
    left = sql.execute("SELECT action FROM pgsched.audit_event ORDER BY id").fetchall()
    assert [r["action"] for r in left] == ["user_delete", "user_create"]  # the recent ones
    assert sql.execute("SELECT count(*) AS n FROM pgsched.web_session").fetchone()["n"] == 0
