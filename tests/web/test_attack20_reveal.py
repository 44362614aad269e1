"""Attack 20 on the reveal permission (migration 0036): an operator shown the masks must
not read the values through an edit that fails. An update sending the mask back keeps the
stored value (pgsched.masking.restore) before the whole task is validated, so a refused
field beside the mask named the env or params with the real value in the 422's message."""

from __future__ import annotations

import pytest

from pgsched.masking import MASK

from ..factories import make_task

VALUE = "hunter2-attack20"


@pytest.fixture
def job(db):
    make_task(db, "job", env={"DB_PASSWORD": VALUE}, params={"api_token": VALUE, "n": 1})


@pytest.mark.parametrize(
    "body",
    [
        '{"env": {"DB_PASSWORD": "M", "A=B": "x"}}'.replace("M", MASK),
        '{"params": {"api_token": "M", "n": NaN}}'.replace("M", MASK),
        '{"env": {"DB_PASSWORD": "M"}, "max_attempts": 0}'.replace("M", MASK),
    ],
    ids=["env-bad-key", "params-nan", "another-field"],
)
def test_a_refused_edit_does_not_name_the_restored_values(api, job, body):
    operator = api("operator")
    refused = operator.patch(
        "/api/v1/tasks/job", content=body, headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 422, refused.text
    assert VALUE not in refused.text
    assert operator.get("/api/v1/tasks/job").json()["env"] == {"DB_PASSWORD": MASK}


def test_an_operator_shown_the_masks_cannot_unmark_a_param_to_read_it(api, db):
    make_task(db, "marked", params={"region_key": VALUE}, sensitive_params=["region_key"])
    operator = api("operator")
    assert operator.get("/api/v1/tasks/marked").json()["params"] == {"region_key": MASK}
    for marks in ([], ["REGION_KEY_OTHER"]):
        refused = operator.patch("/api/v1/tasks/marked", json={"sensitive_params": marks})
        assert refused.status_code == 422, refused.text  # the database refused it (42501)
        assert "sensitive_params" in refused.text and VALUE not in refused.text
    assert VALUE not in operator.get("/api/v1/tasks/marked").text
    kept = operator.patch("/api/v1/tasks/marked", json={"sensitive_params": ["REGION_KEY", "b"]})
    assert kept.status_code == 200, kept.text  # a mark kept (any case) or added is anyone's
    revealing = api("operator", may_reveal=True)
    assert revealing.patch("/api/v1/tasks/marked", json={"sensitive_params": []}).status_code == 200
    assert revealing.get("/api/v1/tasks/marked").json()["params"] == {"region_key": VALUE}


def test_a_concurrency_key_does_not_render_a_masked_param_for_a_viewer(api, db, job):
    """A key template naming a masked param put its value in every execution's key, which
    a pending run's wait reason names ("key K runs its limit ...")."""
    from ..db.test_claim import claim, register

    operator = api("operator")
    changed = operator.patch(
        "/api/v1/tasks/job", json={"concurrency_key": "k:{api_token}", "key_max_running": 1}
    )
    assert changed.status_code == 200, changed.text
    idents = []
    for _ in range(2):
        ran = operator.post("/api/v1/tasks/job/trigger", json={})
        assert ran.status_code == 202, ran.text
        idents.append(ran.json()["execution_id"])
    assert len(claim(db, register(db))) == 1
    for path in (
        *(f"/api/v1/executions/{i}" for i in idents),
        "/api/v1/executions",
        "/api/v1/queues",
        "/api/v1/tasks/job",
    ):
        assert VALUE not in operator.get(path).text, path


def test_a_concurrency_key_may_not_name_a_marked_param(api, db):
    make_task(db, "marked", params={"region": VALUE}, sensitive_params=["region"])
    operator = api("operator")
    refused = operator.patch("/api/v1/tasks/marked", json={"concurrency_key": "k:{Region}"})
    assert refused.status_code == 422 and "names the param 'Region'" in refused.text
    make_task(db, "keyed", params={"region": VALUE}, concurrency_key="k:{region}")
    refused = operator.patch("/api/v1/tasks/keyed", json={"sensitive_params": ["region"]})
    assert refused.status_code == 422 and "marks sensitive" in refused.text
