"""The rule for running an ended execution again has one home (pgsched.stores.executions):
the page shows the retry button exactly for the executions the retry accepts."""

from __future__ import annotations

import itertools

import pytest

from pgsched.errors import ValidationError
from pgsched.lifecycle import ExecutionState, ExecutionTrigger
from pgsched.stores import executions


@pytest.mark.parametrize(
    ("state", "trigger"), list(itertools.product(ExecutionState, ExecutionTrigger))
)
def test_the_button_shows_for_what_the_retry_accepts(state, trigger):
    row = {"id": 7, "state": state.value, "trigger": trigger.value, "task_name": "t", "params": {}}
    live = state in (ExecutionState.PENDING, ExecutionState.RUNNING)
    dag_node = trigger == ExecutionTrigger.DAG and state != ExecutionState.DEAD
    assert executions.retryable(row) is not (live or dag_node)
    if not executions.retryable(row):
        with pytest.raises(ValidationError) as refused:
            executions.retry(None, row, "default", how="api")  # refused before any statement
        assert refused.value.field == "execution" and refused.value.value == 7
