"""The scheduler leader's services (pgsched.scheduler: Rescue, Partitions, WorkerPrune,
StatsRollUp, AlertDetection; pgsched.webhooks.Sender): each one's run_once(now) against a
real database, a service started and stopped twice, and the rescue ending with its term.
Each runs twice: as the superuser, and on an installation-wide engine login (a member of
pgsched_engine and pgsched_instance, docs/security.md), which must need nothing more."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql as pgsql

from pgsched import webhooks
from pgsched.clock import FixedClock, ServerClock
from pgsched.db import Database, Session, connect
from pgsched.scheduler import (
    AlertDetection,
    Partitions,
    Rescue,
    StatsRollUp,
    TermOver,
    WorkerPrune,
    elect,
    tick,
)
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..helpers import wait_until
from ..tenancy import drop_roles, login_dsn
from .test_claim import register
from .test_rescue import live, running

NOW = datetime(2030, 3, 10, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["superuser", "engine login"])
def db(request, dsn):
    """The services' Database: on the test's superuser, or on an engine login."""
    if request.param == "superuser":
        database = Database.connect(dsn, max_size=8)
        yield database
        database.close()
        return
    role = f"engine_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_engine, pgsched_instance").format(
                pgsql.Identifier(role)
            )
        )
    database = Database.connect(login_dsn(dsn, role), max_size=8)
    try:
        yield database
    finally:
        database.close()
        drop_roles(dsn, [role])


@pytest.fixture
def lock(dsn):
    conn = connect(dsn)
    yield Session(conn)
    conn.close()


def test_rescue_run_once_requeues_what_a_deleted_worker_held(db, sql):
    worker = register(db)
    [held] = running(db, "orphan", worker)
    sql.execute("DELETE FROM pgsched.worker WHERE id = %s", [worker])
    service = Rescue(db, ServerClock(db), epoch=None)
    [row] = service.run_once(db.now())
    assert (row["execution_id"], row["outcome"]) == (held["id"], "requeued")
    assert live(sql, held["id"]) == {"state": "pending", "worker_id": None}
    assert service.run_once(db.now()) == []


def test_rescue_under_an_older_term_ends_its_loop_and_writes_nothing(db, lock, sql):
    stop = threading.Event()
    assert elect(lock, "one", stop) == 1 and elect(lock, "two", stop) == 2
    old = Rescue(db, ServerClock(db), epoch=1)
    with pytest.raises(TermOver):
        old.run_once(db.now())
    assert old.round() is None  # the loop ends: the tick finds out too, and stands by
    assert Rescue(db, ServerClock(db), epoch=2).round() == 1.0


def test_partitions_run_once_creates_the_days_around_now_and_again_nothing(db):
    service = Partitions(db, FixedClock(NOW), retention_days=30, premake_days=3)
    report = service.run_once(NOW)
    assert report["created"] and not report["busy"]
    assert service.next_wait(report) == 3600.0
    assert service.run_once(NOW)["created"] == []
    assert service.next_wait({"busy": ["(creating partitions)"]}) == 60.0
    assert service.round() == 3600.0  # the loop's round: at the clock's instant, NOW


def test_worker_prune_run_once_removes_workers_stopped_long_ago(db, sql):
    old, recent = register(db, name="old"), register(db, name="recent")
    sql.execute(
        "UPDATE pgsched.worker SET state = 'stopped', stopped_at = now() - interval '8 days' "
        "WHERE id = %s",
        [old],
    )
    service = WorkerPrune(db, ServerClock(db))
    assert service.run_once(db.now()) == 1
    assert {r["id"] for r in sql.execute("SELECT id FROM pgsched.worker")} == {recent}


def test_stats_roll_up_run_once_rolls_up(db, sql):
    assert StatsRollUp(db, ServerClock(db)).run_once(db.now()) >= 0
    assert (
        sql.execute("SELECT rolled_at FROM pgsched.stats_rollup_state").fetchone()["rolled_at"]
        is not None
    )


def test_alert_detection_run_once_judges_at_the_instant_it_is_given(db, sql):
    tasks.create(
        db, TaskSpec(name="late", command="true", schedule_kind="cron", schedule="* * * * *")
    )
    sql.execute(
        "UPDATE pgsched.task SET next_fire_at = now() + interval '1 minute' WHERE name = 'late'"
    )
    service = AlertDetection(db, ServerClock(db))
    assert service.run_once(db.now()) == []  # not due yet
    later = db.now() + timedelta(minutes=10)  # its fire is 9 minutes overdue then
    assert [(c["change"], c["kind"]) for c in service.run_once(later)] == [
        ("opened", "missed_schedule")
    ]


def test_webhook_sender_run_once_with_nothing_due_waits_a_poll(db):
    sender = webhooks.Sender(db, poll=0.5)
    assert sender.run_once(db.now()) == []
    assert sender.next_wait([]) == 0.5 and sender.next_wait([{"id": 1}]) == 0.0


def test_a_service_started_and_stopped_twice_against_the_database(db, sql):
    worker = register(db)
    [held] = running(db, "orphan", worker)
    sql.execute("DELETE FROM pgsched.worker WHERE id = %s", [worker])
    service = Rescue(db, ServerClock(db), epoch=None, interval=0.05)
    service.start()
    service.start()
    wait_until(
        lambda: live(sql, held["id"])["state"] == "pending", message="the rescue thread's round"
    )
    service.stop()
    service.stop()
    assert not service.running


def test_the_tick_still_fires_at_the_instant_it_is_given(db):
    tasks.create(
        db,
        TaskSpec(name="due", command="true", schedule_kind="interval", schedule="60"),
        now=db.now() - timedelta(minutes=5),
    )
    assert tick(db, None, db.now()) == 1


def test_a_broken_pool_connection_fails_one_round_and_the_next_works(db, sql):
    service = WorkerPrune(db, ServerClock(db))
    with db.pool.connection() as conn:
        pid = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
    sql.execute("SELECT pg_terminate_backend(%s)", [pid])
    waits = [service.round() for _ in range(3)]  # a broken connection fails at most one round
    assert waits[-1] == 3600.0 and service.failures == 0


def test_a_scheduler_started_and_stopped_twice_leads_then_marks_itself_stopped(db, sql):
    from pgsched.scheduler import Scheduler, SchedulerConfig

    scheduler = Scheduler(db, SchedulerConfig(max_sleep=0.2, name="embedded"))
    scheduler.stop()  # before start: nothing to stop
    scheduler.start()
    scheduler.start()
    wait_until(
        lambda: (
            sql.execute(
                "SELECT role FROM pgsched.scheduler_node WHERE name = 'embedded'"
            ).fetchone()
            == {"role": "leader"}
        ),
        message="the scheduler to lead",
    )
    scheduler.stop()
    scheduler.stop()
    assert scheduler.epoch is None
    assert sql.execute(
        "SELECT role FROM pgsched.scheduler_node WHERE name = 'embedded'"
    ).fetchone() == {"role": "stopped"}
