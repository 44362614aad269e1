"""Migration 0009, more of its rules on a real database: COPY goes through the statement
trigger too, every kind of insert still wakes the workers, idempotency keys still give one
execution under a race, and the migration applied to a database that has executions."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import errors as pg_errors

from pgsched import migrate
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..factories import make_task
from ..helpers import notifications_until_marker, wait_for, waiting_on_a_lock

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)


def count(sql, task_id=None):
    if task_id is None:
        return sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"]
    return sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s", [task_id]
    ).fetchone()["n"]


def copy_rows(dsn, task_ids):
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.cursor().copy(
            "COPY pgsched.execution (task_id, scheduled_at, run_at) FROM STDIN"
        ) as copy:
            for t in task_ids:
                copy.write_row((t, T0, T0))


def test_copy_into_execution_checks_every_task(db, sql, dsn):
    task = make_task(db, "copied", now=T0)
    with pytest.raises(pg_errors.ForeignKeyViolation, match="task_id 424242 is not a task"):
        copy_rows(dsn, [task["id"]] * 50 + [424242] + [task["id"]] * 50)
    assert count(sql) == 0
    copy_rows(dsn, [task["id"]] * 3)
    assert count(sql, task["id"]) == 3


@pytest.fixture
def listener(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("LISTEN pgsched_execution")
        yield conn


def test_every_kind_of_insert_wakes_the_workers(db, sql, dsn, listener):
    task = make_task(db, "woken", now=T0)
    make_task(db, "woken_key", idempotent=True, now=T0)
    tasks.trigger(db, "woken")
    assert notifications_until_marker(listener, sql) == ["default"]
    tasks.enqueue_many(db, "woken", [{"n": i} for i in range(20)])
    assert notifications_until_marker(listener, sql) == ["default"]
    tasks.enqueue_many(db, "woken_key", [{"n": i} for i in range(3)])
    assert notifications_until_marker(listener, sql) == ["default"]
    sql.execute("INSERT INTO pgsched.run_request (task) VALUES ('woken')")
    assert notifications_until_marker(listener, sql) == ["default"]
    copy_rows(dsn, [task["id"]] * 2)
    assert notifications_until_marker(listener, sql) == ["default"]
    # an INSERT refused by the check wakes nobody (its NOTIFY is rolled back with it)
    with pytest.raises(pg_errors.ForeignKeyViolation):
        copy_rows(dsn, [-1])
    assert notifications_until_marker(listener, sql) == []


def test_a_key_enqueued_twice_concurrently_makes_one_execution(db, sql, dsn):
    make_task(db, "keyed", now=T0)
    call = "SELECT pgsched_internal.enqueue_v1('keyed', idempotency_key => 'k-1') AS id"
    got: dict = {}
    with psycopg.connect(dsn) as holding:
        first = holding.execute(call).fetchone()[0]

        def go():
            with psycopg.connect(dsn, autocommit=True, application_name="second enqueue") as conn:
                got["id"] = conn.execute(call).fetchone()[0]

        thread = threading.Thread(target=go)
        thread.start()
        wait_for(
            lambda: not thread.is_alive() or waiting_on_a_lock(sql, "second enqueue"),
            what="the second enqueue to wait on a lock (or to end)",
        )
        assert thread.is_alive(), "the second enqueue did not wait for the first's key"
        holding.commit()
        thread.join(10)
    assert got["id"] == first
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution WHERE idempotency_key = 'k-1'"
        ).fetchone()["n"]
        == 1
    )


def test_an_idempotent_batch_enqueued_twice_makes_each_run_once(db, sql):
    task = make_task(db, "idem", idempotent=True, now=T0)
    at = datetime(2031, 1, 1, tzinfo=UTC)
    first = tasks.enqueue_many(db, "idem", [{"n": i} for i in range(10)], run_at=at)
    again = tasks.enqueue_many(db, "idem", [{"n": i} for i in range(10)], run_at=at)
    assert first == again
    assert count(sql, task["id"]) == 10


def test_migrating_0008_to_0009_keeps_executions_and_their_rules(empty_dsn):
    known = migrate.load()
    assert known[8].version == 9
    migrate.migrate(empty_dsn, known[:8])
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        task_id = conn.execute(
            """INSERT INTO pgsched.task (name, handler_kind, command) VALUES ('old', 'shell', 'true')
               RETURNING id"""
        ).fetchone()[0]
        conn.execute(
            """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at)
                        SELECT %s, now(), now() FROM generate_series(1, 5)""",
            [task_id],
        )
    applied = migrate.migrate(empty_dsn)  # 0009 and every later migration, on such data
    assert [m.version for m in applied] == [m.version for m in known[8:]]
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM pgsched.execution WHERE task_id = %s", [task_id]
            ).fetchone()[0]
            == 5
        )
        with pytest.raises(pg_errors.ForeignKeyViolation):
            conn.execute("DELETE FROM pgsched.task WHERE id = %s", [task_id])
        with pytest.raises(pg_errors.ForeignKeyViolation):
            conn.execute(
                "INSERT INTO pgsched.execution (task_id, scheduled_at, run_at) VALUES (-7, now(), now())"
            )
        assert conn.execute("SELECT pgsched_internal.enqueue_v1('old')").fetchone()[0] is not None


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_an_insert_in_a_strict_transaction_cannot_name_a_task_deleted_meanwhile(
    db, sql, dsn, isolation
):
    """The INSERT's transaction took its snapshot while the task existed; a DELETE then
    commits. The INSERT must fail (a foreign key would raise a serialization failure)."""
    task = make_task(db, "strict", now=T0)
    with psycopg.connect(dsn) as inserter:
        inserter.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
        inserter.execute("SELECT count(*) FROM pgsched.task")  # take the snapshot
        sql.execute("DELETE FROM pgsched.task WHERE id = %s", [task["id"]])
        with pytest.raises((pg_errors.ForeignKeyViolation, pg_errors.SerializationFailure)):
            inserter.execute(
                """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at)
                                VALUES (%s, now(), now())""",
                [task["id"]],
            )
    assert count(sql) == 0


def test_the_cli_soft_delete_still_works_for_a_task_with_executions(db, sql, dsn):
    from ..helpers import cli

    task = make_task(db, "retired", now=T0)
    tasks.trigger(db, "retired")
    cli(dsn, "task", "delete", "retired")
    row = sql.execute("SELECT deleted_at FROM pgsched.task WHERE id = %s", [task["id"]]).fetchone()
    assert row["deleted_at"] is not None
    assert count(sql, task["id"]) >= 0


def test_scheduler_fires_and_dag_nodes_wake_the_workers(db, sql, listener):
    from pgsched import dag as dag_module
    from pgsched import scheduler
    from pgsched.stores import dagruns, dags

    from .test_dag_engine import Driver

    spec = TaskSpec(name="cron", command="true", schedule_kind="cron", schedule="*/5 * * * *")
    task = tasks.create(db, spec, now=T0)
    notifications_until_marker(listener, sql)
    assert scheduler.tick(db, 1, datetime(2025, 1, 15, 10, 5, tzinfo=UTC)) == 1
    assert count(sql, task["id"]) == 1
    assert notifications_until_marker(listener, sql) == ["default"]

    dags.apply(
        db,
        dag_module.parse(
            {
                "name": "pair",
                "nodes": [
                    {"id": "a", "command": "true"},
                    {"id": "b", "command": "true", "depends_on": ["a"]},
                ],
            }
        ),
    )
    notifications_until_marker(listener, sql)
    run = dagruns.trigger(db, "pair")
    assert notifications_until_marker(listener, sql) == ["default"]  # node a queued
    drive = Driver(db, sql)
    drive.finish(run, "a")
    assert drive.states(run)["b"] == "queued"
    assert notifications_until_marker(listener, sql) == ["default"]  # node b queued by a's end


def test_renumbering_a_task_races_an_insert_both_ways(db, sql, dsn):
    from .test_execution_task_check import INSERT, race

    first = make_task(db, "renumbered", now=T0)
    outcome = race(
        dsn,
        sql,
        (INSERT, [[first["id"]]]),
        ("UPDATE pgsched.task SET id = id + 1000 WHERE id = %s", [first["id"]]),
    )
    assert "error" in outcome
    assert count(sql, first["id"]) == 1
    second = make_task(db, "renumbered_first", now=T0)
    outcome = race(
        dsn,
        sql,
        ("UPDATE pgsched.task SET id = id + 1000 WHERE id = %s", [second["id"]]),
        (INSERT, [[second["id"]]]),
    )
    assert "error" in outcome
    orphans = sql.execute("""SELECT count(*) AS n FROM pgsched.execution e
                              WHERE NOT EXISTS (SELECT FROM pgsched.task k WHERE k.id = e.task_id)""").fetchone()[
        "n"
    ]
    assert orphans == 0


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_a_key_that_already_succeeded_is_skipped_not_run_again(db, sql):
    from .test_claim import claim, register

    task = make_task(db, "once_only", now=T0)
    first = tasks.trigger(db, "once_only", idempotency_key="done-1")
    worker = register(db)
    (row,) = claim(db, worker, limit=1)
    assert (
        db.exec(
            "execution_finish",
            id=first,
            lease_id=row["lease_id"],
            state="succeeded",
            finished_at=datetime.now(UTC),
            exit_code=0,
            error=None,
            result=None,
        )
        == 1
    )
    again = tasks.trigger(db, "once_only", idempotency_key="done-1")
    assert count(sql, task["id"]) == 0
    states = [
        r["state"]
        for r in sql.execute(
            "SELECT state FROM pgsched.execution_history WHERE task_id = %s ORDER BY finished_at",
            [task["id"]],
        )
    ]
    assert states[0] == "succeeded" and "succeeded" not in states[1:]
    assert again is not None


def test_a_dead_letter_retry_wakes_the_workers(db, sql, listener):
    from .test_claim import claim, register

    task = make_task(db, "dies", now=T0)
    ident = tasks.trigger(db, "dies")
    (row,) = claim(db, register(db), limit=1)
    assert (
        db.exec(
            "execution_finish",
            id=ident,
            lease_id=row["lease_id"],
            state="dead",
            finished_at=datetime.now(UTC),
            exit_code=1,
            error="boom",
            result=None,
        )
        == 1
    )
    notifications_until_marker(listener, sql)
    sql.execute("SELECT pgsched.dlq_retry_v1(%s, 'default')", [ident])
    assert count(sql, task["id"]) == 1
    assert notifications_until_marker(listener, sql) == ["default"]


def many_tasks(sql, n):
    return [
        r["id"]
        for r in sql.execute(
            """INSERT INTO pgsched.task (name, handler_kind, command)
           SELECT 'bulk_' || i, 'shell', 'true' FROM generate_series(1, %s) i RETURNING id""",
            [n],
        )
    ]


@pytest.mark.parametrize("where", [0, 150, 299])
def test_one_missing_task_among_hundreds_fails_the_whole_insert(sql, where):
    ids = many_tasks(sql, 300)
    named = ids[:where] + [-42] + ids[where:]
    with pytest.raises(pg_errors.ForeignKeyViolation, match="task_id -42 is not a task"):
        sql.execute(
            """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at)
                       SELECT t, now(), now() FROM unnest(%s::bigint[]) t""",
            [named],
        )
    assert count(sql) == 0


def test_an_open_insert_holds_every_task_it_names(sql, dsn):
    """Every distinct task of a successful INSERT is locked FOR KEY SHARE until commit,
    whatever plan the check took: a DELETE of any of them cannot take its lock."""
    ids = many_tasks(sql, 300)
    with psycopg.connect(dsn) as inserter, psycopg.connect(dsn) as deleter:
        inserter.execute(
            """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at)
                            SELECT t, now(), now() FROM unnest(%s::bigint[]) t""",
            [ids + ids[::-1]],
        )
        free = []
        for i in ids:
            try:
                deleter.execute("SELECT FROM pgsched.task WHERE id = %s FOR UPDATE NOWAIT", [i])
                free.append(i)
            except pg_errors.LockNotAvailable:
                pass
            deleter.rollback()
        assert free == []
        inserter.rollback()


def test_truncating_tasks_and_executions_together_works_and_tasks_alone_does_not(db, sql):
    """As with the foreign key: one TRUNCATE of both tables leaves no execution naming a
    task, so it is allowed; a TRUNCATE of task alone would leave executions behind."""
    task = make_task(db, "wiped", now=T0)
    tasks.trigger(db, "wiped")
    with pytest.raises(pg_errors.ForeignKeyViolation, match="still named by executions"):
        sql.execute("TRUNCATE pgsched.task CASCADE")
    assert count(sql, task["id"]) == 1
    sql.execute("TRUNCATE pgsched.task, pgsched.execution CASCADE")
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 0
    assert count(sql) == 0


STRICT = ["REPEATABLE READ", "SERIALIZABLE"]


@pytest.mark.parametrize("isolation", STRICT)
def test_a_strict_delete_waiting_for_an_open_insert_leaves_no_orphan(db, sql, dsn, isolation):
    """A DELETE of a task in REPEATABLE READ / SERIALIZABLE takes its snapshot while an
    INSERT naming the task is still open, waits for the INSERT's FOR KEY SHARE lock, and
    the INSERT commits: its snapshot cannot see that execution, so the DELETE is refused
    outright (a foreign key raised a serialization failure here). No execution may be
    left naming no task: a worker would claim it and never run it."""
    task = make_task(db, "orphaned", now=T0)
    outcome: dict = {}
    with psycopg.connect(dsn) as holding:
        holding.execute(
            """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at)
                           VALUES (%s, now(), now())""",
            [task["id"]],
        )

        def go():
            with psycopg.connect(dsn, application_name="strict delete") as conn:
                try:
                    conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                    conn.execute("DELETE FROM pgsched.task WHERE id = %s", [task["id"]])
                    conn.commit()
                    outcome["done"] = True
                except pg_errors.FeatureNotSupported as exc:
                    outcome["error"] = exc

        thread = threading.Thread(target=go)
        thread.start()
        wait_for(
            lambda: not thread.is_alive() or waiting_on_a_lock(sql, "strict delete"),
            what="the DELETE to wait on a lock (or to end)",
        )
        assert thread.is_alive(), "the DELETE did not wait for the open INSERT"
        holding.commit()
        thread.join(10)
    orphans = sql.execute("""SELECT count(*) AS n FROM pgsched.execution e
                              WHERE NOT EXISTS (SELECT FROM pgsched.task k WHERE k.id = e.task_id)""").fetchone()[
        "n"
    ]
    assert "error" in outcome and "READ COMMITTED" in str(outcome["error"])
    assert orphans == 0 and count(sql, task["id"]) == 1


@pytest.mark.parametrize("isolation", STRICT)
def test_strict_transactions_may_not_delete_renumber_or_truncate_tasks(db, sql, dsn, isolation):
    """Outside READ COMMITTED every change of the task side is refused, even with no
    execution in sight; a DELETE that matches no row is not."""
    task = make_task(db, "strict", now=T0)
    for statement in (
        f"DELETE FROM pgsched.task WHERE id = {task['id']}",
        f"UPDATE pgsched.task SET id = id + 1000 WHERE id = {task['id']}",
        "TRUNCATE pgsched.task CASCADE",
    ):
        with psycopg.connect(dsn) as conn:
            conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
            with pytest.raises(pg_errors.FeatureNotSupported, match=f"not {isolation.lower()}"):
                conn.execute(statement)
    with psycopg.connect(dsn) as conn:
        conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
        conn.execute("DELETE FROM pgsched.task WHERE id = -1")
        conn.commit()
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.task WHERE id = %s", [task["id"]]
        ).fetchone()["n"]
        == 1
    )
    sql.execute(
        "DELETE FROM pgsched.task WHERE id = %s", [task["id"]]
    )  # READ COMMITTED, unnamed: fine
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.task WHERE id = %s", [task["id"]]
        ).fetchone()["n"]
        == 0
    )
