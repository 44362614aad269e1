"""The audit log: each action leaves a row with its actor and tenant, an admin sees only
its tenant's, a flood of failures is capped, and old rows are pruned."""

from __future__ import annotations

import json

from click.testing import CliRunner
from starlette.testclient import TestClient

from pgsched.cli import main
from pgsched.scheduler.access_prune import prune_access
from pgsched.web import session_store
from pgsched.web.credentials import authenticate_token, create_token, create_user

from .conftest import csrf_of, sign_in

PASSWORD = "correct horse"


def events(sql, action: str | None = None) -> list[dict]:
    return sql.execute(
        "SELECT tenant, actor_kind, actor, action, target, detail, ip FROM pgsched.audit_event"
        " WHERE %(action)s::text IS NULL OR action = %(action)s ORDER BY id",
        {"action": action},
    ).fetchall()


def test_sign_ins_failed_sign_ins_and_sign_outs_are_recorded(app, client, db, sql):
    create_user(db, "ada", PASSWORD, role="viewer", tenant="lab")
    assert sign_in(client, username="ada", password="wrong horse").status_code == 401
    assert sign_in(client, username="nobody", password="whatever1").status_code == 401
    assert sign_in(client, token="pgs_not-a-token").status_code == 401
    assert sign_in(client, username="ada", password=PASSWORD).status_code == 303
    page = client.get("/")
    assert client.post("/logout", data={"csrf_token": csrf_of(page.text)}).status_code == 303
    rows = [
        (e["tenant"], e["actor_kind"], e["actor"], e["action"], e["target"])
        for e in events(sql)
        if e["action"] != "user_create"
    ]
    assert rows == [
        ("lab", "anonymous", "", "sign_in_failed", "user ada"),  # the user's tenant sees it
        (None, "anonymous", "", "sign_in_failed", "user nobody"),  # no tenant's
        (None, "anonymous", "", "sign_in_failed", "token"),
        ("lab", "user", "ada", "sign_in", "user ada"),
        ("lab", "user", "ada", "sign_out", "user ada"),
    ]
    assert all(e["ip"] == "testclient" for e in events(sql, "sign_in_failed"))
    assert "pgs_not-a-token" not in json.dumps([str(e) for e in events(sql)])  # never stored


def test_a_revoked_token_s_failed_sign_in_belongs_to_its_tenant(client, db, sql, api):
    token, row = create_token(db, role="viewer", tenant="lab")
    assert api("admin", "lab").delete(f"/api/v1/tokens/{row['id']}").status_code == 200
    assert sign_in(client, token=token).status_code == 401
    (failed,) = events(sql, "sign_in_failed")
    assert (failed["tenant"], failed["target"]) == ("lab", f"token {row['id']}")


def test_token_and_user_changes_are_recorded_with_their_actor(db, dsn, sql, api, app):
    admin = api("admin", "lab")
    admin_id = authenticate_token(db, admin.headers["authorization"].split()[1]).ref
    made = admin.post("/api/v1/tokens", json={"role": "viewer", "name": "ci", "expires_in": "7d"})
    assert made.status_code == 201
    made_id = made.json()["id"]
    browser = TestClient(app, follow_redirects=False)
    assert sign_in(browser, token=made.json()["token"]).status_code == 303
    assert admin.delete(f"/api/v1/tokens/{made_id}").status_code == 200
    run = CliRunner()
    assert (
        run.invoke(
            main,
            [
                "--dsn",
                dsn,
                "--tenant",
                "lab",
                "user",
                "create",
                "ada",
                "--role",
                "viewer",
                "--password-stdin",
            ],
            input="horse horse\n",
        ).exit_code
        == 0
    )
    assert (
        run.invoke(
            main,
            ["--dsn", dsn, "user", "set-password", "ada", "--password-stdin"],
            input="zebra zebra\n",
        ).exit_code
        == 0
    )
    assert run.invoke(main, ["--dsn", dsn, "user", "delete", "ada"]).exit_code == 0
    rows = [
        (e["tenant"], e["actor_kind"], e["action"], e["target"])
        for e in events(sql)
        if e["action"] != "sign_in"
    ]
    assert rows[-5:] == [
        ("lab", "token", "token_create", f"token {made_id}"),
        ("lab", "token", "token_revoke", f"token {made_id}"),
        ("lab", "cli", "user_create", "user ada"),
        ("lab", "cli", "password_change", "user ada"),
        ("lab", "cli", "user_delete", "user ada"),
    ]
    created, revoked = events(sql, "token_create")[-1], events(sql, "token_revoke")[-1]
    assert created["actor"] == admin_id and created["detail"]["name"] == "ci"
    assert created["detail"]["expires_at"] is not None
    assert revoked["detail"] == {"sessions": 1}  # the session signed in with it ended


def test_role_refusals_and_failovers_are_recorded(api, sql):
    viewer = api("viewer", "lab")
    assert viewer.get("/api/v1/tokens").status_code == 403
    assert viewer.post("/api/v1/scheduler/failover").status_code == 403
    assert api("admin", "lab").post("/api/v1/scheduler/failover").status_code == 403  # a tenant's
    instance_admin = api("admin", "lab", instance=True)
    assert instance_admin.post("/api/v1/scheduler/failover").status_code == 409  # no leader
    refused = events(sql, "forbidden")
    assert [(e["tenant"], e["actor_kind"], e["target"]) for e in refused] == [
        ("lab", "token", "GET /api/v1/tokens"),
        ("lab", "token", "POST /api/v1/scheduler/failover"),
        ("lab", "token", "POST /api/v1/scheduler/failover"),
    ]
    assert refused[0]["detail"] == {"role": "viewer", "needs": "admin", "instance": False}
    assert refused[2]["detail"] == {"role": "admin", "needs": "admin", "instance": True}
    (failover,) = events(sql, "scheduler_failover")
    assert failover["tenant"] == "lab" and failover["detail"] == {"ended_backends": []}


def test_an_admin_sees_only_its_tenant_s_events(api, app, client, db, dsn):
    create_user(db, "ada", PASSWORD, role="viewer", tenant="lab")
    create_user(db, "bob", PASSWORD, role="viewer", tenant="other")
    for name in ("ada", "bob", "nobody"):
        sign_in(TestClient(app), username=name, password=PASSWORD + "x")
    lab = api("admin", "lab").get("/api/v1/audit?action=sign_in_failed")
    assert lab.status_code == 200
    assert [e["target"] for e in lab.json()["items"]] == ["user ada"]
    assert {e["tenant"] for e in api("admin", "lab").get("/api/v1/audit").json()["items"]} == {
        "lab"
    }
    assert api("operator", "lab").get("/api/v1/audit").status_code == 403
    # the page, for an admin signed in
    create_user(db, "root", PASSWORD, role="admin", tenant="other")
    assert sign_in(client, username="root", password=PASSWORD).status_code == 303
    page = client.get("/audit?action=sign_in_failed")
    assert page.status_code == 200 and "user bob" in page.text and "user ada" not in page.text
    # the command line, for a tenant or every tenant
    run = CliRunner()
    lab_cli = run.invoke(
        main,
        ["--dsn", dsn, "--tenant", "lab", "audit", "list", "--json", "--action", "sign_in_failed"],
    )
    assert [e["target"] for e in json.loads(lab_cli.output)] == ["user ada"]
    every = run.invoke(
        main,
        ["--dsn", dsn, "audit", "list", "--all-tenants", "--json", "--action", "sign_in_failed"],
    )
    assert {e["target"] for e in json.loads(every.output)} == {
        "user ada",
        "user bob",
        "user nobody",
    }


def test_the_api_pages_the_audit_log(api):
    admin = api("admin", "lab")
    for _ in range(5):
        admin.post("/api/v1/tokens", json={"role": "viewer"})
    first = admin.get("/api/v1/audit?limit=3&action=token_create").json()
    second = admin.get(f"/api/v1/audit?limit=3&action=token_create&cursor={first['next_cursor']}")
    ids = [e["id"] for e in first["items"] + second.json()["items"]]
    # five, and the admin's own token, made by the fixture (actor cli)
    assert len(ids) == 6 and ids == sorted(ids, reverse=True)
    assert second.json()["next_cursor"] is None


def test_a_flood_of_failed_sign_ins_is_capped_per_tenant_and_minute(app, db, sql):
    sql.execute("UPDATE pgsched.setting SET value = '5' WHERE name = 'audit_noisy_per_minute'")
    create_user(db, "ada", PASSWORD, role="viewer", tenant="lab")
    flooder = TestClient(app)
    for i in range(12):
        sign_in(flooder, username=f"nobody{i}", password="guess guess")
    sign_in(flooder, username="ada", password="guess guess")
    failed = events(sql, "sign_in_failed")
    assert len([e for e in failed if e["tenant"] is None]) == 5  # the flood stops at the cap
    assert [e["target"] for e in failed if e["tenant"] == "lab"] == ["user ada"]  # still seen


def test_the_leader_prunes_old_events_and_ended_sessions(app, db, sql, token_for):
    browser = TestClient(app, follow_redirects=False)
    assert sign_in(browser, token=token_for("viewer")).status_code == 303
    sql.execute(
        "INSERT INTO pgsched.audit_event (at, tenant, actor_kind, action)"
        " VALUES (now() - interval '91 days', 'lab', 'cli', 'user_create'),"
        "        (now() - interval '89 days', 'lab', 'cli', 'user_delete')"
    )
    old_id = session_store.digest("old one")
    sql.execute(
        "UPDATE pgsched.web_session SET id_sha256 = %s, expires_at = now() - interval '2 days',"
        " created_at = now() - interval '3 days'",
        (old_id,),
    )  # the one session, ended two days ago
    assert sign_in(browser, token=token_for("viewer")).status_code == 303  # a live one
    assert prune_access(db) == (1, 1)
    left = sql.execute("SELECT action FROM pgsched.audit_event WHERE tenant = 'lab'").fetchall()
    assert [r["action"] for r in left] == ["user_delete"]
    assert sql.execute("SELECT count(*) AS n FROM pgsched.web_session").fetchone()["n"] == 1
    assert browser.get("/").status_code == 200
