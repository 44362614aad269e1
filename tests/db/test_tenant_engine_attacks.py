"""A tenant's *engine* login (what `pgsched tenant create A --engine-login ROLE` makes, and
what a tenant-bound worker runs as) attacks tenant B and the installation: an attack on
issue 17 found each of these open (0018 granted pgsched_engine every table that was not
the web's, with row-level security only where a table had a tenant column, and every
engine function and sequence). Each test asserts what docs/security.md promises.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors
from psycopg.rows import dict_row

from ..tenancy import two_tenants


def _c(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, row_factory=dict_row)


# --- F1 -------------------------------------------------------------------------------


def test_f1_engine_login_of_a_cannot_remap_tenant_bs_logins(dsn: str) -> None:
    """F1 (critical). A's engine login deletes tenant B from pgsched.tenant (no RLS on
    it); the FK's ON DELETE CASCADE removes B's rows of tenant_role (referential actions
    are not held by row-level security). It then maps B's application login to tenant A
    (tenant_role's WITH CHECK pins only the tenant column). From then on B's application
    enqueues land in tenant A (A reads B's params), and B's workers serve A."""
    with two_tenants(dsn) as (a, b, _):
        b_app_role, b_engine_role = b.roles
        with _c(a.engine) as eng_a:
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute("DELETE FROM pgsched.tenant WHERE name = %s", [b.name])
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute(
                    "INSERT INTO pgsched.tenant_role (role_name, tenant, purpose) "
                    "VALUES (%s, %s, 'app'), (%s, %s, 'engine')",
                    [b_app_role, a.name, b_engine_role, a.name],
                )
        with _c(b.app) as app_b:
            own = app_b.execute(
                "SELECT pgsched.enqueue_v1('job', '{\"secret\": \"of B\"}') AS id"
            ).fetchone()["id"]
        with _c(dsn) as su:
            row = su.execute("SELECT tenant FROM pgsched.execution WHERE id = %s", [own]).fetchone()
        assert row["tenant"] == b.name


def test_f1b_engine_login_of_a_cannot_put_an_instance_login_in_its_tenant(dsn: str) -> None:
    """F1b. The same door on a login that acts for the whole installation: A's engine
    login maps the scheduler's (here the superuser's) login to tenant A; is_instance_v1()
    is then false for it and every public call it makes acts in A only: an instance
    scheduler on that login stops firing every other tenant."""
    with two_tenants(dsn) as (a, b, _):
        with _c(dsn) as su:
            me = su.execute("SELECT session_user AS u").fetchone()["u"]
        try:
            with _c(a.engine) as eng_a:
                with pytest.raises(errors.InsufficientPrivilege):
                    eng_a.execute(
                        "INSERT INTO pgsched.tenant_role (role_name, tenant, purpose) "
                        "VALUES (%s, %s, 'engine')",
                        [me, a.name],
                    )
            with _c(dsn) as su:
                assert su.execute("SELECT pgsched_internal.is_instance_v1() AS i").fetchone()["i"]
                su.execute("SELECT pgsched.enqueue_v1('job', tenant => %s)", [b.name])
        finally:
            with _c(dsn) as su:
                su.execute("DELETE FROM pgsched.tenant_role WHERE role_name = %s", [me])


# --- F2 -------------------------------------------------------------------------------


def test_f2_engine_login_of_a_cannot_drop_history_partitions(dsn: str) -> None:
    """F2 (high). pgsched_internal.partition_drop_v1 is SECURITY DEFINER and executable by
    every engine login: A's drops today's history partition, and B's dead-letter queue
    (and every tenant's finished executions of the day) is gone."""
    with two_tenants(dsn) as (a, b, _):
        with _c(a.engine) as eng_a:
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute(
                    "SELECT pgsched_internal.partition_drop_v1("
                    "'execution_history_p' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD'), "
                    "'execution_history')"
                )
        with _c(dsn) as su:
            assert (
                su.execute(
                    "SELECT count(*) AS n FROM pgsched.execution_history WHERE id = %s", [b.dead_id]
                ).fetchone()["n"]
                == 1
            )


# --- F3 -------------------------------------------------------------------------------


def test_f3_engine_login_of_a_cannot_forge_or_wipe_bs_audit_log(dsn: str) -> None:
    """F3 (high). audit_record_v1 (SECURITY DEFINER, EXECUTE granted to engine) takes the
    tenant as an argument: A's engine login writes events into B's audit log (forgery; or
    fills B's 600/min budget of sign_in_failed so a real brute force goes unrecorded).
    With `setting` writable (no RLS, no tenant column) it sets audit_retention_days to 0
    and calls access_prune_v1: every tenant's audit log is deleted."""
    with two_tenants(dsn) as (a, b, _):
        with _c(dsn) as su:
            real = su.execute(
                "SELECT pgsched_internal.audit_record_v1(%s, 'cli', 'root', 'token_create', "
                "'token 1', '{}', NULL) AS id",
                [b.name],
            ).fetchone()["id"]
        with _c(a.engine) as eng_a:
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute(
                    "SELECT pgsched_internal.audit_record_v1(%s, 'user', %s, 'token_revoke', "
                    "'token 1', '{\"forged\": true}', '10.0.0.1')",
                    [b.name, f"admin_{b.name}"],
                )
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute(
                    "UPDATE pgsched.setting SET value = '0' WHERE name = 'audit_retention_days'"
                )
            with pytest.raises(errors.InsufficientPrivilege):  # the leader's, not a tenant's
                eng_a.execute("SELECT pgsched_internal.access_prune_v1()")
        with _c(dsn) as su:
            rows = su.execute(
                "SELECT id FROM pgsched.audit_event WHERE tenant = %s", [b.name]
            ).fetchall()
        assert [r["id"] for r in rows] == [real]


# --- F4 -------------------------------------------------------------------------------


def test_f4_engine_login_of_a_cannot_kill_bs_running_execution(dsn: str) -> None:
    """F4 (high). pgsched.worker is exempt from RLS and writable by every engine login: A's
    marks B's worker dead (or deletes it, or ages its heartbeat, or sets the shared setting
    worker_dead_after_heartbeats to 0). The leader's next rescue takes B's running
    execution back; B's worker kills its attempt (lease lost) and the run starts again.
    Reproduced with real processes too (a 20 s command of B's started twice, the first
    killed after 5 s)."""
    with two_tenants(dsn) as (a, b, _):
        with _c(dsn) as su:
            wid = su.execute(
                "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
                "heartbeat_interval) VALUES ('b-worker', 'h', 1, '{default}', %s, 1, 5) "
                "RETURNING id",
                [[b.name]],
            ).fetchone()["id"]
            su.execute(
                "UPDATE pgsched.execution SET state = 'running', worker_id = %s, attempt = 1, "
                "started_at = now(), lease_id = nextval('pgsched.lease_id_seq') WHERE id = %s",
                [wid, b.pending_id],
            )
        with _c(a.engine) as eng_a:
            changed = eng_a.execute(
                "UPDATE pgsched.worker SET state = 'dead' WHERE %s = ANY (tenants)", [b.name]
            ).rowcount
            # the shared knobs every tenant's rescue reads
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute(
                    "UPDATE pgsched.setting SET value = value "
                    "WHERE name = 'worker_dead_after_heartbeats'"
                )
            seen = eng_a.execute("SELECT count(*) AS n FROM pgsched.worker").fetchone()["n"]
        with _c(dsn) as su:
            rescued = su.execute("SELECT * FROM pgsched_internal.rescue_v1()").fetchall()
        assert (changed, seen) == (0, 0)  # B's workers: neither changed nor seen
        assert [r["execution_id"] for r in rescued] == []


# --- F5 -------------------------------------------------------------------------------


def test_f5_engine_login_of_a_cannot_exhaust_the_shared_sequences(dsn: str) -> None:
    """F5 (medium). Every engine login has UPDATE on every sequence of pgsched: A's sets
    execution_id_seq to its maximum and no tenant can enqueue any more (B's application
    gets 'reached maximum value of sequence'); setting it back makes ids collide, and
    lease_id_seq rewound could hand out leases already used (the fence of a stale worker).
    It also reads last_value of every sequence: how many executions, tokens, DAG runs the
    whole installation made."""
    with two_tenants(dsn) as (a, b, _):
        with _c(a.engine) as eng_a:
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute("SELECT setval('pgsched.execution_id_seq', 9223372036854775807)")
        with _c(b.app) as app_b:
            app_b.execute("SELECT pgsched.enqueue_v1('job')")


# --- F6 -------------------------------------------------------------------------------


def test_f6_engine_login_of_a_cannot_touch_instance_tables(dsn: str) -> None:
    """F6 (medium, the general form of F1-F5). What a tenant's engine login may still
    change for every tenant: the leader row (elections), the schedulers' nodes, the
    migrations ledger, the shared settings (retry budget, max_lost_attempts, misfire caps,
    alert thresholds, audit caps), the tenants list. Seen live: `UPDATE pgsched.leader SET
    epoch = epoch + 1000` as A's engine login makes the real leader stop mid-round ("term 1
    is over: another scheduler was elected since") and re-elect itself; run in a loop it
    keeps every tenant's scheduling flapping."""
    with two_tenants(dsn) as (a, _b, _):
        with _c(a.engine) as eng_a:
            for stmt in (
                "UPDATE pgsched.setting SET value = value",
                "UPDATE pgsched.leader SET holder = holder",
                "UPDATE pgsched.scheduler_node SET id = id",
                "UPDATE pgsched.schema_migration SET version = version",
                "UPDATE pgsched.tenant SET name = name",
            ):
                with pytest.raises(errors.InsufficientPrivilege):
                    eng_a.execute(stmt)


# --- F7 -------------------------------------------------------------------------------


def test_f7_engine_login_of_a_cannot_attach_rows_to_bs_executions(dsn: str) -> None:
    """F7 (medium). The history tables check only their own row's tenant: A's engine login
    inserts, in tenant A, an attempt and log lines whose execution_id is B's (ids are
    sequential, so guessable). Reads by execution id (sql/execution.sql execution_log_page,
    execution_log_tail, the attempts of `execution show`) made by an instance principal
    (the installation's CLI, an instance web admin, '*') then show A's forged attempt and
    lines as B's execution's own: `pgsched --tenant B execution show ID` / `execution logs
    ID` print 'forged by tenant A'. Same for execution_history rows naming B's task_id."""
    with two_tenants(dsn) as (a, b, _):
        with _c(a.engine) as eng_a:
            with pytest.raises(errors.InsufficientPrivilege):  # row-level security's check
                eng_a.execute(
                    "INSERT INTO pgsched.execution_log (execution_id, tenant, attempt, seq, stream, "
                    "line, logged_at) VALUES (%s, %s, 1, 0, 'stderr', 'forged by A', now())",
                    [b.dead_id, a.name],
                )
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute(
                    "INSERT INTO pgsched.execution_attempt (execution_id, tenant, attempt, worker_id, "
                    "state, started_at, finished_at, error) "
                    "VALUES (%s, %s, 1, 1, 'failed', now(), now(), 'forged by A')",
                    [b.dead_id, a.name],
                )


# --- F9 -------------------------------------------------------------------------------


def test_f9_engine_login_of_a_cannot_mark_a_future_migration_applied(dsn: str) -> None:
    """F9 (high). schema_migration is writable by every engine login. Migration files are
    public, so their checksums are known before a release: A's engine login records the
    next release's migration (here a stand-in 0021 that would revoke something) as applied,
    and the operator's `pgsched migrate` then skips it without a word: a security fix
    shipped as a migration never lands. (Or it records a wrong checksum, and every later
    migrate refuses with ChecksumMismatch.)"""
    from pgsched import migrate

    shipped = migrate.load()
    fix = migrate.Migration(
        len(shipped) + 1,
        "security_fix",
        "CREATE TABLE pgsched.fix_landed (x int); SELECT pgsched_internal.secure_v1();",
    )
    with two_tenants(dsn) as (a, _b, _):
        with _c(a.engine) as eng_a:
            with pytest.raises(errors.InsufficientPrivilege):
                eng_a.execute(
                    "INSERT INTO pgsched.schema_migration (version, name, checksum) "
                    "VALUES (%s, %s, %s)",
                    [fix.version, fix.name, fix.checksum],
                )
        migrate.migrate(dsn, [*shipped, fix])
        with _c(dsn) as su:
            assert su.execute(
                "SELECT to_regclass('pgsched.fix_landed') IS NOT NULL AS landed"
            ).fetchone()["landed"]


# --- F10 ------------------------------------------------------------------------------


def test_f10_a_dag_of_a_cannot_run_bs_task(dsn: str) -> None:
    """F10 (critical). dag_node's policy checks only that its DAG is the session's (the
    FK to task is checked by PostgreSQL's RI, which row-level security does not hold), so
    A's engine login points a node of A's DAG at B's task id (ids are sequential). A
    `dag_trigger_v1` of A's (its application login is enough, or the engine itself) runs as
    the owner and dag_enqueue_v1 takes the execution's tenant from the task: an execution
    of B's task, in tenant B, with params A chose merged over B's, queued for B's workers
    (B's command runs with B's env and secrets). Reproduced live: B's worker ran it
    ({"card": "4111", "injected": "by tenant A"}). The same holds for dag_node_run.task_id
    and an `UPDATE pgsched.dag_node SET task_id` of a DAG already applied."""
    with two_tenants(dsn) as (a, b, _):
        with _c(a.engine) as eng_a:
            with pytest.raises(
                (errors.InsufficientPrivilege, errors.ForeignKeyViolation, errors.CheckViolation)
            ):
                eng_a.execute(
                    "UPDATE pgsched.dag_node SET task_id = %s WHERE node_id = 'extract'",
                    [b.task_id],
                )
        with _c(a.app) as app_a:
            app_a.execute("SELECT pgsched.dag_trigger_v1('etl', '{\"injected\": \"by A\"}')")
        with _c(dsn) as su:
            injected = su.execute(
                "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s "
                "AND params ? 'injected'",
                [b.task_id],
            ).fetchone()["n"]
        assert injected == 0
