"""The public SQL API of the migration (enqueue_v1, trigger_v1, pause_v1, resume_v1 and the
run_request table for a plain INSERT), called as another application would: plain SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg.rows import dict_row

from pgsched.errors import NotFound, ValidationError
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..factories import make_task
from ..helpers import notifications_until_marker

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)


def execution(sql, execution_id):
    return sql.execute("SELECT * FROM pgsched.execution WHERE id = %s", [execution_id]).fetchone()


def live_count(sql, task_id=None):
    if task_id is None:
        return sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"]
    return sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s", [task_id]
    ).fetchone()["n"]


def move_to_history(sql, execution_id, state):
    """Finish an execution the way the worker does: one statement from the hot table to
    history."""
    sql.execute(
        """
        WITH done AS (DELETE FROM pgsched.execution WHERE id = %(id)s RETURNING *)
        INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
            trigger, priority, queue, params, idempotency_key, attempt, max_attempts, worker_id,
            leader_epoch, created_at, started_at, finished_at)
        SELECT id, tenant, task_id, scheduled_at, run_at, %(state)s, trigger, priority, queue,
               params, idempotency_key, 1, max_attempts, worker_id, leader_epoch, created_at,
               now(), now()
          FROM done""",
        {"id": execution_id, "state": state},
    )


# --- enqueue_v1 ------------------------------------------------------------------------


def test_enqueue_returns_the_id_of_a_new_pending_execution(db, sql):
    task = make_task(
        db,
        "report",
        params={"a": 1, "b": "task"},
        priority=3,
        queue="reports",
        max_attempts=4,
        now=T0,
    )
    before = sql.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
    execution_id = sql.execute(
        'SELECT pgsched.enqueue_v1(\'report\', \'{"b": "call", "c": [1]}\') AS id'
    ).fetchone()["id"]
    after = sql.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
    row = execution(sql, execution_id)
    assert row["task_id"] == task["id"]
    assert row["state"] == "pending"
    assert row["trigger"] == "api"
    assert row["params"] == {"a": 1, "b": "call", "c": [1]}  # the call's params over the task's
    assert row["priority"] == 3  # the task's
    assert row["queue"] == "reports"
    assert row["max_attempts"] == 4
    assert row["attempt"] == 0 and row["worker_id"] is None and row["idempotency_key"] is None
    assert before <= row["run_at"] <= after
    assert row["scheduled_at"] == row["run_at"]


def test_enqueue_with_explicit_priority_and_run_at(db, sql):
    make_task(db, "report", now=T0)
    later = datetime(2030, 6, 1, 12, 30, tzinfo=UTC)
    execution_id = sql.execute(
        "SELECT pgsched.enqueue_v1('report', run_at => %s, priority => 1) AS id", [later]
    ).fetchone()["id"]
    row = execution(sql, execution_id)
    assert (row["run_at"], row["scheduled_at"], row["priority"]) == (later, later, 1)
    assert row["params"] == {}


def test_two_enqueues_of_one_task_for_the_same_instant_are_two_executions(db, sql):
    task = make_task(db, "report", now=T0)
    at = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
    first = sql.execute(
        "SELECT pgsched.enqueue_v1('report', '{\"customer\": 1}', %s) AS id", [at]
    ).fetchone()["id"]
    second = sql.execute(
        "SELECT pgsched.enqueue_v1('report', '{\"customer\": 2}', %s) AS id", [at]
    ).fetchone()["id"]
    assert first != second
    assert live_count(sql, task["id"]) == 2


def test_enqueue_of_an_unknown_task_names_it(db, sql):
    make_task(db, "report", now=T0)
    with pytest.raises(pg_errors.NoDataFound, match="no task named 'nope' in tenant 'default'"):
        sql.execute("SELECT pgsched.enqueue_v1('nope')")
    with pytest.raises(pg_errors.NoDataFound, match="'report' in tenant 'other'"):
        sql.execute("SELECT pgsched.enqueue_v1('report', tenant => 'other')")
    assert live_count(sql) == 0


def test_enqueue_of_a_deleted_task_is_refused(db, sql):
    make_task(db, "report", now=T0)
    tasks.delete(db, "report")
    with pytest.raises(pg_errors.NoDataFound, match="'report'"):
        sql.execute("SELECT pgsched.enqueue_v1('report')")


@pytest.mark.parametrize("priority", [0, 11, -1])
def test_enqueue_priority_out_of_range_is_refused(db, sql, priority):
    make_task(db, "report", now=T0)
    with pytest.raises(
        pg_errors.CheckViolation, match=f"priority: {priority} is out of range 1-10"
    ):
        sql.execute("SELECT pgsched.enqueue_v1('report', priority => %s)", [priority])
    assert live_count(sql) == 0


@pytest.mark.parametrize("params", ["[1, 2]", '"text"', "3", "null"])
def test_enqueue_params_must_be_an_object(db, sql, params):
    make_task(db, "report", now=T0)
    with pytest.raises(pg_errors.InvalidParameterValue, match="is not a JSON object"):
        sql.execute("SELECT pgsched.enqueue_v1('report', %s::jsonb)", [params])
    assert live_count(sql) == 0


def test_idempotency_key_returns_the_live_execution(db, sql):
    task = make_task(db, "report", now=T0)
    first = sql.execute(
        "SELECT pgsched.enqueue_v1('report', idempotency_key => 'k-1') AS id"
    ).fetchone()["id"]
    again = sql.execute(
        "SELECT pgsched.enqueue_v1('report', '{\"x\": 1}', idempotency_key => 'k-1') AS id"
    ).fetchone()["id"]
    assert again == first
    assert live_count(sql, task["id"]) == 1
    assert execution(sql, first)["idempotency_key"] == "k-1"
    other = sql.execute(
        "SELECT pgsched.enqueue_v1('report', idempotency_key => 'k-2') AS id"
    ).fetchone()["id"]
    assert other != first
    assert live_count(sql, task["id"]) == 2


def test_a_key_that_already_succeeded_is_recorded_as_skipped_not_run(db, sql):
    task = make_task(db, "report", now=T0)
    first = sql.execute(
        "SELECT pgsched.enqueue_v1('report', idempotency_key => 'k-1') AS id"
    ).fetchone()["id"]
    move_to_history(sql, first, "succeeded")
    assert live_count(sql) == 0
    again = sql.execute(
        "SELECT pgsched.enqueue_v1('report', idempotency_key => 'k-1') AS id"
    ).fetchone()["id"]
    assert again != first
    assert live_count(sql) == 0  # nothing to run
    rows = sql.execute(
        "SELECT id, state, attempt, idempotency_key, error FROM pgsched.execution_all "
        "WHERE task_id = %s ORDER BY id",
        [task["id"]],
    ).fetchall()
    assert rows == [
        {"id": first, "state": "succeeded", "attempt": 1, "idempotency_key": "k-1", "error": None},
        {
            "id": again,
            "state": "skipped",
            "attempt": 0,
            "idempotency_key": "k-1",
            "error": f"idempotency key 'k-1' already succeeded in execution {first}",
        },
    ]


def test_an_idempotent_task_derives_its_key_from_params_and_time(db, sql):
    task = make_task(db, "report", idempotent=True, now=T0)
    at = "2030-01-01 00:00:00+00"
    one = sql.execute(
        "SELECT pgsched.enqueue_v1('report', '{\"n\": 1}', %s) AS id", [at]
    ).fetchone()["id"]
    same = sql.execute(
        "SELECT pgsched.enqueue_v1('report', '{\"n\": 1}', %s) AS id", [at]
    ).fetchone()["id"]
    other = sql.execute(
        "SELECT pgsched.enqueue_v1('report', '{\"n\": 2}', %s) AS id", [at]
    ).fetchone()["id"]
    assert same == one and other != one
    keys = [
        r["idempotency_key"]
        for r in sql.execute(
            "SELECT idempotency_key FROM pgsched.execution WHERE task_id = %s ORDER BY id",
            [task["id"]],
        )
    ]
    assert (
        len(keys) == 2
        and all(k.startswith(f"auto:{task['id']}:") for k in keys)
        and keys[0] != keys[1]
    )


def test_idempotency_key_of_a_failed_execution_allows_a_new_one(db, sql):
    make_task(db, "report", now=T0)
    first = sql.execute(
        "SELECT pgsched.enqueue_v1('report', idempotency_key => 'k-1') AS id"
    ).fetchone()["id"]
    move_to_history(sql, first, "failed")
    again = sql.execute(
        "SELECT pgsched.enqueue_v1('report', idempotency_key => 'k-1') AS id"
    ).fetchone()["id"]
    assert again != first
    assert execution(sql, again)["idempotency_key"] == "k-1"


def test_idempotency_keys_are_per_tenant(db, sql):
    make_task(db, "report", now=T0)
    make_task(db, "report", tenant="acme", now=T0)
    mine = sql.execute(
        "SELECT pgsched.enqueue_v1('report', idempotency_key => 'k') AS id"
    ).fetchone()["id"]
    theirs = sql.execute(
        "SELECT pgsched.enqueue_v1('report', idempotency_key => 'k', tenant => 'acme') AS id"
    ).fetchone()["id"]
    assert mine != theirs
    assert execution(sql, theirs)["tenant"] == "acme"


# --- trigger_v1 --------------------------------------------------------------------------


def test_trigger_runs_now_with_trigger_manual_also_when_paused(db, sql):
    make_task(db, "report", params={"a": 1}, schedule_kind="cron", schedule="0 9 * * *", now=T0)
    sql.execute("SELECT pgsched.pause_v1('report')")
    before = sql.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
    execution_id = sql.execute(
        "SELECT pgsched.trigger_v1('report', '{\"b\": 2}') AS id"
    ).fetchone()["id"]
    row = execution(sql, execution_id)
    assert row["trigger"] == "manual"
    assert row["params"] == {"a": 1, "b": 2}
    assert row["state"] == "pending"
    assert row["run_at"] >= before


def test_trigger_twice_in_one_transaction_makes_two_executions(db, dsn):
    task = make_task(db, "report", now=T0)
    with psycopg.connect(dsn, row_factory=dict_row) as conn:  # one transaction
        ids = [
            conn.execute("SELECT pgsched.trigger_v1('report') AS id").fetchone()["id"]
            for _ in range(2)
        ]
        conn.commit()
        n = conn.execute(
            "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s", [task["id"]]
        ).fetchone()["n"]
    assert ids[0] != ids[1]
    assert n == 2


def test_trigger_of_an_unknown_task_names_it(db, sql):
    with pytest.raises(pg_errors.NoDataFound, match="'ghost'"):
        sql.execute("SELECT pgsched.trigger_v1('ghost')")


# --- pause_v1 / resume_v1 ----------------------------------------------------------------


def test_pause_and_resume(db, sql):
    task = make_task(db, "report", schedule_kind="cron", schedule="*/5 * * * *", now=T0)
    assert task["next_fire_at"] == T0 + timedelta(minutes=5)

    assert sql.execute("SELECT pgsched.pause_v1('report') AS ok").fetchone()["ok"] is True
    row = tasks.get(db, "report")
    assert row["enabled"] is False

    assert sql.execute("SELECT pgsched.resume_v1('report') AS ok").fetchone()["ok"] is True
    row = tasks.get(db, "report")
    assert row["enabled"] is True
    assert row["next_fire_at"] is None  # the scheduler plans it from now


def test_resume_of_a_running_task_keeps_its_plan(db, sql):
    make_task(db, "report", schedule_kind="cron", schedule="*/5 * * * *", now=T0)
    sql.execute("SELECT pgsched.resume_v1('report')")
    assert tasks.get(db, "report")["next_fire_at"] == T0 + timedelta(minutes=5)


def test_pause_and_resume_of_an_unknown_task_name_it(db, sql):
    make_task(db, "report", now=T0)
    with pytest.raises(pg_errors.NoDataFound, match="no task named 'ghost'"):
        sql.execute("SELECT pgsched.pause_v1('ghost')")
    with pytest.raises(pg_errors.NoDataFound, match="no task named 'ghost'"):
        sql.execute("SELECT pgsched.resume_v1('ghost')")
    with pytest.raises(pg_errors.NoDataFound, match="in tenant 'acme'"):
        sql.execute("SELECT pgsched.pause_v1('report', 'acme')")
    assert tasks.get(db, "report")["enabled"] is True


# --- run_request: a plain INSERT -----------------------------------------------------------


def test_plain_insert_into_run_request_creates_an_execution(db, sql):
    task = make_task(db, "report", params={"a": 1}, priority=2, now=T0)
    execution_id = sql.execute(
        "INSERT INTO pgsched.run_request (task) VALUES ('report') RETURNING execution_id"
    ).fetchone()["execution_id"]
    row = execution(sql, execution_id)
    assert row["task_id"] == task["id"]
    assert row["trigger"] == "insert"
    assert row["params"] == {"a": 1}
    assert row["priority"] == 2
    assert row["state"] == "pending"


def test_insert_into_run_request_with_params_and_run_at(db, sql):
    make_task(db, "report", params={"a": 1}, now=T0)
    later = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    execution_id = sql.execute(
        "INSERT INTO pgsched.run_request (task, params, run_at) "
        "VALUES ('report', '{\"n\": 1}', %s) RETURNING execution_id",
        [later],
    ).fetchone()["execution_id"]
    row = execution(sql, execution_id)
    assert row["params"] == {"a": 1, "n": 1}
    assert row["run_at"] == later
    assert row["trigger"] == "insert"


def test_insert_into_run_request_with_priority_and_key(db, sql):
    make_task(db, "report", now=T0)
    ids = [
        sql.execute(
            "INSERT INTO pgsched.run_request (task, priority, idempotency_key) "
            "VALUES ('report', 9, 'once-only') RETURNING execution_id"
        ).fetchone()["execution_id"]
        for _ in range(2)
    ]
    assert ids[0] == ids[1]
    assert execution(sql, ids[0])["priority"] == 9
    assert live_count(sql) == 1


def test_insert_into_run_request_without_a_task_name_is_refused(db, sql):
    make_task(db, "report", now=T0)
    with pytest.raises(pg_errors.NotNullViolation, match="needs a task name"):
        sql.execute("INSERT INTO pgsched.run_request (params) VALUES ('{}')")
    with pytest.raises(pg_errors.NoDataFound, match="'nope'"):
        sql.execute("INSERT INTO pgsched.run_request (task) VALUES ('nope')")
    assert live_count(sql) == 0


def test_a_failing_row_rolls_back_the_whole_insert(db, sql):
    make_task(db, "report", now=T0)
    with pytest.raises(pg_errors.NoDataFound):
        sql.execute("INSERT INTO pgsched.run_request (task) VALUES ('report'), ('nope')")
    assert live_count(sql) == 0


def test_a_multi_row_insert_sends_one_notification(db, sql, dsn):
    task = make_task(db, "report", now=T0)
    make_task(db, name="other", now=T0)
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_execution")
        rows = sql.execute(
            "INSERT INTO pgsched.run_request (task, params) "
            "SELECT CASE WHEN g % 2 = 0 THEN 'report' ELSE 'other' END, jsonb_build_object('g', g) "
            "  FROM generate_series(1, 6) g RETURNING execution_id"
        ).fetchall()
        assert len({r["execution_id"] for r in rows}) == 6
        assert notifications_until_marker(listener, sql) == ["default"]
        assert live_count(sql, task["id"]) == 3

        # Each statement notifies: two inserts, two notifications.
        sql.execute("INSERT INTO pgsched.run_request (task) VALUES ('report')")
        sql.execute("INSERT INTO pgsched.run_request (task) VALUES ('report')")
        assert notifications_until_marker(listener, sql) == ["default", "default"]


@pytest.mark.parametrize(
    "run_at", ["-infinity", "infinity", "0001-01-01 00:00:00+00 BC", "9999-01-01 00:00:00+00"]
)
def test_enqueue_refuses_instants_that_would_jam_the_queue(db, sql, run_at):
    make_task(db, "jam", now=T0)
    with pytest.raises(
        psycopg.errors.InvalidParameterValue, match=r"run_at: .* is outside 1970 to 9000"
    ):
        sql.execute("SELECT pgsched.enqueue_v1('jam', run_at => %s::timestamptz)", (run_at,))
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


@pytest.mark.parametrize("trigger", ["schedule", "bogus", None])
def test_enqueue_refuses_the_schedule_trigger_and_unknown_ones(db, sql, trigger):
    make_task(db, "sneaky", now=T0)
    with pytest.raises(
        psycopg.errors.InvalidParameterValue, match=r"trigger: .* must be api, manual or insert"
    ):
        sql.execute("SELECT pgsched.enqueue_v1('sneaky', trigger => %s)", (trigger,))
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


def test_enqueue_many_inserts_every_run_in_one_statement_in_order(db, sql):
    tasks.create(db, TaskSpec(name="batch", command="true", params={"base": 1}, priority=7))
    ids = tasks.enqueue_many(db, "batch", [{"n": i} for i in range(500)], priority=2)
    assert len(ids) == 500 and ids == sorted(ids)
    rows = sql.execute(
        "SELECT id, params, priority, trigger, run_at = scheduled_at AS same FROM pgsched.execution "
        "ORDER BY id"
    ).fetchall()
    assert [r["id"] for r in rows] == ids
    assert [r["params"] for r in rows] == [{"base": 1, "n": i} for i in range(500)]
    assert {(r["priority"], r["trigger"], r["same"]) for r in rows} == {(2, "api", True)}
    assert (
        sql.execute("SELECT count(DISTINCT created_at) AS n FROM pgsched.execution").fetchone()["n"]
        == 1
    )


def test_enqueue_many_refuses_bad_input_and_writes_nothing(db, sql):
    tasks.create(db, TaskSpec(name="batch", command="true"))
    with pytest.raises(ValidationError, match=r"params\[1\]: \[1\] must be a JSON object"):
        tasks.enqueue_many(db, "batch", [{}, [1]])  # type: ignore[list-item]
    with pytest.raises(
        pg_errors.InvalidParameterValue, match=r"params\[1\]: \[1\] is not a JSON object"
    ):
        sql.execute("SELECT pgsched.enqueue_many_v1('batch', ARRAY['{}', '[1]']::jsonb[])")
    with pytest.raises(
        pg_errors.InvalidParameterValue, match=r"params\[1\]: \[1\] is not a JSON object"
    ):
        sql.execute("SELECT pgsched.enqueue_many_v2('batch', '[{}, [1]]')")
    with pytest.raises(pg_errors.InvalidParameterValue, match=r"params: \{\} is not a JSON array"):
        sql.execute("SELECT pgsched.enqueue_many_v2('batch', '{}')")
    with pytest.raises(ValidationError, match=r"params\[0\]: .* is not valid JSON for PostgreSQL"):
        tasks.enqueue_many(db, "batch", [{"x": float("nan")}, {}])
    with pytest.raises(ValidationError, match=r"params\[2\]: .* NUL character"):
        tasks.enqueue_many(db, "batch", [{}, {"ok": "\\u0000 as text is fine"}, {"x": "a\x00b"}])
    with pytest.raises(NotFound, match="no task named 'nope'"):
        tasks.enqueue_many(db, "nope", [{}])
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


def test_enqueue_many_v2_takes_one_json_array_and_keeps_its_order(db, sql):
    tasks.create(db, TaskSpec(name="batch", command="true", params={"base": 1}))
    ids = [
        r["e"]
        for r in sql.execute(
            "SELECT e FROM pgsched.enqueue_many_v2('batch', %s::jsonb, priority => 3) AS e",
            ('[{"n": 2}, {"n": 1}, {"n": 3}]',),
        ).fetchall()
    ]
    rows = sql.execute("SELECT id, params, priority FROM pgsched.execution ORDER BY id").fetchall()
    assert [r["id"] for r in rows] == ids and len(ids) == 3
    assert [r["params"] for r in rows] == [
        {"base": 1, "n": 2},
        {"base": 1, "n": 1},
        {"base": 1, "n": 3},
    ]
    assert {r["priority"] for r in rows} == {3}


def test_enqueue_many_of_an_idempotent_task_skips_keys_that_succeeded(db, sql):
    tasks.create(db, TaskSpec(name="idem", command="true", idempotent=True))
    at = datetime(2030, 1, 1, tzinfo=UTC)
    first = tasks.enqueue_many(db, "idem", [{"n": 1}, {"n": 2}], run_at=at)
    again = tasks.enqueue_many(db, "idem", [{"n": 1}, {"n": 3}], run_at=at)
    assert again[0] == first[0] and again[1] not in first  # the live key is found, a new one added


def test_an_enqueue_and_a_delete_of_its_task_wait_for_each_other(db, dsn, sql):
    """An enqueue not yet committed when its task is deleted: the delete waits for it and
    drops what it made. A delete not yet committed when a run is enqueued: the enqueue
    waits and finds no task. Either way no pending execution of a deleted task is left
    for a worker (found by a break-it round: the enqueue used to commit after the drop)."""
    import threading

    make_task(db, "racy", now=T0)
    with psycopg.connect(dsn) as enqueuer:
        enqueuer.execute("SELECT pgsched.enqueue_v1('racy')")  # open transaction
        deleting = threading.Thread(target=tasks.delete, args=(db, "racy"))
        deleting.start()
        deleting.join(0.5)
        assert deleting.is_alive(), "the delete must wait for the enqueue's transaction"
        enqueuer.commit()
        deleting.join(10)
        assert not deleting.is_alive()
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution e JOIN pgsched.task t ON t.id = e.task_id "
            "WHERE t.name = 'racy'"
        ).fetchone()["n"]
        == 0
    )

    make_task(db, "racy2", now=T0)
    outcome: dict[str, BaseException] = {}

    def enqueue() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as c:
                c.execute("SELECT pgsched.enqueue_many_v2('racy2', '[{}, {}]')")
        except BaseException as exc:
            outcome["error"] = exc

    with db.transaction() as deleting_tx:
        assert deleting_tx.one("task_soft_delete", name="racy2", tenant="default") is not None
        enqueuing = threading.Thread(target=enqueue)
        enqueuing.start()
        enqueuing.join(0.5)
        assert enqueuing.is_alive(), "the enqueue must wait for the delete's transaction"
    enqueuing.join(10)
    assert isinstance(outcome.get("error"), pg_errors.NoDataFound)
    assert live_count(sql) == 0
