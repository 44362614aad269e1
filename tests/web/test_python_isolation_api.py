"""A task's ``python_isolation`` (migration 0035) through the REST API: created, shown,
patched back to the worker's (null), and a bad value refused naming the field and the
value, nothing written."""

from __future__ import annotations

from .test_api import V


def test_the_api_carries_a_tasks_python_isolation(api, sql):
    op = api("operator")
    made = op.post(
        f"{V}/tasks",
        json={
            "name": "iso",
            "handler_kind": "python",
            "python_target": "m:f",
            "python_isolation": "thread",
        },
    )
    assert made.status_code == 201, made.text
    assert op.get(f"{V}/tasks/iso").json()["python_isolation"] == "thread"
    bad = op.patch(f"{V}/tasks/iso", json={"python_isolation": "fork"})
    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["field"] == "python_isolation"
    assert "'fork'" in bad.json()["error"]["message"]
    stored = "SELECT python_isolation FROM pgsched.task WHERE name = 'iso'"
    assert sql.execute(stored).fetchone()["python_isolation"] == "thread"
    back = op.patch(f"{V}/tasks/iso", json={"python_isolation": None})
    assert back.status_code == 200, back.text
    assert back.json()["python_isolation"] is None
    assert sql.execute(stored).fetchone()["python_isolation"] is None
