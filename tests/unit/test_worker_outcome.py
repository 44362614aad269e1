"""pgsched.worker.outcome: what an ended attempt means for its execution, decided once,
without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgsched.handlers import Outcome
from pgsched.worker.outcome import as_ended, final_state, finished_attempt, handed_back

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def row(attempt: int = 1, max_attempts: int = 3, exit_codes=None, exceptions=None) -> dict:
    return {
        "id": 7,
        "lease_id": 70,
        "task_name": "job",
        "attempt": attempt,
        "max_attempts": max_attempts,
        "no_retry_exit_codes": exit_codes,
        "no_retry_exceptions": exceptions,
    }


@pytest.mark.parametrize(
    ("outcome", "r", "final"),
    [
        (Outcome("succeeded", 0), row(), "succeeded"),
        (Outcome("cancelled"), row(), "cancelled"),
        (Outcome("failed", 1), row(attempt=1), None),
        (Outcome("timed_out", 143), row(attempt=2), None),
        (Outcome("failed", 1), row(attempt=3), "dead"),
        (Outcome("failed", 3), row(exit_codes=[3]), "dead"),
        (Outcome("failed", 4), row(exit_codes=[3]), None),
        (
            Outcome("failed", error_types=("app.Fatal", "Exception")),
            row(exceptions=["app.Fatal"]),
            "dead",
        ),
        (
            Outcome("failed", error_types=("app.Fatal", "Exception")),
            row(exceptions=["Fatal"]),
            "dead",
        ),
        (
            Outcome("failed", error_types=("app.Other", "Exception")),
            row(exceptions=["Fatal"]),
            None,
        ),
    ],
)
def test_the_final_state_of_an_attempt(outcome, r, final):
    assert final_state(r, outcome, stopped=False) == final


def test_a_handed_back_attempt_is_always_run_again_and_recorded_lost():
    failed = Outcome("failed", error="stopped by the worker; process group killed")
    assert handed_back("handback", failed) and not handed_back("handback", Outcome("succeeded", 0))
    assert not handed_back("cancel", failed) and not handed_back(None, failed)
    attempt = finished_attempt(row(attempt=3), failed, stopped=True, started_at=T0, finished_at=T0)
    assert attempt.final is None and attempt.attempt_state == "lost"
    msg, args = attempt.summary(attempt.final)
    assert "handed back" in msg % args


def test_a_cancelled_slot_ends_cancelled_whatever_its_handler_said():
    ended = as_ended(Outcome("failed", 143, "stopped by the worker"), "cancel")
    assert (ended.state, ended.exit_code, ended.error) == (
        "cancelled",
        143,
        "cancelled on request (stopped by the worker)",
    )
    same = Outcome("failed", 1)
    assert as_ended(same, "handback") is same and as_ended(same, None) is same


def test_the_finish_item_carries_the_decided_state_once():
    attempt = finished_attempt(
        row(),
        Outcome("succeeded", 0, result={"n": 1}),
        stopped=False,
        started_at=T0,
        finished_at=T0 + timedelta(seconds=2),
    )
    item = attempt.finish_item()
    assert item == dict(
        id=7,
        lease_id=70,
        state="succeeded",
        finished_at=T0 + timedelta(seconds=2),
        exit_code=0,
        error=None,
        result={"n": 1},
        attempt_state="succeeded",
        started_at=T0,
        error_type=None,
    )
    msg, args = attempt.summary("succeeded")
    assert msg % args == "execution 7 job attempt 1/3 succeeded in 2.00s"


def test_the_outcome_module_imports_no_database_driver():
    import ast
    import pathlib

    import pgsched.worker.outcome as module

    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any("psycopg" in n or n in ("db", "..db") for n in names), names
