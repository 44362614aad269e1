"""Migration 0017 (the engine's functions moved to pgsched_internal) must not change which
privileges the public SQL API and pgsched's own processes need (an attack on issue 16
found that it did, until 0017 let every role use pgsched_internal as it could pgsched).

A role that had USAGE on schema pgsched and DML on its tables (and no USAGE on
pgsched_internal) could, at 0016, cancel executions, start/cancel/rerun DAG runs and record
the outcome of a DAG node's execution (what a worker does). At 0017 each of these fails with
``permission denied for schema pgsched_internal``, because the public functions and the DAG
trigger now call functions there. The worker then records the succeeded node as failed, cannot
record that either, and the rescue re-runs the command until the execution goes dead.

Each test runs the same steps on a database migrated to 0016 and to the latest migration;
"behaviour unchanged" means both pass. From 0018 (issue 17) what a role may do is decided by
the group roles the migrations install (docs/security.md): at the latest migration the role
is also made what an installation-wide engine login is, a member of pgsched_engine and
pgsched_instance, and needs nothing more.
"""

from __future__ import annotations

import dataclasses
import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from pgsched import dag as dag_module
from pgsched import migrate, queries
from pgsched.db import Database
from pgsched.stores import dags

from .test_dag_engine import ETL, Driver

# The DAG apply's lock as the code of 0016's time took it: today's (dag_lock_v1, migration
# 0027) is a function a database at 0016 has not got. Set up DAGs there with this one.
DAG_LOCK_OF_0016 = (
    "SELECT pg_advisory_xact_lock(hashtextextended('pgsched.dag ' || %(tenant)s || ' ' || "
    "%(name)s, 0))"
)


# The outcome's record as the code of 0016's time wrote it: today's also carries the
# execution's progress (migration 0038), columns a database at 0016 has not got.
FINISH_OF_0016 = """
WITH done AS (
    DELETE FROM pgsched.execution
     WHERE id = %(id)s AND lease_id = %(lease_id)s AND state = 'running'
    RETURNING *
)
INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state, trigger,
    priority, queue, params, idempotency_key, attempt, max_attempts, worker_id, leader_epoch,
    created_at, started_at, finished_at, exit_code, error, result, lost_attempts, dag_run_id)
SELECT id, tenant, task_id, scheduled_at, run_at, %(state)s, trigger, priority, queue, params,
       idempotency_key, attempt, max_attempts, worker_id, leader_epoch, created_at, started_at,
       %(finished_at)s, %(exit_code)s, %(error)s, %(result)s, lost_attempts, dag_run_id
  FROM done
"""


def at_0016(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``dags.apply`` take the lock of 0016's time (DAG_LOCK_OF_0016) and the outcome be
    recorded as then (FINISH_OF_0016) for this test."""
    for name, text in (("dag_lock", DAG_LOCK_OF_0016), ("execution_finish", FINISH_OF_0016)):
        old = dataclasses.replace(queries.get(name), text=text)
        monkeypatch.setitem(queries.registry(), name, old)


def _migrate(dsn: str, upto: str) -> None:
    known = migrate.load()
    if upto == "0016":
        at = next(i for i, m in enumerate(known) if m.name == "internal_schema")
        migrate.migrate(dsn, known[:at])
    else:
        migrate.migrate(dsn)


@pytest.fixture(params=["0016", "latest"])
def restricted(request, empty_dsn, monkeypatch):
    """(owner dsn, restricted role's dsn): the role has USAGE on pgsched, DML on its tables and
    its sequences, nothing on pgsched_internal (what sufficed at 0016 for everything but
    enqueue, which 0007 had already moved behind pgsched_internal)."""
    _migrate(empty_dsn, request.param)
    if request.param == "0016":
        at_0016(monkeypatch)
    role = f"app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(f"GRANT USAGE ON SCHEMA pgsched TO {role}")
        c.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgsched TO {role}")
        c.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA pgsched TO {role}")
        if request.param == "latest":
            c.execute(f"GRANT pgsched_engine, pgsched_instance TO {role}")
    info = conninfo_to_dict(empty_dsn)
    info.update(user=role, password=None)
    info = {k: v for k, v in info.items() if v is not None}
    try:
        yield empty_dsn, make_conninfo(**info)
    finally:
        # the role is cluster-wide: take its grants back in this database, then drop it
        with psycopg.connect(empty_dsn, autocommit=True) as c:
            c.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA pgsched FROM {role}")
            c.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgsched FROM {role}")
            c.execute(f"REVOKE ALL ON SCHEMA pgsched FROM {role}")
            c.execute(f"DROP ROLE {role}")


def test_cancel_v1_of_a_pending_execution_needs_no_more_than_before(restricted):
    owner, app = restricted
    with psycopg.connect(owner, autocommit=True, row_factory=dict_row) as sql:
        sql.execute(
            "INSERT INTO pgsched.task (name, handler_kind, command) VALUES ('job', 'shell', 'true')"
        )
        pending = sql.execute("SELECT pgsched.enqueue_v1('job') AS id").fetchone()["id"]
    with psycopg.connect(app, autocommit=True) as c:
        assert c.execute("SELECT pgsched.cancel_v1(%s)", [pending]).fetchone()[0] == "cancelled"


def test_dag_trigger_cancel_v1_need_no_more_than_before(restricted):
    owner, app = restricted
    db = Database.connect(owner, max_size=2)
    try:
        dags.apply(db, dag_module.parse(ETL))
    finally:
        db.close()
    with psycopg.connect(app, autocommit=True) as c:
        run = c.execute("SELECT pgsched.dag_trigger_v1('etl')").fetchone()[0]
        assert c.execute("SELECT pgsched.dag_cancel_v1(%s)", [run]).fetchone()[0] in (
            "cancelled",
            "cancelling",
        )


def test_a_worker_role_can_record_a_dag_nodes_outcome_as_before(restricted, request):
    """What `pgsched worker` does for a DAG node (execution_finish: the history insert fires
    dag_execution_finished_v1). At 0017 under this role: permission denied for schema
    pgsched_internal; the real worker then logs 'outcome succeeded refused by the database
    ... recording it as failed', fails to record that too, and the rescue re-runs it."""
    owner, app = restricted
    odb = Database.connect(owner, max_size=2)
    adb = Database.connect(app, max_size=2)
    try:
        dags.apply(odb, dag_module.parse(ETL))
        with psycopg.connect(owner, autocommit=True) as sql:
            run = sql.execute("SELECT pgsched.dag_trigger_v1('etl')").fetchone()[0]
        with psycopg.connect(app, autocommit=True, row_factory=dict_row) as asql:
            # at 0016 the owner claims: today's claim is a function of 0021's, the old
            # code's was a statement; what is compared is the outcome's record
            def claim_as_owner(worker: int, now) -> list[dict]:
                with psycopg.connect(owner, autocommit=True, row_factory=dict_row) as c:
                    return c.execute(
                        "UPDATE pgsched.execution SET state = 'running', attempt = attempt + 1,"
                        " worker_id = %s, started_at = %s, lease_id = nextval('pgsched.lease_id_seq')"
                        " WHERE state = 'pending' AND run_at <= %s RETURNING id, lease_id",
                        [worker, now, now],
                    ).fetchall()

            at_0016 = "0016" in request.node.callspec.id
            drive = Driver(adb, asql, claim=claim_as_owner if at_0016 else None)
            drive.finish(run, "extract_a")
            drive.finish(run, "extract_b")
            assert drive.states(run)["merge"] == "queued"
    finally:
        adb.close()
        odb.close()


def test_a_worker_role_can_plan_a_retry_as_before(restricted, request):
    """A failed attempt with attempts left asks the retry budget when it may run again
    (execution_retry_slot). At 0017 under this role the real worker logs 'outcome failed
    refused by the database (permission denied for schema pgsched_internal)' and leaves the
    execution running; at 0016 (old code, same role) it retried 3 times and went to the DLQ."""
    _owner, app = restricted
    name = "pgsched.retry_slot_v1" if "0016" in request.node.callspec.id else None
    with psycopg.connect(app, autocommit=True) as c:
        if name:
            c.execute(f"SELECT {name}(now())").fetchone()
        else:
            adb = Database.connect(app, max_size=1)
            try:
                adb.one("execution_retry_slot", proposed=c.execute("SELECT now()").fetchone()[0])
            finally:
                adb.close()
