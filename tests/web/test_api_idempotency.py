"""The REST trigger route (migration 0012): an idempotency key belongs to its task, and the
answer says whether the trigger was deduplicated and which execution it returned, as the
OpenAPI document describes."""

from __future__ import annotations

from datetime import UTC, datetime

from pgsched.web.openapi import document

from ..db.test_claim import claim, finish, register
from ..factories import make_task

V = "/api/v1"


def test_a_key_shared_by_two_tasks_gives_two_executions(api, db, sql):
    make_task(db, "invoice")
    make_task(db, "receipt")
    op = api("operator")
    first = op.post(f"{V}/tasks/invoice/trigger", json={"idempotency_key": "order-7"})
    other = op.post(f"{V}/tasks/receipt/trigger", json={"idempotency_key": "order-7"})
    assert (first.status_code, other.status_code) == (202, 202)
    assert first.json()["deduplicated"] is False and other.json()["deduplicated"] is False
    assert first.json()["execution_id"] != other.json()["execution_id"]
    names = [
        r["name"]
        for r in sql.execute(
            "SELECT t.name FROM pgsched.execution e JOIN pgsched.task t ON t.id = e.task_id "
            "WHERE e.idempotency_key = 'order-7' ORDER BY e.id"
        )
    ]
    assert names == ["invoice", "receipt"]


def test_the_trigger_says_when_the_key_deduplicated_it(api, db, sql):
    make_task(db, "invoice")
    op = api("operator")
    body = {"idempotency_key": "order-7"}
    first = op.post(f"{V}/tasks/invoice/trigger", json=body).json()
    assert first == {
        "execution_id": first["execution_id"],
        "deduplicated": False,
        "dedup_reason": None,
        "succeeded_execution_id": None,
    }
    live = op.post(f"{V}/tasks/invoice/trigger", json=body)
    assert live.status_code == 202
    assert live.json() == {
        "execution_id": first["execution_id"],
        "deduplicated": True,
        "dedup_reason": "live",
        "succeeded_execution_id": None,
    }
    (row,) = claim(db, register(db))
    assert finish(db, row["id"], row["lease_id"], finished_at=datetime.now(UTC)) == 1
    done = op.post(f"{V}/tasks/invoice/trigger", json=body).json()
    assert (done["deduplicated"], done["dedup_reason"], done["succeeded_execution_id"]) == (
        True,
        "succeeded",
        first["execution_id"],
    )
    assert sql.execute(
        "SELECT state FROM pgsched.execution_all WHERE id = %s", [done["execution_id"]]
    ).fetchone() == {"state": "skipped"}
    bad = op.post(f"{V}/tasks/invoice/trigger", json={"idempotency_key": ""})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "idempotency_key"


def test_the_openapi_document_describes_the_answer(api, db):
    make_task(db, "invoice")
    answer = (
        api("operator").post(f"{V}/tasks/invoice/trigger", json={"idempotency_key": "k"}).json()
    )
    doc = document()
    response = doc["paths"][f"{V}/tasks/{{name}}/trigger"]["post"]["responses"]["202"]
    assert response["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Enqueued"
    }
    schema = doc["components"]["schemas"]["Enqueued"]
    assert set(schema["required"]) == set(schema["properties"]) == set(answer)
    assert schema["properties"]["dedup_reason"]["enum"] == [
        "live",
        "succeeded",
        "unique_pending",  # a task's unique window (migration 0022)
        "unique_period",
        None,
    ]
