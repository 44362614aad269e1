"""Viewers do not see what they should not (issue 19, item 4): no page or API answer shows a
viewer or an operator a task's env values or sensitive params (the database masks them,
migration 0031); a tenant's admin sees them; an edit that sends the masks back keeps them."""

from __future__ import annotations

import re

import pytest

from pgsched import dag as dag_module
from pgsched.masking import MASK
from pgsched.stores import dagruns, dags, tasks

from ..factories import make_task
from .test_pages import signed  # noqa: F401  (a fixture)

SECRETS = ("hunter2-env", "tok-param-1", "pw-nested-2", "cust-marked-3", "run-secret-4",
           "dag-env-5", "dag-run-pw-6")  # fmt: skip
ENV = {"DB_PASSWORD": SECRETS[0], "REGION_URL": "also-masked"}
PARAMS = {"api_token": SECRETS[1], "jobs": [{"password": SECRETS[2]}], "customer": SECRETS[3],
          "region": "eu-west"}  # fmt: skip


@pytest.fixture
def secrets(db):
    """A task with secrets in env and params, a run with a secret param, and a DAG whose node
    has a secret env value with a run given a secret param: (execution id, DAG run id)."""
    make_task(db, "job", env=ENV, params=PARAMS, sensitive_params=["customer"])
    run = tasks.trigger(db, "job", params={"run_secret": SECRETS[4]})
    definition = {
        "name": "etl",
        "nodes": [{"id": "extract", "command": "true", "env": {"KEY": SECRETS[5]}}],
    }
    dags.apply(db, dag_module.parse(definition))
    dag_run = dagruns.trigger(db, "etl", params={"db_password": SECRETS[6]})
    return run, dag_run


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _paths(run: int, dag_run: int) -> list[str]:
    return [
        "/api/v1/tasks",
        "/api/v1/tasks/job",
        f"/api/v1/executions/{run}",
        "/api/v1/tasks/job/executions",
        f"/api/v1/dag-runs/{dag_run}",
    ]


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_no_api_answer_shows_a_secret_below_admin(api, secrets, role):
    run, dag_run = secrets
    client = api(role)
    for path in _paths(run, dag_run):
        response = client.get(path)
        assert response.status_code == 200, path
        assert _leaks(response.text) == [], path
    task = client.get("/api/v1/tasks/job").json()
    assert task["env"] == {"DB_PASSWORD": MASK, "REGION_URL": MASK}
    assert task["params"]["region"] == "eu-west" and task["params"]["customer"] == MASK
    assert client.get(f"/api/v1/executions/{run}").json()["params"]["run_secret"] == MASK


def test_a_principal_that_may_reveal_sees_the_values(api, secrets):
    run, dag_run = secrets
    admin = api("admin", may_reveal=True)
    assert admin.get("/api/v1/tasks/job").json()["env"] == ENV
    assert admin.get(f"/api/v1/executions/{run}").json()["params"]["run_secret"] == SECRETS[4]
    assert admin.get(f"/api/v1/dag-runs/{dag_run}").json()["params"]["db_password"] == SECRETS[6]


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_no_page_shows_a_secret_below_admin(signed, secrets, role):  # noqa: F811
    run, dag_run = secrets
    client = signed(role)
    for path in ("/tasks", "/tasks/job", f"/executions/{run}", "/dags/etl", f"/dags/runs/{dag_run}",
                 "/executions", "/"):  # fmt: skip
        response = client.get(path)
        assert response.status_code == 200, path
        assert _leaks(response.text) == [], path
    page = client.get("/tasks/job").text
    assert re.search(rf"DB_PASSWORD={MASK}", page) and "customer" in page


def test_a_revealing_admins_task_page_shows_the_env(signed, secrets):  # noqa: F811
    assert f"DB_PASSWORD={SECRETS[0]}" in signed("admin", may_reveal=True).get("/tasks/job").text


def test_an_operators_update_that_sends_the_masks_back_keeps_the_secrets(api, db, secrets):
    operator = api("operator")
    shown = operator.get("/api/v1/tasks/job").json()
    params = {**shown["params"], "region": "us-east"}
    answer = operator.patch("/api/v1/tasks/job", json={"env": shown["env"], "params": params})
    assert answer.status_code == 200 and _leaks(answer.text) == []
    stored = tasks.get(db, "job")
    assert stored["env"] == ENV and stored["params"] == {**PARAMS, "region": "us-east"}


def test_a_task_created_by_an_operator_is_answered_masked(api):
    answer = api("operator").post(
        "/api/v1/tasks", json={"name": "new", "command": "true", "env": {"PW": SECRETS[0]}}
    )
    assert answer.status_code == 201 and answer.json()["env"] == {"PW": MASK}
