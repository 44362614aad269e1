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
