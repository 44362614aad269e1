"""The admin pages on the test database: each renders for a viewer, actions change the
database for an operator and are refused to a viewer and without a CSRF token, output is
escaped, and a tenant never sees another's rows."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from pgsched import dag as dag_module
from pgsched.stores import dagruns, dags, tasks

from ..factories import make_task
from .conftest import csrf_of, sign_in
from .test_api import dead

XSS = "<script>alert(1)</script>"


@pytest.fixture
def signed(app, token_for):
    """``signed(role, tenant="default", instance=False, may_reveal=False)``: a client signed
    in (session cookie) as that role (``instance``: of the instance scope; ``may_reveal``:
    reading sensitive values)."""
    clients: list[TestClient] = []

    def make(
        role: str, tenant: str = "default", instance: bool = False, may_reveal: bool = False
    ) -> TestClient:
        c = TestClient(app, follow_redirects=False)
        clients.append(c)
        token = token_for(role, tenant, instance=instance, may_reveal=may_reveal)
        assert sign_in(c, token=token).status_code == 303
        return c

    yield make
    for c in clients:
        c.close()


def post(client: TestClient, path: str, **fields: str):
    """POST a page form the way a browser does: with the CSRF token of a page."""
    token = csrf_of(client.get("/tasks").text)
    return client.post(path, data={"csrf_token": token, **fields})


def a_dag_run(db, tenant="default") -> int:
    data = {
        "name": "etl",
        "nodes": [
            {"id": "extract", "command": "true"},
            {"id": "load", "command": "true", "depends_on": ["extract"]},
        ],
    }
    dags.apply(db, dag_module.parse(data), tenant=tenant)
    return dagruns.trigger(db, "etl", tenant=tenant)


def test_every_page_renders_for_a_viewer(db, sql, signed):
    row = make_task(
        db,
        "nightly",
        schedule_kind="cron",
        schedule="0 3 * * *",
        timezone="Europe/Berlin",
        tags=["etl"],
    )
    sql.execute(
        "INSERT INTO pgsched.alert (tenant, task_id, kind, details) "
        "VALUES ('default', %s, 'missed_schedule', '{\"late_seconds\": 90}')",
        [row["id"]],
    )
    gone = dead(db, "nightly")
    ident = tasks.trigger(db, "nightly")
    run_id = a_dag_run(db)
    viewer = signed("viewer", instance=True)  # /workers and /scheduler too
    pages = [
        "/",
        "/tasks",
        "/tasks?name=night&tag=etl&state=active&queue=default",
        "/tasks/nightly",
        f"/executions/{ident}",
        "/executions",
        "/executions?task=nightly&state=pending",
        "/executions?from=2026-01-01T00:00&to=2099-01-01T00:00&worker=1",
        "/dags",
        "/dags/etl",
        f"/dags/runs/{run_id}",
        "/dlq",
        "/workers",
        "/workers?all=1",
        "/scheduler",
        f"/executions/{gone}",
    ]
    for path in pages:
        response = viewer.get(path)
        assert response.status_code == 200, (path, response.text[:500])
        assert "csrf_token" in response.text  # the sign-out form: the layout rendered whole
    dashboard = viewer.get("/").text
    assert "missed_schedule" in dashboard and 'href="/tasks/nightly"' in dashboard
    assert re.search(r'<div class="value">1</div><div class="label">open alerts', dashboard)
    assert re.search(
        r'<div class="value"><a href="/dlq">1</a></div><div class="label">dead letters', dashboard
    )
    task_page = viewer.get("/tasks/nightly").text
    # next fires in the task's zone and in UTC: 03:00 Berlin is 02:00 UTC in winter
    assert "03:00:00 CET" in task_page and "02:00:00" in task_page
    assert f'href="/executions/{ident}"' in task_page
    run_page = viewer.get(f"/dags/runs/{run_id}").text
    assert 'data-node="extract"' in run_page and 'data-edge="extract->load"' in run_page
    # a viewer sees no action
    for path in ("/tasks", "/tasks/nightly", f"/executions/{ident}", "/dlq", "/dags/etl"):
        assert not re.search(r'action="/(tasks|executions|dlq|dags)/', viewer.get(path).text), path


def test_unknown_rows_are_404_and_signed_out_goes_to_login(client, signed):
    viewer = signed("viewer")
    for path in ("/tasks/nope", "/executions/999", "/executions/x", "/dags/nope", "/dags/runs/999"):
        assert viewer.get(path).status_code == 404, path
    assert client.get("/tasks").headers["location"] == "/login?next=%2Ftasks"


def test_task_actions_change_the_database(db, sql, signed):
    op = signed("operator")
    created = post(
        op,
        "/tasks/create",
        name="report",
        command="echo one; echo two",
        schedule_kind="interval",
        schedule="30s",
        timezone="UTC",
        queue="batch",
        tags="reports, daily",
    )
    assert created.status_code == 303 and created.headers["location"].startswith("/tasks/report")
    row = sql.execute("SELECT * FROM pgsched.task WHERE name = 'report'").fetchone()
    assert (row["command"], row["schedule_kind"], row["queue"], row["tags"]) == (
        "echo one; echo two",
        "interval",
        "batch",
        ["reports", "daily"],
    )

    bad = post(
        op, "/tasks/create", name="bad", command="true", schedule_kind="cron", schedule="not cron"
    )
    assert bad.status_code == 422 and "schedule" in bad.text and 'value="not cron"' in bad.text
    assert (
        sql.execute("SELECT count(*) AS n FROM pgsched.task WHERE name = 'bad'").fetchone()["n"]
        == 0
    )

    fired = post(op, "/tasks/trigger", name="report")
    assert fired.status_code == 303
    ident = int(re.search(r"id=(\d+)", fired.headers["location"]).group(1))
    live = sql.execute(
        "SELECT task_id, trigger FROM pgsched.execution WHERE id = %s", [ident]
    ).fetchone()
    assert live == {"task_id": row["id"], "trigger": "manual"}
    shown = op.get(fired.headers["location"]).text
    assert f"execution {ident} is queued" in shown and f'href="/executions/{ident}"' in shown

    assert (
        post(op, "/tasks/pause", name="report", back="list")
        .headers["location"]
        .startswith("/tasks?")
    )
    assert (
        sql.execute("SELECT enabled FROM pgsched.task WHERE name = 'report'").fetchone()["enabled"]
        is False
    )
    post(op, "/tasks/resume", name="report")
    assert (
        sql.execute("SELECT enabled FROM pgsched.task WHERE name = 'report'").fetchone()["enabled"]
        is True
    )

    confirm = op.get("/tasks/report?confirm=delete").text
    assert "Delete report?" in confirm and 'action="/tasks/delete"' in confirm
    assert post(op, "/tasks/delete", name="report").status_code == 303
    gone = sql.execute("SELECT deleted_at FROM pgsched.task WHERE name = 'report'").fetchone()
    assert gone["deleted_at"] is not None
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution WHERE id = %s", [ident]
        ).fetchone()["n"]
        == 0
    )


def test_execution_cancel_and_retry(db, sql, signed):
    make_task(db)
    op = signed("operator")
    ident = tasks.trigger(db, "job")
    assert (
        post(op, f"/executions/{ident}/cancel").headers["location"]
        == f"/executions/{ident}?done=cancelled"
    )
    assert (
        sql.execute(
            "SELECT state FROM pgsched.execution_history WHERE id = %s", [ident]
        ).fetchone()["state"]
        == "cancelled"
    )
    # an ended execution runs again as a new one with the same params
    retried = post(op, f"/executions/{ident}/retry")
    new = int(re.search(r"/executions/(\d+)", retried.headers["location"]).group(1))
    assert (
        new != ident
        and sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", [new]).fetchone()[
            "state"
        ]
        == "pending"
    )
    # a live one is not retried
    assert post(op, f"/executions/{new}/retry").status_code == 422
    # a dead one goes back to the queue with the same id
    gone = dead(db)
    post(op, f"/executions/{gone}/retry")
    assert (
        sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", [gone]).fetchone()["state"]
        == "pending"
    )


def test_dead_letter_queue_retry_delete_and_retry_all_with_the_count(db, sql, signed):
    make_task(db)
    first, second, third, fourth = (dead(db) for _ in range(4))
    op = signed("operator")
    listing = op.get("/dlq").text
    assert all(f'href="/executions/{i}"' in listing for i in (first, second, third, fourth))
    assert "Retry all 4" in listing

    post(op, f"/dlq/{first}/retry")
    assert (
        sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", [first]).fetchone()[
            "state"
        ]
        == "pending"
    )
    post(op, f"/dlq/{second}/delete")
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_history WHERE id = %s", [second]
        ).fetchone()["n"]
        == 0
    )

    confirm = op.get("/dlq/retry-all")
    assert confirm.status_code == 200 and "Retry 2 dead execution(s)?" in confirm.text
    assert 'name="count" value="2"' in confirm.text
    fifth = dead(db)  # one more died while the person read the count
    stale = post(op, "/dlq/retry-all", count="2")
    assert stale.status_code == 409 and 'name="count" value="3"' in stale.text
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_history WHERE state = 'dead'"
        ).fetchone()["n"]
        == 3
    )
    done = post(op, "/dlq/retry-all", count="3")
    assert done.status_code == 303 and "id=3" in done.headers["location"]
    live = {
        r["id"] for r in sql.execute("SELECT id FROM pgsched.execution WHERE state = 'pending'")
    }
    assert {third, fourth, fifth} <= live
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_history WHERE state = 'dead'"
        ).fetchone()["n"]
        == 0
    )


def test_dag_run_can_be_started_by_an_operator(db, sql, signed):
    a_dag_run(db)
    op = signed("operator")
    started = post(op, "/dags/trigger", name="etl")
    run_id = int(re.search(r"/dags/runs/(\d+)", started.headers["location"]).group(1))
    assert (
        sql.execute("SELECT trigger FROM pgsched.dag_run WHERE id = %s", [run_id]).fetchone()[
            "trigger"
        ]
        == "manual"
    )
    page = op.get(started.headers["location"]).text
    assert (
        'data-state="queued"' in page
        and f"Started DAG run {run_id}." in page
        and "execution" not in page.split('role="status">')[1].split("</p>")[0]
    )
    # a node's execution is rerun with its run, not retried alone
    node = sql.execute(
        "SELECT execution_id FROM pgsched.dag_node_run WHERE run_id = %s AND node_id = 'extract'",
        [run_id],
    ).fetchone()["execution_id"]
    post(op, f"/executions/{node}/cancel")
    assert 'action="/executions/' not in op.get(f"/executions/{node}").text
    assert post(op, f"/executions/{node}/retry").status_code == 422


def test_a_viewer_gets_403_on_every_action(db, sql, signed):
    make_task(db)
    gone = dead(db)  # first: it claims every ready execution
    ident = tasks.trigger(db, "job")
    a_dag_run(db)
    viewer = signed("viewer")
    actions = [
        ("/tasks/create", {"name": "x", "command": "true"}),
        ("/tasks/trigger", {"name": "job"}),
        ("/tasks/pause", {"name": "job"}),
        ("/tasks/resume", {"name": "job"}),
        ("/tasks/delete", {"name": "job"}),
        (f"/executions/{ident}/cancel", {}),
        (f"/executions/{gone}/retry", {}),
        (f"/dlq/{gone}/retry", {}),
        (f"/dlq/{gone}/delete", {}),
        ("/dlq/retry-all", {"count": "1"}),
        ("/dags/trigger", {"name": "etl"}),
    ]
    for path, fields in actions:
        assert post(viewer, path, **fields).status_code == 403, path
    assert viewer.get("/dlq/retry-all").status_code == 403
    assert sql.execute(
        "SELECT enabled, deleted_at FROM pgsched.task WHERE name = 'job'"
    ).fetchone() == {"enabled": True, "deleted_at": None}
    assert (
        sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", [ident]).fetchone()[
            "state"
        ]
        == "pending"
    )
    assert (
        sql.execute("SELECT state FROM pgsched.execution_history WHERE id = %s", [gone]).fetchone()[
            "state"
        ]
        == "dead"
    )
    assert sql.execute("SELECT count(*) AS n FROM pgsched.dag_run").fetchone()["n"] == 1


def test_an_action_without_the_csrf_token_is_refused(db, sql, signed):
    make_task(db)
    op = signed("operator")
    for token in (None, "not-the-token"):
        data = {"name": "job"} | ({"csrf_token": token} if token else {})
        refused = op.post("/tasks/pause", data=data)
        assert refused.status_code == 403 and "csrf_token" in refused.text
    assert (
        sql.execute("SELECT enabled FROM pgsched.task WHERE name = 'job'").fetchone()["enabled"]
        is True
    )


def test_names_and_output_are_escaped(db, sql, signed):
    # The name rules refuse such a name; a row written by other means must still be safe.
    sql.execute(
        "INSERT INTO pgsched.task (name, handler_kind, command, description, tags) "
        "VALUES (%s, 'shell', %s, %s, %s)",
        [XSS, f"echo '{XSS}'", XSS, [XSS]],
    )
    make_task(db)
    ident = tasks.trigger(db, "job", params={"note": XSS})
    sql.execute(
        "INSERT INTO pgsched.execution_log (execution_id, attempt, seq, stream, logged_at, line) "
        "VALUES (%s, 1, 1, 'stdout', now(), %s)",
        [ident, XSS],
    )
    viewer = signed("viewer")
    for path in ("/tasks", f"/executions/{ident}"):
        page = viewer.get(path).text
        assert XSS not in page, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page or "\\u003cscript\\u003e" in page, (
            path
        )
    tasks_page = viewer.get("/tasks").text
    assert tasks_page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3  # name, description, tag
    # a notice comes from a fixed list: text in the address bar is never shown
    assert XSS not in viewer.get("/tasks", params={"done": XSS, "id": XSS}).text


def test_a_tenant_never_sees_another_tenants_rows(db, signed):
    make_task(db, "ours-only", tenant="acme")
    their_dead = dead(db, "ours-only", tenant="acme")
    theirs = tasks.trigger(db, "ours-only", tenant="acme")
    run_id = a_dag_run(db, tenant="acme")
    make_task(db, "mine")
    other = signed("operator")  # tenant default
    for path in ("/tasks", "/executions", "/dlq", "/dags", "/"):
        assert "ours-only" not in other.get(path).text, path
    for path in ("/tasks/ours-only", f"/executions/{theirs}", f"/dags/runs/{run_id}", "/dags/etl"):
        assert other.get(path).status_code == 404, path
    assert post(other, "/tasks/pause", name="ours-only").status_code == 404
    assert post(other, f"/executions/{theirs}/cancel").status_code == 404
    assert post(other, f"/dlq/{their_dead}/delete").status_code == 404
    assert post(other, f"/dlq/{their_dead}/retry").status_code == 404
    acme = signed("viewer", "acme")
    assert "ours-only" in acme.get("/tasks").text and "mine" not in acme.get("/tasks").text
    assert db.one("execution_get", id=theirs, tenant="acme")["state"] == "pending"


def test_listings_page_by_key(db, signed):
    make_task(db)
    ids = [tasks.trigger(db, "job") for _ in range(55)]
    for i in range(55):
        make_task(db, f"t{i:02d}")
    viewer = signed("viewer")
    first = viewer.get("/executions?task=job").text
    assert f'href="/executions/{ids[-1]}"' in first and f'href="/executions/{ids[4]}"' not in first
    older = (
        re.search(r'href="(/executions\?[^"]*before=\d+[^"]*)"', first)
        .group(1)
        .replace("&amp;", "&")
    )
    assert "task=job" in older
    second = viewer.get(older).text
    assert (
        f'href="/executions/{ids[0]}"' in second and f'href="/executions/{ids[-1]}"' not in second
    )
    listing = viewer.get("/tasks").text
    after = re.search(r'href="(/tasks\?after=[^"]+)"', listing).group(1)
    assert 'href="/tasks/t54"' in viewer.get(after).text
