"""Retry all against an execution that dies while the confirmed count is checked."""

from __future__ import annotations

import pytest

from pgsched.db import Session

from ..factories import make_task
from .test_api import V, dead


@pytest.fixture
def dies_after_the_count(db, monkeypatch):
    """Once the retry-all's count has run, another execution dies (committed by another
    connection) before the retry itself."""
    count = Session.one
    died: list[int] = []

    def one(self, query_name, /, **params):
        row = count(self, query_name, **params)
        if query_name == "api_dlq_count" and not died:
            died.append(dead(db))
        return row

    monkeypatch.setattr(Session, "one", one)
    return died


def test_retry_all_retries_only_the_count_confirmed(api, db, sql, dies_after_the_count):
    make_task(db)
    first = dead(db)
    answer = api("operator").post(f"{V}/dlq/retry-all", json={"expected_count": 1})
    assert answer.status_code == 409 and "2 dead" in answer.json()["error"]["message"]
    [late] = dies_after_the_count
    states = sql.execute(
        "SELECT id, state FROM pgsched.execution_all WHERE id IN (%s, %s) ORDER BY id",
        [first, late],
    ).fetchall()
    assert states == [
        {"id": first, "state": "dead"},
        {"id": late, "state": "dead"},
    ]  # nothing retried
