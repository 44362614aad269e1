"""The REST API on the test database: every route, with each role, in its tenant."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgsched.scheduler import internal_key
from pgsched.stores import tasks

from ..conftest import dsn_for
from ..db.test_claim import claim, finish, register
from ..factories import make_task
from ..helpers import wait_until

V = "/api/v1"


def dead(db, name="job", tenant="default"):
    """An execution of task ``name`` that failed for good (claimed and finished 'dead')."""
    ident = tasks.trigger(db, name, tenant=tenant)
    worker = register(db, f"w{ident}")
    (c,) = [r for r in claim(db, worker) if r["id"] == ident]
    db.exec(
        "execution_attempt_insert",
        id=ident,
        attempt=1,
        tenant=tenant,
        worker_id=worker,
        state="failed",
        started_at=c["started_at"],
        finished_at=datetime.now(UTC),
        exit_code=3,
        error="exit 3",
        error_type=None,
        lease_id=c["lease_id"],
        next_run_at=None,
        budget_delay_seconds=None,
    )
    assert (
        finish(
            db,
            ident,
            c["lease_id"],
            state="dead",
            exit_code=3,
            error="exit 3",
            finished_at=datetime.now(UTC),
        )
        == 1
    )
    return ident


def test_task_crud_and_actions(api, db, sql):
    op = api("operator")
    created = op.post(
        f"{V}/tasks",
        json={
            "name": "nightly",
            "command": "echo hi",
            "schedule_kind": "cron",
            "schedule": "0 3 * * *",
            "tags": ["etl"],
            "queue": "batch",
        },
    )
    assert created.status_code == 201, created.text
    assert created.json()["tags"] == ["etl"] and created.json()["tenant"] == "default"
    dup = op.post(f"{V}/tasks", json={"name": "nightly", "command": "true"})
    assert dup.status_code == 422 and dup.json()["error"]["field"] == "name"

    got = op.get(f"{V}/tasks/nightly").json()
    assert got["schedule_expr"] == "0 3 * * *" and got["next_fire_at"]
    changed = op.patch(
        f"{V}/tasks/nightly", json={"priority": 2, "description": "the nightly load"}
    )
    assert changed.status_code == 200 and changed.json()["priority"] == 2
    assert (
        sql.execute("SELECT priority FROM pgsched.task WHERE name = 'nightly'").fetchone()[
            "priority"
        ]
        == 2
    )

    assert op.post(f"{V}/tasks/nightly/pause").json()["enabled"] is False
    assert op.get(f"{V}/tasks", params={"state": "paused"}).json()["items"][0]["name"] == "nightly"
    assert op.post(f"{V}/tasks/nightly/resume").json()["enabled"] is True

    fired = op.post(f"{V}/tasks/nightly/trigger", json={"params": {"day": "2026-11-29"}})
    assert fired.status_code == 202
    ident = fired.json()["execution_id"]
    row = sql.execute(
        "SELECT state, params, trigger FROM pgsched.execution WHERE id = %s", [ident]
    ).fetchone()
    assert row == {"state": "pending", "params": {"day": "2026-11-29"}, "trigger": "api"}
    runs = op.get(f"{V}/tasks/nightly/executions").json()["items"]
    assert [r["id"] for r in runs] == [ident]

    gone = op.delete(f"{V}/tasks/nightly")
    assert gone.status_code == 200 and gone.json()["pending_dropped"] == 1
    assert sql.execute("SELECT deleted_at FROM pgsched.task WHERE name = 'nightly'").fetchone()[
        "deleted_at"
    ]
    assert op.get(f"{V}/tasks/nightly").status_code == 404


def test_task_list_filters_and_pages(api, db):
    for i in range(5):
        make_task(
            db, f"t{i}", tags=["even"] if i % 2 == 0 else [], queue="q1" if i < 2 else "default"
        )
    tasks.pause(db, "t4")
    viewer = api("viewer")
    first = viewer.get(f"{V}/tasks", params={"limit": 2}).json()
    assert [t["name"] for t in first["items"]] == ["t0", "t1"] and first["next_cursor"] == "t1"
    second = viewer.get(f"{V}/tasks", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    third = viewer.get(f"{V}/tasks", params={"limit": 2, "cursor": second["next_cursor"]}).json()
    assert [t["name"] for t in second["items"] + third["items"]] == ["t2", "t3", "t4"]
    assert third["next_cursor"] is None
    names = lambda **q: [t["name"] for t in viewer.get(f"{V}/tasks", params=q).json()["items"]]  # noqa: E731
    assert names(tag="even") == ["t0", "t2", "t4"]
    assert names(queue="q1") == ["t0", "t1"]
    assert names(state="paused") == ["t4"] and names(name="3") == ["t3"]


def test_bad_input_is_a_4xx_naming_the_field(api, db):
    op = api("operator")
    make_task(db)
    cases = [
        (
            op.post(
                f"{V}/tasks", content=b"{not json", headers={"content-type": "application/json"}
            ),
            400,
            "body",
        ),
        (op.post(f"{V}/tasks", json=[1, 2]), 422, "body"),
        (
            op.post(f"{V}/tasks", json={"name": "x", "command": "true", "colour": "red"}),
            422,
            "colour",
        ),
        (
            op.post(f"{V}/tasks", json={"name": "x", "command": "true", "priority": "high"}),
            422,
            "priority",
        ),
        (
            op.post(
                f"{V}/tasks",
                json={
                    "name": "x",
                    "command": "true",
                    "schedule_kind": "cron",
                    "schedule": "61 * * * *",
                },
            ),
            422,
            None,
        ),
        (op.patch(f"{V}/tasks/job", json={"name": "renamed"}), 422, "name"),
        (op.get(f"{V}/tasks", params={"limit": "lots"}), 422, "limit"),
        (op.get(f"{V}/executions", params={"from": "yesterday"}), 422, "from"),
        (op.get(f"{V}/executions", params={"state": "exploded"}), 422, "state"),
        (op.get(f"{V}/executions/99999999999999999999"), 404, "id"),
        (op.post(f"{V}/tasks/job/trigger", json={"run_at": 5}), 422, "run_at"),
    ]
    for response, status, field in cases:
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert error["message"] and set(error) == {"code", "message", "field"}
        if field:
            assert error["field"] == field and field in error["message"], error


def test_viewers_may_read_but_not_act(api, db):
    make_task(db)
    ident = tasks.trigger(db, "job")
    viewer = api("viewer", instance=True)  # /workers and /scheduler span tenants
    for path in (
        "/tasks",
        "/tasks/job",
        "/tasks/job/executions",
        "/executions",
        f"/executions/{ident}",
        "/dag-runs",
        "/workers",
        "/metrics/summary",
        "/dlq",
        "/scheduler",
    ):
        assert viewer.get(V + path).status_code == 200, path
    actions = [
        ("post", "/tasks", {"name": "x", "command": "true"}),
        ("patch", "/tasks/job", {"priority": 1}),
        ("delete", "/tasks/job", None),
        ("post", "/tasks/job/trigger", None),
        ("post", "/tasks/job/pause", None),
        ("post", "/tasks/job/resume", None),
        ("post", f"/executions/{ident}/cancel", None),
        ("post", f"/executions/{ident}/retry", None),
        ("post", "/dlq/retry-all", {"expected_count": 0}),
        ("post", f"/dlq/{ident}/retry", None),
        ("delete", f"/dlq/{ident}", None),
        ("post", "/scheduler/failover", None),
        ("get", "/tokens", None),
        ("post", "/tokens", {"role": "viewer"}),
        ("delete", "/tokens/1", None),
    ]
    operator = api("operator", instance=True)
    for method, path, body in actions:
        response = getattr(viewer, method)(V + path, **({"json": body} if body is not None else {}))
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
        if path.startswith(("/tokens", "/scheduler/failover")):
            assert (
                getattr(operator, method)(V + path, **({"json": body} if body else {})).status_code
                == 403
            )
    assert sql_count(db, "SELECT count(*) AS n FROM pgsched.execution") == 1  # nothing happened
    nobody = api("viewer")
    nobody.headers.pop("Authorization")
    assert nobody.get(f"{V}/tasks").status_code == 401


def sql_count(db, query):
    with db.pool.connection() as conn:
        return conn.execute(query).fetchone()["n"]


def test_tenants_never_see_each_other(api, db):
    make_task(db, "ours", tenant="a")
    make_task(db, "theirs", tenant="b")
    mine, theirs = dead(db, "ours", "a"), dead(db, "theirs", "b")
    a = api("admin", "a")
    assert [t["name"] for t in a.get(f"{V}/tasks").json()["items"]] == ["ours"]
    assert a.get(f"{V}/tasks/theirs").status_code == 404
    assert a.post(f"{V}/tasks/theirs/trigger").status_code == 404
    assert a.patch(f"{V}/tasks/theirs", json={"priority": 1}).status_code == 404
    assert a.delete(f"{V}/tasks/theirs").status_code == 404
    assert [e["id"] for e in a.get(f"{V}/executions").json()["items"]] == [mine]
    assert a.get(f"{V}/executions/{theirs}").status_code == 404
    assert a.get(f"{V}/executions/{theirs}/logs").status_code == 404
    assert a.post(f"{V}/executions/{theirs}/cancel").status_code == 404
    assert [e["id"] for e in a.get(f"{V}/dlq").json()["items"]] == [mine]
    assert a.post(f"{V}/dlq/{theirs}/retry").status_code == 404
    assert a.delete(f"{V}/dlq/{theirs}").status_code == 404
    assert a.get(f"{V}/metrics/summary").json()["dead_letter"] == 1
    assert a.post(f"{V}/dlq/retry-all", json={"expected_count": 1}).json() == {"retried": 1}
    b_state = sql_count(
        db,
        f"SELECT count(*) AS n FROM pgsched.execution_history WHERE id = {theirs} "
        "AND state = 'dead'",
    )
    assert b_state == 1
    b_tokens = api("admin", "b").get(f"{V}/tokens").json()["items"]
    assert all(t["tenant"] == "b" for t in b_tokens)
    assert a.delete(f"{V}/tokens/{b_tokens[0]['id']}").status_code == 404


def test_a_script_name_round_trips_as_data(api, client, db):
    name = "<script>alert(1)</script>"
    make_task(db, "plain")
    # names are validated: the API refuses this one with a message holding it as data
    refused = api("operator").post(f"{V}/tasks", json={"name": name, "command": "true"})
    assert refused.status_code == 422 and name in refused.json()["error"]["message"]
    described = api("operator").patch(f"{V}/tasks/plain", json={"description": name})
    assert described.json()["description"] == name
    assert api("viewer").get(f"{V}/tasks/plain").json()["description"] == name
    assert api("viewer").get(f"{V}/tasks/{name}").json()["error"]["code"] == "not_found"


def test_execution_cancel_and_retry(api, db, sql):
    make_task(db)
    op = api("operator")
    pending = tasks.trigger(db, "job")
    assert op.post(f"{V}/executions/{pending}/cancel").json() == {
        "id": pending,
        "outcome": "cancelled",
    }
    assert (
        sql.execute("SELECT state FROM pgsched.execution_all WHERE id = %s", [pending]).fetchone()[
            "state"
        ]
        == "cancelled"
    )
    again = op.post(f"{V}/executions/{pending}/retry").json()
    assert again["outcome"] == "new_execution" and again["execution_id"] != pending
    live = op.post(f"{V}/executions/{again['execution_id']}/retry")
    assert live.status_code == 409 and live.json()["error"]["field"] == "id"
    gone = dead(db)
    assert op.post(f"{V}/executions/{gone}/retry").json()["outcome"] == "requeued"
    assert (
        sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", [gone]).fetchone()["state"]
        == "pending"
    )
    detail = op.get(f"{V}/executions/{gone}").json()
    assert detail["task_name"] == "job" and [a["attempt"] for a in detail["attempts"]] == [1]


def test_dlq_retry_all_needs_the_count_confirmed_and_delete(api, db, sql):
    make_task(db)
    first, second = dead(db), dead(db)
    op = api("operator")
    assert [e["id"] for e in op.get(f"{V}/dlq").json()["items"]] == [second, first]
    missing = op.post(f"{V}/dlq/retry-all", json={})
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "expected_count"
    stale = op.post(f"{V}/dlq/retry-all", json={"expected_count": 1})
    assert stale.status_code == 409 and "2 dead" in stale.json()["error"]["message"]
    assert op.delete(f"{V}/dlq/{first}").json() == {"id": first, "deleted": True}
    assert (
        sql.execute("SELECT 1 FROM pgsched.execution_all WHERE id = %s", [first]).fetchone() is None
    )
    assert op.delete(f"{V}/dlq/{first}").status_code == 404
    assert op.post(f"{V}/dlq/retry-all", json={"expected_count": 1}).json() == {"retried": 1}
    assert (
        sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", [second]).fetchone()[
            "state"
        ]
        == "pending"
    )
    third = dead(db)
    assert op.post(f"{V}/dlq/{third}/retry").status_code == 202


def test_logs_stream_as_server_sent_events_until_the_execution_ends(api, db):
    make_task(db)
    ident = tasks.trigger(db, "job")
    (c,) = claim(db, register(db))

    def log(seq, line):
        db.exec(
            "execution_log_insert",
            id=ident,
            attempt=1,
            tenant="default",
            seq=[seq],
            stream=["stdout"],
            logged_at=[datetime.now(UTC)],
            line=[line],
        )

    log(1, "first")
    events: list[tuple[str, str]] = []
    viewer = api("viewer")

    def read():
        with viewer.stream("GET", f"{V}/executions/{ident}/logs") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            kind = None
            for text in response.iter_lines():
                if text.startswith("event: "):
                    kind = text[7:]
                elif text.startswith("data: "):
                    events.append((kind, text[6:]))

    reader = threading.Thread(target=read)
    reader.start()
    wait_until(lambda: events, message="the first line")
    log(2, "second <b>")
    finish(db, ident, c["lease_id"], state="succeeded", finished_at=datetime.now(UTC))
    reader.join(30)
    assert not reader.is_alive()
    assert [json.loads(d)["line"] for k, d in events if k == "line"] == ["first", "second <b>"]
    assert events[-1] == ("end", json.dumps({"state": "succeeded"}))
    # ended: one pass, resumed after the first line
    text = viewer.get(f"{V}/executions/{ident}/logs", headers={"Last-Event-ID": "1:1"}).text
    assert (
        "first" not in text
        and "second" in text
        and text.rstrip().endswith('{"state": "succeeded"}')
    )


def test_dag_runs(api, db):
    from pgsched import dag
    from pgsched.stores import dagruns, dags

    definition = dag.parse(
        {
            "name": "pipe",
            "nodes": [
                {"id": "a", "command": "true"},
                {"id": "b", "command": "true", "depends_on": ["a"]},
            ],
        }
    )
    dags.apply(db, definition)
    run_id = dagruns.trigger(db, "pipe")
    viewer = api("viewer")
    listed = viewer.get(f"{V}/dag-runs", params={"dag": "pipe"}).json()["items"]
    assert [r["id"] for r in listed] == [run_id]
    one = viewer.get(f"{V}/dag-runs/{run_id}").json()
    assert one["dag_name"] == "pipe" and [n["node_id"] for n in one["node_runs"]] == ["a", "b"]
    assert one["node_runs"][1]["state"] == "waiting"
    node_execution = one["node_runs"][0]["execution_id"]
    operator = api("operator")
    assert operator.post(f"{V}/executions/{node_execution}/cancel").json()["outcome"] == "cancelled"
    refused = operator.post(f"{V}/executions/{node_execution}/retry")
    assert refused.status_code == 409 and "DAG run" in refused.json()["error"]["message"]
    assert api("viewer", "other").get(f"{V}/dag-runs/{run_id}").status_code == 404


def test_scheduler_status_and_forced_failover(api, dsn, pg_server, db):
    admin = api("admin", instance=True)
    assert admin.get(f"{V}/scheduler").json()["leader"] is None
    leader_key = internal_key(db, "leader")
    # another database's leader (another install on the same server) is not ours to end:
    # pg_locks lists every database's advisory locks
    with psycopg.connect(dsn_for(pg_server, "postgres"), autocommit=True) as elsewhere:
        elsewhere.execute("SELECT pg_advisory_lock(%s)", [leader_key])
        assert admin.post(f"{V}/scheduler/failover").status_code == 409
        # nor is it a hung leader of ours for a standby to end, however silent ours is
        with psycopg.connect(dsn, autocommit=True) as sql:
            sql.execute(
                "INSERT INTO pgsched.leader (epoch, holder, elected_at, heartbeat_at) "
                "VALUES (1, 'hung:1', now(), now() - interval '1 hour')"
            )
            assert db.many("scheduler_end_stale_leader", seconds=1) == []
            leader = db.one("scheduler_leader")
            assert leader is not None and leader["lock_held"] is False
            sql.execute("DELETE FROM pgsched.leader")
        elsewhere.execute("SELECT 1")  # still alive
    with psycopg.connect(dsn, autocommit=True) as leader:
        leader.execute("SELECT pg_advisory_lock(%s)", [leader_key])
        ended = admin.post(f"{V}/scheduler/failover")
        assert ended.status_code == 202 and ended.json()["ended_backends"] == [
            leader.info.backend_pid
        ]
        with pytest.raises(psycopg.OperationalError):
            leader.execute("SELECT 1")


def test_admin_manages_tokens(api, client):
    admin = api("admin", "acme")
    made = admin.post(f"{V}/tokens", json={"role": "viewer", "name": "grafana"})
    assert made.status_code == 201 and made.json()["tenant"] == "acme"
    token = made.json()["token"]
    reader = client.get(f"{V}/tasks", headers={"Authorization": f"Bearer {token}"})
    assert reader.status_code == 200
    listed = admin.get(f"{V}/tokens").json()["items"]
    assert "grafana" in [t["name"] for t in listed] and all("token" not in t for t in listed)
    assert admin.post(f"{V}/tokens", json={"role": "root"}).json()["error"]["field"] == "role"
    assert admin.delete(f"{V}/tokens/{made.json()['id']}").json()["revoked_at"]
    assert client.get(f"{V}/tasks", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_execution_filters_and_paging(api, db):
    make_task(db)
    make_task(db, "other")
    ids = [tasks.trigger(db, "job") for _ in range(3)]
    tasks.trigger(db, "other", run_at=datetime.now(UTC) + timedelta(days=1))
    viewer = api("viewer")
    first = viewer.get(f"{V}/executions", params={"task": "job", "limit": 2}).json()
    rest = viewer.get(
        f"{V}/executions", params={"task": "job", "limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [e["id"] for e in first["items"] + rest["items"]] == ids[::-1] and rest[
        "next_cursor"
    ] is None
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    later = viewer.get(f"{V}/executions", params={"from": soon}).json()["items"]
    assert [e["task_name"] for e in later] == ["other"]
    assert (
        len(viewer.get(f"{V}/executions", params={"to": soon, "state": "pending"}).json()["items"])
        == 3
    )
    assert viewer.get(f"{V}/executions", params={"worker": 12345}).json()["items"] == []


def test_text_postgresql_cannot_store_is_a_422_not_a_crash(api, db):
    make_task(db)
    op = api("operator")
    raw = {"headers": {"content-type": "application/json"}}
    for path, method, body, field in [
        ("/tasks", "post", b'{"name": "x", "command": "echo \\ud800"}', "command"),
        ("/tasks/job", "patch", b'{"stdin": "a\\u0000b"}', "stdin"),
        ("/tasks/job/trigger", "post", b'{"idempotency_key": "\\udfff"}', "idempotency_key"),
        ("/tasks/job/trigger", "post", b'{"params": {"k": ["\\ud800"]}}', "params"),
    ]:
        response = op.request(method.upper(), V + path, content=body, **raw)
        assert response.status_code == 422 and response.json()["error"]["field"] == field, (
            response.text
        )
    assert sql_count(db, "SELECT count(*) AS n FROM pgsched.execution") == 0
