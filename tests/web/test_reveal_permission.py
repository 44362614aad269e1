"""Reading sensitive values is a permission of its own (issue 19, item 4; migration 0036):
an admin without it is shown the masks, a viewer with it the values, through the API and
the pages, for tokens and for users signed in with a password; the CLI grants and withdraws
it, the API shows it, a principal cannot grant what it lacks, and a change is audited and
holds from the next request."""

from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner

from pgsched import migrate
from pgsched.cli import main
from pgsched.masking import MASK
from pgsched.web import audit
from pgsched.web.credentials import authenticate_token, create_user
from pgsched.web.reveal_grants import set_user_reveal

from ..factories import make_task
from .conftest import sign_in
from .test_pages import signed  # noqa: F401  (a fixture)

VALUE = "hunter2-reveal"
PASSWORD = "correct horse"


@pytest.fixture
def job(db):
    make_task(db, "job", env={"DB_PASSWORD": VALUE}, params={"api_token": VALUE})


def _env(client) -> dict:
    response = client.get("/api/v1/tasks/job")
    assert response.status_code == 200
    return response.json()["env"]


def test_an_admin_without_the_permission_is_shown_the_masks(api, signed, job):  # noqa: F811
    assert _env(api("admin")) == {"DB_PASSWORD": MASK}
    page = signed("admin").get("/tasks/job").text
    assert VALUE not in page and f"DB_PASSWORD={MASK}" in page


def test_a_viewer_with_the_permission_reads_the_values(api, signed, job):  # noqa: F811
    assert _env(api("viewer", may_reveal=True)) == {"DB_PASSWORD": VALUE}
    assert f"DB_PASSWORD={VALUE}" in signed("viewer", may_reveal=True).get("/tasks/job").text


def test_a_users_permission_changes_at_its_next_request(app, db, job):
    from starlette.testclient import TestClient

    create_user(db, "ada", PASSWORD, role="admin")
    with TestClient(app, follow_redirects=False) as c:
        assert sign_in(c, username="ada", password=PASSWORD).status_code == 303
        assert VALUE not in c.get("/tasks/job").text
        account = c.get("/account").text
        assert "shown to you masked" in account
        set_user_reveal(db, "ada", True)
        assert f"DB_PASSWORD={VALUE}" in c.get("/tasks/job").text  # same session
        assert "You read the values" in c.get("/account").text
        set_user_reveal(db, "ada", False, by=audit.local())
        assert VALUE not in c.get("/tasks/job").text
    changes = audit.events(db, "default", action="reveal_change", limit=10)
    assert [e["detail"] for e in changes] == [
        {"may_reveal": False, "before": True},
        {"may_reveal": True, "before": False},
    ]


def test_the_api_shows_and_grants_it_only_from_who_holds_it(api):
    plain, revealing = api("admin"), api("admin", may_reveal=True)
    refused = plain.post("/api/v1/tokens", json={"role": "viewer", "may_reveal": True})
    assert refused.status_code == 403 and "may_reveal" in refused.text
    assert plain.post("/api/v1/tokens", json={"role": "viewer"}).json()["may_reveal"] is False
    made = revealing.post("/api/v1/tokens", json={"role": "viewer", "may_reveal": True})
    assert made.status_code == 201 and made.json()["may_reveal"] is True
    bad = revealing.post("/api/v1/tokens", json={"role": "viewer", "may_reveal": "yes"})
    assert bad.status_code == 422 and "may_reveal" in bad.text
    listed = {t["id"]: t["may_reveal"] for t in revealing.get("/api/v1/tokens").json()["items"]}
    assert listed[made.json()["id"]] is True


def _cli(dsn: str, *args: str, input: str | None = None):
    result = CliRunner().invoke(main, ["--dsn", dsn, *args], input=input, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_cli_grants_and_withdraws_it(dsn, db):
    made = json.loads(_cli(dsn, "token", "create", "--role", "viewer", "--may-reveal", "--json"))
    assert made["may_reveal"] is True
    who = authenticate_token(db, made["token"])
    assert who is not None and who.may_reveal
    assert "sees sensitive values masked" in _cli(
        dsn, "token", "update", str(made["id"]), "--no-may-reveal"
    )
    who = authenticate_token(db, made["token"])
    assert who is not None and not who.may_reveal
    _cli(dsn, "user", "create", "ada", "--role", "admin", "--password-stdin", input=PASSWORD)
    assert "MAY_REVEAL" in _cli(dsn, "user", "list")
    assert json.loads(_cli(dsn, "user", "list", "--json"))[0]["may_reveal"] is False
    assert "reads sensitive values" in _cli(dsn, "user", "update", "ada", "--may-reveal")
    assert json.loads(_cli(dsn, "user", "list", "--json"))[0]["may_reveal"] is True
    nothing = CliRunner().invoke(main, ["--dsn", dsn, "user", "update", "ada"])
    assert nothing.exit_code == 2 and "--may-reveal" in nothing.output


def test_the_migration_keeps_it_for_the_admins_there_were(empty_dsn):
    known = migrate.load()
    at = next(i for i, m in enumerate(known) if m.name == "reveal")
    migrate.migrate(empty_dsn, known[:at])
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for name, role in (("root", "admin"), ("ops", "operator")):
            conn.execute(
                "INSERT INTO pgsched.web_user (username, tenant, role, password_hash) "
                "VALUES (%s, 'default', %s, 'x')",
                [name, role],
            )
        conn.execute(
            "INSERT INTO pgsched.api_token (tenant, role, token_sha256) "
            "VALUES ('default', 'admin', sha256('a')), ('default', 'viewer', sha256('b'))"
        )
    migrate.migrate(empty_dsn, known[: at + 1])
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        users = dict(conn.execute("SELECT username, may_reveal FROM pgsched.web_user").fetchall())
        tokens = dict(conn.execute("SELECT role, may_reveal FROM pgsched.api_token").fetchall())
    assert users == {"root": True, "ops": False} and tokens == {"admin": True, "viewer": False}
