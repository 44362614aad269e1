"""Unique windows (issue 18, item 6; migration 0022) on a real database: "at most one
pending execution of this task (or key)" and "at most one enqueue per period", on every
way in (enqueue_v1/v2, trigger_v1, enqueue_many_v1/v2, the run_request INSERT, the task
store and ``pgsched task trigger``, the scheduler's fires), what a second enqueue returns
(the existing execution, deduplicated, with its reason), and that concurrent enqueuers on
their own connections, a tenant's own login among them, leave exactly one."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.rows import dict_row

from pgsched import scheduler
from pgsched.cli import main
from pgsched.errors import ValidationError
from pgsched.stores import tasks

from ..factories import make_task
from .test_claim import claim, finish, register

pytestmark = pytest.mark.rolled_back

ENQUEUE_V2 = (
    "SELECT execution_id, deduplicated, dedup_reason, succeeded_execution_id "
    "FROM pgsched.enqueue_v2(%s, %s::jsonb, idempotency_key => %s, tenant => %s)"
)


def enqueue_v2(sql, task="job", params=None, key=None, tenant=None) -> dict:
    args = [task, None if params is None else json.dumps(params), key, tenant]
    return sql.execute(ENQUEUE_V2, args).fetchone()


def pending(sql, task_id: int) -> list[int]:
    rows = sql.execute(
        "SELECT id FROM pgsched.execution WHERE task_id = %s AND state = 'pending' ORDER BY id",
        [task_id],
    ).fetchall()
    return [r["id"] for r in rows]


def made(ident: int) -> dict:
    return {
        "execution_id": ident,
        "deduplicated": False,
        "dedup_reason": None,
        "succeeded_execution_id": None,
    }


def held(ident: int, reason: str) -> dict:
    return {
        "execution_id": ident,
        "deduplicated": True,
        "dedup_reason": reason,
        "succeeded_execution_id": None,
    }


# enqueues run at clock_timestamp(), and a rolled-back test's now() is its start: claim
# at an instant past them
LATER = datetime(2100, 1, 1, tzinfo=UTC)


def start(db, execution_id: int) -> int:
    """Claim the execution for a worker (moving it to running); its lease."""
    claimed = claim(db, register(db, f"w{execution_id}"), limit=100, now=LATER)
    (row,) = [r for r in claimed if r["id"] == execution_id]
    return row["lease_id"]


def test_a_second_enqueue_while_one_is_pending_returns_the_pending_one(db, sql):
    task = make_task(db, unique_policy="pending")
    first = enqueue_v2(sql)["execution_id"]
    assert enqueue_v2(sql, params={"other": 1}) == held(first, "unique_pending")
    assert pending(sql, task["id"]) == [first]

    start(db, first)  # running is not pending: the next enqueue makes one
    second = enqueue_v2(sql)
    assert second["deduplicated"] is False and second["execution_id"] != first
    assert enqueue_v2(sql) == held(second["execution_id"], "unique_pending")


def test_every_sql_path_returns_the_pending_execution(db, sql):
    task = make_task(db, unique_policy="pending")
    first = enqueue_v2(sql)["execution_id"]
    q = "SELECT pgsched.enqueue_v1('job') AS id"
    assert sql.execute(q).fetchone()["id"] == first
    q = "SELECT pgsched.trigger_v1('job') AS id"
    assert sql.execute(q).fetchone()["id"] == first
    q = "SELECT id FROM pgsched.enqueue_many_v1('job', ARRAY['{}', '{\"a\": 1}']::jsonb[]) AS id"
    assert [r["id"] for r in sql.execute(q)] == [first, first]
    q = "SELECT id FROM pgsched.enqueue_many_v2('job', '[{}, {}]'::jsonb) AS id"
    assert [r["id"] for r in sql.execute(q)] == [first, first]
    answer = sql.execute(
        "INSERT INTO pgsched.run_request (task) VALUES ('job') "
        "RETURNING execution_id, deduplicated, dedup_reason, succeeded_execution_id"
    ).fetchone()
    assert answer == held(first, "unique_pending")
    done = tasks.enqueue(db, "job")
    assert (done.execution_id, done.deduplicated, done.dedup_reason) == (
        first,
        True,
        "unique_pending",
    )
    assert pending(sql, task["id"]) == [first]


def test_an_idempotency_key_on_a_unique_task_meets_the_window_first(db, sql):
    make_task(db, unique_policy="pending")
    first = enqueue_v2(sql, key="order-7")["execution_id"]
    assert enqueue_v2(sql, key="order-8") == held(first, "unique_pending")
    assert enqueue_v2(sql, key="order-7") == held(first, "unique_pending")


def test_a_dead_letter_retry_counts_as_pending(db, sql):
    task = make_task(db, unique_policy="pending")
    dead = enqueue_v2(sql)["execution_id"]
    sql.execute(
        "SELECT pgsched_internal.finish_v1(e, 'dead', 'boom') FROM pgsched.execution e "
        "WHERE e.id = %s",
        [dead],
    )
    retried = sql.execute("SELECT pgsched.dlq_retry_v1(%s) AS id", [dead]).fetchone()["id"]
    assert pending(sql, task["id"]) == [retried]
    assert enqueue_v2(sql) == held(retried, "unique_pending")


def test_a_scheduled_fire_held_by_the_window_is_recorded_skipped(db, sql):
    t0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)
    task = make_task(
        db, schedule_kind="cron", schedule="* * * * *", now=t0, unique_policy="pending"
    )
    first = enqueue_v2(sql)["execution_id"]  # a manual run waits
    scheduler.tick(db, 7, t0.replace(minute=1))
    assert pending(sql, task["id"]) == [first]
    (why,) = (
        sql.execute(
            "SELECT error FROM pgsched.execution_history WHERE task_id = %s AND state = 'skipped'",
            [task["id"]],
        )
        .fetchone()
        .values()
    )
    assert why == f"unique window: execution {first} of this task is pending"


def test_a_unique_period_returns_the_last_execution_made_within_it(db, sql):
    task = make_task(db, unique_period_seconds=600)
    first = enqueue_v2(sql)["execution_id"]
    assert finish(db, first, start(db, first)) == 1  # it ran and ended: the period still holds
    assert enqueue_v2(sql) == held(first, "unique_period")
    assert pending(sql, task["id"]) == []

    # ten minutes later (the window is kept by the database's clock at each enqueue)
    sql.execute(
        "UPDATE pgsched.unique_period SET enqueued_at = enqueued_at - interval '601 seconds'"
    )
    second = enqueue_v2(sql)["execution_id"]
    assert second != first and pending(sql, task["id"]) == [second]
    assert enqueue_v2(sql) == held(second, "unique_period")


def test_a_key_scope_is_shared_by_the_tasks_that_render_the_key(db, sql):
    for name in ("import", "reimport"):
        make_task(db, name)
        sql.execute(
            "UPDATE pgsched.task SET concurrency_key = 'customer:{customer}' WHERE name = %s",
            [name],
        )
        tasks.update(db, name, {"unique_policy": "pending", "unique_scope": "key"})
    first = enqueue_v2(sql, "import", {"customer": 42})["execution_id"]
    assert enqueue_v2(sql, "reimport", {"customer": 42}) == held(first, "unique_pending")
    other = enqueue_v2(sql, "reimport", {"customer": 7})
    assert other["deduplicated"] is False
    key = sql.execute(
        "SELECT concurrency_key FROM pgsched.execution WHERE id = %s", [first]
    ).fetchone()
    assert key == {"concurrency_key": "customer:42"}


def test_a_key_scope_needs_a_concurrency_key(db):
    make_task(db)
    with pytest.raises(ValidationError) as caught:
        tasks.update(db, "job", {"unique_scope": "key"})
    assert str(caught.value) == (
        "unique_scope: 'key' needs the task's concurrency_key (it has none)"
    )
    with pytest.raises(ValidationError, match=r"^unique_scope: 'key' needs"):
        make_task(db, "other", unique_scope="key")


def test_a_window_refuses_to_decide_under_a_snapshot_isolation(dsn):
    from pgsched.db import Database

    db = Database.connect(dsn, max_size=2)
    try:
        make_task(db, unique_policy="pending")
    finally:
        db.close()
    with psycopg.connect(dsn, row_factory=dict_row) as c:
        c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        with pytest.raises(psycopg.errors.InvalidTransactionState, match="READ COMMITTED only"):
            enqueue_v2(c)


def test_the_cli_says_the_trigger_was_deduplicated(dsn):
    from pgsched.db import Database

    db = Database.connect(dsn, max_size=2)
    try:
        make_task(db, unique_policy="pending")
        first = tasks.enqueue(db, "job").execution_id
    finally:
        db.close()
    out = CliRunner().invoke(main, ["--dsn", dsn, "task", "trigger", "job"])
    assert out.exit_code == 0, out.output
    assert out.output.strip() == (
        f"deduplicated: execution {first} of job is already queued (unique window: one "
        "pending); nothing new queued"
    )
    out = CliRunner().invoke(main, ["--dsn", dsn, "task", "trigger", "job", "--json"])
    assert json.loads(out.output) == held(first, "unique_pending")


def _race(dsns: list[str], statement: str, args: list) -> list[dict]:
    """Run ``statement`` on one connection per DSN at once (a barrier lines them up), each
    in a transaction that does 50 ms of other work after it before committing; the
    answers."""
    barrier = threading.Barrier(len(dsns))
    answers: list[dict] = []
    errors: list[BaseException] = []

    def one(dsn: str) -> None:
        try:
            with psycopg.connect(dsn, row_factory=dict_row) as c:
                barrier.wait(timeout=30)
                answers.append(c.execute(statement, args).fetchone())
                c.execute("SELECT pg_sleep(0.05)")
                c.commit()
        except BaseException as exc:  # raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(d,)) for d in dsns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return answers


@pytest.mark.parametrize("window", ["pending", "period"])
def test_concurrent_enqueuers_leave_exactly_one_pending_execution(dsn, window):
    from pgsched.db import Database

    db = Database.connect(dsn, max_size=2)
    try:
        fields = (
            {"unique_policy": "pending"} if window == "pending" else {"unique_period_seconds": 60}
        )
        task = make_task(db, **fields)
    finally:
        db.close()
    answers = _race([dsn] * 8, ENQUEUE_V2, ["job", None, None, None])
    with psycopg.connect(dsn, row_factory=dict_row) as c:
        ids = pending(c, task["id"])
    assert len(ids) == 1
    assert sorted(a["deduplicated"] for a in answers) == [False] + [True] * 7
    assert {a["execution_id"] for a in answers} == set(ids)


def test_concurrent_enqueuers_of_two_tasks_sharing_a_key_leave_one_per_key(dsn):
    from pgsched.db import Database

    db = Database.connect(dsn, max_size=2)
    try:
        for name in ("import", "reimport"):
            make_task(db, name)
    finally:
        db.close()
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            "UPDATE pgsched.task SET concurrency_key = 'customer:{customer}', "
            "unique_policy = 'pending', unique_scope = 'key'"
        )
    statements = [ENQUEUE_V2] * 8
    # both tasks, both keys: four enqueues of each key, from two tasks
    args = [["import" if i % 2 else "reimport", json.dumps({"customer": i // 4}), None, None]
            for i in range(8)]  # fmt: skip
    barrier = threading.Barrier(8)
    answers: list[dict] = []

    def one(i: int) -> None:
        with psycopg.connect(dsn, row_factory=dict_row) as c:
            barrier.wait(timeout=30)
            answers.append(c.execute(statements[i], args[i]).fetchone())
            c.execute("SELECT pg_sleep(0.05)")
            c.commit()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with psycopg.connect(dsn, row_factory=dict_row) as c:
        keys = c.execute(
            "SELECT concurrency_key, count(*)::int AS n FROM pgsched.execution "
            "WHERE state = 'pending' GROUP BY 1 ORDER BY 1"
        ).fetchall()
    assert keys == [
        {"concurrency_key": "customer:0", "n": 1},
        {"concurrency_key": "customer:1", "n": 1},
    ]
    assert sorted(a["deduplicated"] for a in answers) == [False] * 2 + [True] * 6


def test_a_tenants_own_logins_race_to_one_pending_execution(dsn):
    from pgsched.db import Database

    from ..tenancy import two_tenants

    with two_tenants(dsn) as (a, b, _):
        db = Database.connect(dsn, max_size=2)
        try:
            task = make_task(db, "once-at-a-time", tenant=a.name, unique_policy="pending")
            make_task(db, "once-at-a-time", tenant=b.name, unique_policy="pending")
        finally:
            db.close()
        statement = ENQUEUE_V2.replace("tenant => %s", "tenant => NULL")
        args = ["once-at-a-time", None, None]
        answers = _race([a.app] * 6, statement, args)
        inserted = _race(
            [a.app] * 2,
            "INSERT INTO pgsched.run_request (task) VALUES (%s) "
            "RETURNING execution_id, deduplicated, dedup_reason, succeeded_execution_id",
            ["once-at-a-time"],
        )
        with psycopg.connect(a.engine, row_factory=dict_row) as c:  # the tenant's rows
            [only] = pending(c, task["id"])
        assert {x["execution_id"] for x in answers + inserted} == {only}
        assert sorted(x["deduplicated"] for x in answers + inserted) == [False] + [True] * 7
        # tenant B's task of the same name has a window of its own
        with psycopg.connect(b.app, row_factory=dict_row) as c:
            other = c.execute(statement, args).fetchone()
        assert other["deduplicated"] is False and other["execution_id"] != only


def test_the_cli_sets_shows_and_changes_the_windows(dsn):
    def cli(*args: str) -> str:
        out = CliRunner().invoke(main, ["--dsn", dsn, "task", *args])
        assert out.exit_code == 0, out.output
        return out.output

    cli(
        "create",
        "sync",
        "--command",
        "true",
        "--every",
        "1m",
        "--overlap",
        "skip",
        "--unique",
        "pending",
        "--unique-period",
        "10m",
    )
    shown = json.loads(cli("show", "sync", "--json"))
    assert (shown["overlap_policy"], shown["unique_policy"], shown["unique_period_seconds"]) == (
        "skip",
        "pending",
        600.0,
    )
    assert "windows            overlap skip, unique: one pending and one per 600 s per task" in (
        cli("show", "sync").splitlines()
    )
    cli("update", "sync", "--overlap", "queue_one", "--unique-period", "none")
    shown = json.loads(cli("show", "sync", "--json"))
    assert (shown["overlap_policy"], shown["unique_policy"], shown["unique_period_seconds"]) == (
        "queue_one",
        "pending",
        None,
    )
    out = CliRunner().invoke(main, ["--dsn", dsn, "task", "update", "sync", "--unique-period", "x"])
    assert out.exit_code != 0 and "unique_period: 'x' is not an interval" in out.output


def test_an_enqueue_racing_a_claim_of_the_pending_one_waits_and_then_makes_a_new_one(dsn):
    """The pending execution the window found is being claimed (uncommitted) by a worker:
    the enqueue waits for the claim (FOR SHARE), then sees it running and makes a new one,
    rather than returning a run that started before it asked."""
    from pgsched.db import Database

    from ..helpers import wait_until, waiting_on_a_lock

    db = Database.connect(dsn, max_size=2)
    try:
        task = make_task(db, unique_policy="pending")
        first = tasks.enqueue(db, "job").execution_id
        worker = register(db, "racer")
    finally:
        db.close()
    answer: list[dict] = []
    with (
        psycopg.connect(dsn, row_factory=dict_row) as claimer,
        psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as watcher,
    ):
        claimed = claimer.execute(
            "SELECT id FROM pgsched_internal.execution_claim_v1(%s, ARRAY['default'], NULL, 10,"
            " clock_timestamp(), '{}', '{}')",
            [worker],
        ).fetchall()
        assert [r["id"] for r in claimed] == [first]  # not committed yet

        def enqueue() -> None:
            with psycopg.connect(
                dsn, autocommit=True, row_factory=dict_row, application_name="racing-enqueue"
            ) as c:
                answer.append(enqueue_v2(c))

        racer = threading.Thread(target=enqueue)
        racer.start()
        wait_until(lambda: waiting_on_a_lock(watcher, "racing-enqueue"), message="it waits")
        claimer.commit()
        racer.join(timeout=30)
        [got] = answer
        assert got["deduplicated"] is False and got["execution_id"] != first
        assert pending(watcher, task["id"]) == [got["execution_id"]]
