"""Migration 0012 on a real database: an idempotency key belongs to its task (and tenant),
through every path that looks one up (enqueue_v1/v2, the run_request INSERT, the
already-succeeded check and its skipped record, the dead-letter retry), and enqueue_v2
and the run_request INSERT say when a call was deduplicated and which execution it
returned."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest

from pgsched import migrate
from pgsched.enqueued import Enqueued
from pgsched.errors import ValidationError
from pgsched.stores import tasks

from ..factories import make_task
from ..helpers import wait_until, waiting_on_a_lock
from .test_claim import claim, finish, register

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)
ENQUEUE_V2 = (
    "SELECT execution_id, deduplicated, dedup_reason, succeeded_execution_id "
    "FROM pgsched.enqueue_v2(%s, idempotency_key => %s)"
)
ENQUEUE_V1 = "SELECT pgsched.enqueue_v1(%s, idempotency_key => %s) AS id"


def enqueue_v2(sql, task, key):
    return sql.execute(ENQUEUE_V2, [task, key]).fetchone()


def enqueue_v1(sql, task, key):
    return sql.execute(ENQUEUE_V1, [task, key]).fetchone()["id"]


def end(db, ident, state="succeeded"):
    """Claim execution ``ident`` (and nothing else) and end it in ``state``, through the
    worker's own claim and finish."""
    worker = register(db, f"w{ident}")
    (row,) = [r for r in claim(db, worker, limit=100) if r["id"] == ident]
    assert finish(db, ident, row["lease_id"], state=state, finished_at=datetime.now(UTC)) == 1


def rows_of(sql, task_id):
    return sql.execute(
        "SELECT id, state, idempotency_key FROM pgsched.execution_all "
        "WHERE task_id = %s ORDER BY id",
        [task_id],
    ).fetchall()


def row(ident, state, key):
    return {"id": ident, "state": state, "idempotency_key": key}


def test_a_key_shared_by_two_tasks_gives_each_task_its_own_execution(db, sql):
    a, b = make_task(db, "invoice", now=T0), make_task(db, "receipt", now=T0)
    first = enqueue_v1(sql, "invoice", "order-7")
    other = enqueue_v1(sql, "receipt", "order-7")
    assert other != first
    assert rows_of(sql, a["id"]) == [row(first, "pending", "order-7")]
    assert rows_of(sql, b["id"]) == [row(other, "pending", "order-7")]
    # and on one task it is still one execution
    assert enqueue_v1(sql, "receipt", "order-7") == other
    assert len(rows_of(sql, b["id"])) == 1


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_a_key_that_succeeded_on_one_task_does_not_skip_another_tasks_run(db, sql):
    make_task(db, "invoice", now=T0)
    receipt = make_task(db, "receipt", now=T0)
    first = tasks.trigger(db, "invoice", idempotency_key="order-7")
    end(db, first)
    done = enqueue_v2(sql, "receipt", "order-7")
    assert done["deduplicated"] is False and done["execution_id"] != first
    assert rows_of(sql, receipt["id"]) == [row(done["execution_id"], "pending", "order-7")]


def test_enqueue_v2_says_a_new_execution_was_made(db, sql):
    task = make_task(db, "report", now=T0)
    made = enqueue_v2(sql, "report", "k-1")
    assert made == {
        "execution_id": made["execution_id"],
        "deduplicated": False,
        "dedup_reason": None,
        "succeeded_execution_id": None,
    }
    assert rows_of(sql, task["id"]) == [row(made["execution_id"], "pending", "k-1")]
    plain = enqueue_v2(sql, "report", None)  # no key: nothing to deduplicate on
    assert plain["deduplicated"] is False and plain["execution_id"] != made["execution_id"]


def test_enqueue_v2_says_it_returned_the_live_execution_of_the_key(db, sql):
    task = make_task(db, "report", now=T0)
    first = enqueue_v2(sql, "report", "k-1")["execution_id"]
    again = enqueue_v2(sql, "report", "k-1")
    assert again == {
        "execution_id": first,
        "deduplicated": True,
        "dedup_reason": "live",
        "succeeded_execution_id": None,
    }
    claim(db, register(db))  # running is live too
    assert enqueue_v2(sql, "report", "k-1") == again
    assert [r["id"] for r in rows_of(sql, task["id"])] == [first]


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_enqueue_v2_names_the_succeeded_execution_and_the_skipped_one_it_recorded(db, sql):
    task = make_task(db, "report", now=T0)
    first = enqueue_v2(sql, "report", "k-1")["execution_id"]
    end(db, first)
    again = enqueue_v2(sql, "report", "k-1")
    assert again["deduplicated"] is True and again["dedup_reason"] == "succeeded"
    assert again["succeeded_execution_id"] == first and again["execution_id"] != first
    assert rows_of(sql, task["id"]) == [
        row(first, "succeeded", "k-1"),
        row(again["execution_id"], "skipped", "k-1"),
    ]
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


def test_enqueue_v1_still_returns_the_execution_id(db, sql):
    make_task(db, "report", now=T0)
    first = enqueue_v1(sql, "report", "k")
    assert enqueue_v1(sql, "report", "k") == first
    assert tasks.trigger(db, "report", idempotency_key="k") == first  # the Python callers' int


def test_the_python_enqueue_reports_what_the_key_did(db, sql):
    make_task(db, "report", now=T0)
    made = tasks.enqueue(db, "report", idempotency_key="k")
    assert made == Enqueued(made.execution_id)
    assert tasks.enqueue(db, "report", idempotency_key="k") == Enqueued(
        made.execution_id, True, "live"
    )
    for bad in ("", "x" * 201, "a\x00b"):
        with pytest.raises(ValidationError, match="idempotency_key"):
            tasks.enqueue(db, "report", idempotency_key=bad)


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_run_request_returns_whether_it_was_deduplicated(db, sql):
    a, b = make_task(db, "invoice", now=T0), make_task(db, "receipt", now=T0)
    insert = (
        "INSERT INTO pgsched.run_request (task, idempotency_key) VALUES (%s, 'order-7') "
        "RETURNING execution_id, deduplicated, dedup_reason, succeeded_execution_id"
    )
    first = sql.execute(insert, ["invoice"]).fetchone()
    assert first["deduplicated"] is False and first["dedup_reason"] is None
    again = sql.execute(insert, ["invoice"]).fetchone()
    assert again == {
        "execution_id": first["execution_id"],
        "deduplicated": True,
        "dedup_reason": "live",
        "succeeded_execution_id": None,
    }
    other = sql.execute(insert, ["receipt"]).fetchone()  # another task: its own execution
    assert other["deduplicated"] is False and other["execution_id"] != first["execution_id"]
    assert [len(rows_of(sql, t["id"])) for t in (a, b)] == [1, 1]
    end(db, first["execution_id"])
    skipped = sql.execute(insert, ["invoice"]).fetchone()
    assert [skipped[k] for k in ("deduplicated", "dedup_reason", "succeeded_execution_id")] == [
        True,
        "succeeded",
        first["execution_id"],
    ]
    # the RETURNING of before still works
    plain = sql.execute(
        "INSERT INTO pgsched.run_request (task) VALUES ('receipt') RETURNING execution_id"
    ).fetchone()
    assert plain["execution_id"] is not None


def dead(db, name, key):
    ident = tasks.trigger(db, name, idempotency_key=key)
    end(db, ident, "dead")
    return ident


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
@pytest.mark.parametrize("theirs", ["live", "succeeded"])
def test_a_dead_letter_retry_is_not_skipped_for_another_tasks_key(db, sql, theirs):
    make_task(db, "invoice", now=T0)
    make_task(db, "receipt", now=T0)
    failed = dead(db, "invoice", "order-7")
    other = tasks.trigger(db, "receipt", idempotency_key="order-7")
    if theirs == "succeeded":
        end(db, other)
    assert db.one("dlq_retry", id=failed, tenant="default")["id"] == failed
    again = sql.execute(
        "SELECT state, attempt, max_attempts FROM pgsched.execution_all WHERE id = %s", [failed]
    ).fetchone()
    assert again == {"state": "pending", "attempt": 1, "max_attempts": 2}  # queued, not skipped


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_a_dead_letter_retry_is_skipped_for_its_own_tasks_key_that_succeeded(db, sql):
    make_task(db, "invoice", now=T0)
    make_task(db, "receipt", now=T0)
    failed = dead(db, "invoice", "order-7")
    mine = tasks.trigger(db, "invoice", idempotency_key="order-7")
    end(db, mine)
    db.one("dlq_retry", id=failed, tenant="default")
    got = sql.execute(
        "SELECT state, error FROM pgsched.execution_all WHERE id = %s", [failed]
    ).fetchone()
    assert got == {
        "state": "skipped",
        "error": f"idempotency key 'order-7' already taken by execution {mine}",
    }


def test_two_enqueues_racing_on_one_tasks_key_make_one_execution(db, sql, dsn):
    task = make_task(db, "report", now=T0)
    got: dict = {}
    with psycopg.connect(dsn) as holding:
        first = holding.execute(ENQUEUE_V2, ["report", "k-1"]).fetchone()[0]  # not committed

        def second():
            with psycopg.connect(dsn, autocommit=True, application_name="racer") as conn:
                got["row"] = conn.execute(ENQUEUE_V2, ["report", "k-1"]).fetchone()

        thread = threading.Thread(target=second)
        thread.start()
        wait_until(
            lambda: waiting_on_a_lock(sql, "racer"),
            message="the second enqueue waits for the first's key",
        )
        holding.commit()
        thread.join(10)
    assert got["row"] == (first, True, "live", None)
    assert [r["id"] for r in rows_of(sql, task["id"])] == [first]


def test_an_enqueue_of_another_tasks_key_does_not_wait_for_it(db, sql, dsn):
    make_task(db, "invoice", now=T0)
    receipt = make_task(db, "receipt", now=T0)
    with psycopg.connect(dsn) as holding:
        holding.execute(ENQUEUE_V2, ["invoice", "order-7"])  # holds the key on its task
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET statement_timeout = '5s'")  # a wait on invoice's key ends here
            made = conn.execute(ENQUEUE_V2, ["receipt", "order-7"]).fetchone()
        holding.rollback()
    assert made[1] is False
    assert [r["id"] for r in rows_of(sql, receipt["id"])] == [made[0]]


def test_the_key_lookups_are_served_by_indexes_on_task_and_key(db, sql):
    """The live lookup and the already-succeeded lookup (in every history partition: the
    lookup names no finished_at) each find the key through an index of (tenant, task_id,
    idempotency_key)."""
    unique = sql.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'pgsched' "
        "AND indexname = 'execution_task_idempotency_key'"
    ).fetchone()
    assert unique == {
        "indexdef": "CREATE UNIQUE INDEX execution_task_idempotency_key ON "
        "pgsched.execution USING btree (tenant, task_id, "
        "idempotency_key) WHERE (idempotency_key IS NOT NULL)"
    }
    per_partition = {
        r["relname"]
        for r in sql.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'pgsched.execution_history_succeeded_key_idx'::regclass"
        )
    }
    partitions = sql.execute(
        "SELECT count(*) AS n FROM pg_inherits "
        "WHERE inhparent = 'pgsched.execution_history'::regclass"
    ).fetchone()
    assert len(per_partition) == partitions["n"] > 1
    sql.execute("SET enable_seqscan = off")
    history = (
        "SELECT id FROM pgsched.execution_history WHERE tenant = 'default' AND task_id = 1 "
        "AND idempotency_key = 'k' AND state = 'succeeded' LIMIT 1"
    )
    live = (
        "SELECT id FROM pgsched.execution WHERE tenant = 'default' AND task_id = 1 "
        "AND idempotency_key = 'k'"
    )
    for lookup in (history, live):
        plan = "\n".join(r["QUERY PLAN"] for r in sql.execute("EXPLAIN " + lookup)) + " "
        names = per_partition | {"execution_task_idempotency_key"}
        used = {name for name in names if f" {name} " in plan}
        assert "Seq Scan" not in plan and used, plan
        if lookup is history:
            assert used == per_partition, plan  # one probe per partition, each by task and key


def test_migrating_to_0012_keeps_keyed_executions_and_finds_their_keys(empty_dsn):
    known = migrate.load()
    at = next(i for i, m in enumerate(known) if m.name == "idempotency_per_task")
    migrate.migrate(empty_dsn, known[:at])
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsched.task (name, handler_kind, command) VALUES ('old', 'shell', 'true')"
        )
        live = conn.execute(ENQUEUE_V1, ["old", "live-key"]).fetchone()[0]
        done = conn.execute(ENQUEUE_V1, ["old", "done-key"]).fetchone()[0]
        conn.execute(
            """
            WITH gone AS (DELETE FROM pgsched.execution WHERE id = %s RETURNING *)
            INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at,
                state, trigger, priority, queue, params, idempotency_key, attempt, max_attempts,
                created_at, started_at, finished_at)
            SELECT id, tenant, task_id, scheduled_at, run_at, 'succeeded', trigger, priority,
                   queue, params, idempotency_key, 1, max_attempts, created_at, now(), now()
              FROM gone""",
            [done],
        )
    assert [m.version for m in migrate.migrate(empty_dsn, known[: at + 1])] == [at + 1]
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute(ENQUEUE_V2, ["old", "live-key"]).fetchone() == (
            live,
            True,
            "live",
            None,
        )
        skipped, *how = conn.execute(ENQUEUE_V2, ["old", "done-key"]).fetchone()
        assert how == [True, "succeeded", done] and skipped > done
        assert conn.execute("SELECT count(*) FROM pgsched.execution").fetchone()[0] == 1
        backoff = conn.execute("SELECT backoff_from_attempt FROM pgsched.execution").fetchone()
        assert backoff == (0,)  # executions queued before 0012 count their backoff from 0


@pytest.mark.parametrize("key", ["", "k" * 201, "x" * 3200])
def test_the_sql_api_refuses_a_key_the_cli_and_rest_refuse(db, sql, key):
    """An empty key names nothing; a long one would have failed on the unique index with
    PostgreSQL's own error (an index row at most about 2.7 kB). Nothing is written."""
    task = make_task(db, "report", now=T0)
    for call in (ENQUEUE_V2, ENQUEUE_V1):
        with pytest.raises(
            psycopg.errors.InvalidParameterValue,
            match=r"idempotency_key: .* must be text of 1 to 200",
        ):
            sql.execute(call, ["report", key])
    assert rows_of(sql, task["id"]) == []
