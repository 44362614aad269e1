"""Migration 0009 on a real database: an execution's task_id is checked by triggers once
per statement instead of a foreign key's check per row, and the key's rules all hold:
no execution of a task that does not exist, no task row deleted (or its id changed, or
the table truncated) while executions name it, and a DELETE racing an INSERT cannot
leave an execution without its task."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import errors as pg_errors

from pgsched.stores import tasks

from ..factories import make_task
from ..helpers import wait_for, waiting_on_a_lock

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)

INSERT = """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at)
            SELECT t, now(), now() FROM unnest(%s::bigint[]) AS t"""


def count(sql, task_id=None):
    if task_id is None:
        return sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"]
    return sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s", [task_id]
    ).fetchone()["n"]


def test_the_foreign_key_is_gone_and_the_triggers_are_in_its_place(sql):
    keys = sql.execute("""SELECT conname FROM pg_constraint
                           WHERE conrelid = 'pgsched.execution'::regclass AND contype = 'f'""").fetchall()
    assert keys == []
    names = {
        r["tgname"]
        for r in sql.execute(
            """SELECT tgname FROM pg_trigger
            WHERE tgrelid IN ('pgsched.execution'::regclass, 'pgsched.task'::regclass)
              AND NOT tgisinternal"""
        )
    }
    assert {
        "execution_inserted",
        "execution_task_recheck",
        "task_referenced_delete",
        "task_referenced_update",
        "task_referenced_truncate",
    } <= names


def test_an_insert_naming_a_missing_task_fails_whole(db, sql):
    task = make_task(db, "real", now=T0)
    with pytest.raises(pg_errors.ForeignKeyViolation, match="task_id 987654 is not a task"):
        sql.execute(INSERT, [[task["id"], task["id"], 987654, task["id"]]])
    assert count(sql) == 0
    sql.execute(INSERT, [[task["id"], task["id"]]])
    assert count(sql, task["id"]) == 2


def test_a_batch_naming_several_tasks_is_checked_for_each(db, sql):
    a, b = make_task(db, "a", now=T0), make_task(db, "b", now=T0)
    sql.execute(INSERT, [[a["id"], b["id"], a["id"], b["id"]]])
    assert (count(sql, a["id"]), count(sql, b["id"])) == (2, 2)
    with pytest.raises(pg_errors.ForeignKeyViolation):
        sql.execute(INSERT, [[a["id"], b["id"], -1]])
    assert count(sql) == 4


def test_the_batch_enqueue_still_names_its_task(db, sql):
    task = make_task(db, "bulk", now=T0)
    ids = tasks.enqueue_many(db, "bulk", [{"n": i} for i in range(500)])
    assert len(ids) == 500
    assert count(sql, task["id"]) == 500


def test_moving_an_execution_to_a_missing_task_fails(db, sql):
    task = make_task(db, "mover", now=T0)
    execution_id = tasks.trigger(db, "mover")
    with pytest.raises(pg_errors.ForeignKeyViolation, match="task_id -5 is not a task"):
        sql.execute("UPDATE pgsched.execution SET task_id = -5 WHERE id = %s", [execution_id])
    row = sql.execute(
        "SELECT task_id FROM pgsched.execution WHERE id = %s", [execution_id]
    ).fetchone()
    assert row["task_id"] == task["id"]


def test_a_task_named_by_executions_cannot_be_deleted_renumbered_or_truncated(db, sql):
    task = make_task(db, "kept", now=T0)
    tasks.trigger(db, "kept")
    with pytest.raises(pg_errors.ForeignKeyViolation, match="still named by executions"):
        sql.execute("DELETE FROM pgsched.task WHERE id = %s", [task["id"]])
    with pytest.raises(pg_errors.ForeignKeyViolation, match="still named by executions"):
        sql.execute("UPDATE pgsched.task SET id = id + 1000 WHERE id = %s", [task["id"]])
    with pytest.raises(pg_errors.ForeignKeyViolation, match="still named by executions"):
        sql.execute("TRUNCATE pgsched.task CASCADE")
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.task WHERE id = %s", [task["id"]]
        ).fetchone()["n"]
        == 1
    )
    assert count(sql, task["id"]) == 1


def test_a_task_no_execution_names_can_be_deleted(db, sql):
    task = make_task(db, "unused", now=T0)
    other = make_task(db, "busy", now=T0)
    tasks.trigger(db, "busy")
    sql.execute("DELETE FROM pgsched.task WHERE id = %s", [task["id"]])
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.task WHERE id = %s", [task["id"]]
        ).fetchone()["n"]
        == 0
    )
    assert count(sql, other["id"]) == 1


def race(dsn, sql, first: tuple[str, list], second: tuple[str, list]) -> dict:
    """Run ``first`` in an open transaction, then ``second`` (autocommit) in a thread;
    check that ``second`` waits for ``first``, commit ``first``, and return how ``second``
    ended: {"done": True} or {"error": the ForeignKeyViolation}."""
    outcome: dict = {}
    with psycopg.connect(dsn) as holding:
        holding.execute(*first)

        def go():
            with psycopg.connect(dsn, autocommit=True, application_name="race second") as conn:
                try:
                    conn.execute(*second)
                    outcome["done"] = True
                except pg_errors.ForeignKeyViolation as exc:
                    outcome["error"] = exc

        thread = threading.Thread(target=go)
        thread.start()
        wait_for(
            lambda: not thread.is_alive() or waiting_on_a_lock(sql, "race second"),
            what=f"{second[0]!r} to wait on a lock (or to end)",
        )
        assert thread.is_alive(), f"{second[0]!r} did not wait for the open transaction"
        holding.commit()
        thread.join(10)
    return outcome


def test_a_delete_waits_for_an_open_insert_and_then_fails(db, sql, dsn):
    """The INSERT locks its task FOR KEY SHARE until it commits: a DELETE of the task
    waits, then sees the committed execution and fails."""
    task = make_task(db, "raced", now=T0)
    outcome = race(
        dsn, sql, (INSERT, [[task["id"]]]), ("DELETE FROM pgsched.task WHERE id = %s", [task["id"]])
    )
    assert "error" in outcome and "done" not in outcome
    assert count(sql, task["id"]) == 1


def test_an_insert_waits_for_an_open_delete_and_then_fails(db, sql, dsn):
    """The other order: the DELETE is open when the INSERT comes; the INSERT's lock waits,
    finds the row gone once the DELETE commits, and fails."""
    task = make_task(db, "gone", now=T0)
    outcome = race(
        dsn, sql, ("DELETE FROM pgsched.task WHERE id = %s", [task["id"]]), (INSERT, [[task["id"]]])
    )
    assert "error" in outcome and "done" not in outcome
    assert count(sql) == 0
