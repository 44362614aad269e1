"""pgsched.scheduler.tick against a real database, with the clock passed in explicitly."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest

from pgsched import scheduler
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..factories import make_task
from ..helpers import notifications_until_marker, wait_until

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back


def at(hour: int, minute: int = 0, second: int = 0, micro: int = 0, day: int = 15) -> datetime:
    return datetime(2025, 1, day, hour, minute, second, micro, tzinfo=UTC)


def executions(sql, task_id: int) -> list[dict]:
    return sql.execute(
        "SELECT * FROM pgsched.execution WHERE task_id = %s ORDER BY scheduled_at", [task_id]
    ).fetchall()


def fire_times(sql, task_id: int) -> list[datetime]:
    return [r["scheduled_at"] for r in executions(sql, task_id)]


def task_row(sql, task_id: int) -> dict:
    return sql.execute("SELECT * FROM pgsched.task WHERE id = %s", [task_id]).fetchone()


def test_a_due_cron_task_fires_once_at_its_scheduled_time(db, sql):
    task = make_task(
        db,
        "five",
        schedule_kind="cron",
        schedule="*/5 * * * *",
        now=at(10, 2),
        params={"p": 1},
        priority=2,
        queue="q1",
        max_attempts=3,
    )
    assert task["next_fire_at"] == at(10, 5)

    assert scheduler.tick(db, 7, at(10, 4, 59)) == 0  # not due yet
    assert executions(sql, task["id"]) == []

    assert scheduler.tick(db, 7, at(10, 5, 0, 300)) == 1
    [row] = executions(sql, task["id"])
    assert row["scheduled_at"] == at(10, 5) and row["run_at"] == at(10, 5)
    assert row["trigger"] == "schedule"
    assert row["leader_epoch"] == 7
    assert row["state"] == "pending"
    assert (row["params"], row["priority"], row["queue"], row["max_attempts"]) == (
        {"p": 1},
        2,
        "q1",
        3,
    )
    t = task_row(sql, task["id"])
    assert t["next_fire_at"] == at(10, 10)
    assert t["last_fire_at"] == at(10, 5)


def test_ticking_twice_at_the_same_instant_does_not_fire_twice(db, sql):
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    assert scheduler.tick(db, 1, at(10, 5)) == 1
    assert scheduler.tick(db, 1, at(10, 5)) == 0
    assert fire_times(sql, task["id"]) == [at(10, 5)]
    assert scheduler.tick(db, 1, at(10, 10)) == 1
    assert fire_times(sql, task["id"]) == [at(10, 5), at(10, 10)]


def test_cron_in_a_time_zone_fires_at_local_time(db, sql):
    task = make_task(
        db,
        "berlin",
        schedule_kind="cron",
        schedule="0 9 * * *",
        now=at(0),
        timezone="Europe/Berlin",
    )
    assert task["next_fire_at"] == at(8)  # 09:00 CET
    scheduler.tick(db, 1, at(8, 0, 1))
    assert fire_times(sql, task["id"]) == [at(8)]
    assert task_row(sql, task["id"])["next_fire_at"] == at(8, day=16)


def test_interval_task_fires_on_its_anchor_grid_without_drift(db, sql):
    task = make_task(
        db, "minutely", schedule_kind="interval", schedule="1m", now=at(10, 0, 0, 700000)
    )
    assert task["schedule_anchor"] == at(10)  # created at 10:00:00.7, anchored on the second
    assert task["next_fire_at"] == at(10, 1)
    for late_tick in (at(10, 1, 0, 900000), at(10, 2, 5), at(10, 3, 59, 990000)):
        assert scheduler.tick(db, 1, late_tick) == 1
    assert fire_times(sql, task["id"]) == [at(10, 1), at(10, 2), at(10, 3)]
    assert task_row(sql, task["id"])["next_fire_at"] == at(10, 4)


def test_once_task_fires_once_and_is_never_replanned(db, sql):
    task = make_task(db, "once", schedule_kind="once", schedule="2025-01-15T10:30:00", now=at(10))
    assert task["next_fire_at"] == at(10, 30)
    assert scheduler.tick(db, 1, at(10, 29)) == 0
    assert scheduler.tick(db, 1, at(10, 31)) == 1
    t = task_row(sql, task["id"])
    assert t["next_fire_at"] is None
    assert t["last_fire_at"] == at(10, 30)
    for later in (at(10, 32), at(11), at(10, day=20)):
        assert scheduler.tick(db, 1, later) == 0
    assert fire_times(sql, task["id"]) == [at(10, 30)]
    assert task_row(sql, task["id"])["next_fire_at"] is None


def test_once_task_created_after_its_instant_runs_at_the_next_tick(db, sql):
    task = make_task(
        db, "overdue", schedule_kind="once", schedule="2025-01-15T09:00:00", now=at(10)
    )
    assert task["next_fire_at"] == at(9)
    assert scheduler.tick(db, 1, at(10, 0, 1)) == 1
    assert fire_times(sql, task["id"]) == [at(9)]
    assert scheduler.tick(db, 1, at(10, 1)) == 0


def test_missed_fires_collapse_into_one_catch_up_for_the_latest(db, sql):
    task = make_task(db, "minutely", schedule_kind="cron", schedule="* * * * *", now=at(10, 0, 30))
    assert task["next_fire_at"] == at(10, 1)
    # The scheduler was down from 10:00:30 to 10:11:30: the fires 10:01..10:11 were missed.
    # One run, for the most recent missed instant (APScheduler's coalesce, Quartz's
    # fire-once-now); the ten before it are counted as missed.
    assert scheduler.tick(db, 1, at(10, 11, 30)) == 1
    assert fire_times(sql, task["id"]) == [at(10, 11)]
    row = task_row(sql, task["id"])
    assert (row["next_fire_at"], row["last_fire_at"], row["missed_fires"]) == (
        at(10, 12),
        at(10, 11),
        10,
    )
    assert scheduler.tick(db, 1, at(10, 11, 45)) == 0
    assert scheduler.tick(db, 1, at(10, 12)) == 1
    assert fire_times(sql, task["id"]) == [at(10, 11), at(10, 12)]


def test_missed_interval_fires_collapse_and_stay_on_the_grid(db, sql):
    task = make_task(db, "every10", schedule_kind="interval", schedule="10m", now=at(10))
    assert scheduler.tick(db, 1, at(12, 7)) == 1  # 10:10 .. 12:00 missed
    assert fire_times(sql, task["id"]) == [at(12)]
    row = task_row(sql, task["id"])
    assert (row["next_fire_at"], row["missed_fires"]) == (at(12, 10), 11)


def test_paused_tasks_do_not_fire(db, sql):
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    tasks.pause(db, "five")
    assert scheduler.tick(db, 1, at(10, 30)) == 0
    assert executions(sql, task["id"]) == []


def test_a_disabled_task_is_created_unplanned_and_does_not_fire(db, sql):
    task = make_task(
        db, "off", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2), enabled=False
    )
    assert task["next_fire_at"] is None
    assert scheduler.tick(db, 1, at(10, 30)) == 0
    assert task_row(sql, task["id"])["next_fire_at"] is None


def test_a_resumed_task_is_planned_after_now_without_firing_what_it_missed(db, sql):
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    tasks.pause(db, "five")
    tasks.resume(db, "five")
    assert task_row(sql, task["id"])["next_fire_at"] is None
    assert scheduler.tick(db, 1, at(11, 2)) == 0
    assert executions(sql, task["id"]) == []
    assert task_row(sql, task["id"])["next_fire_at"] == at(11, 5)
    assert scheduler.tick(db, 1, at(11, 5)) == 1
    assert fire_times(sql, task["id"]) == [at(11, 5)]


def test_a_resumed_interval_task_is_planned_on_its_grid(db, sql):
    task = make_task(db, "every7", schedule_kind="interval", schedule="7m", now=at(10))
    tasks.pause(db, "every7")
    tasks.resume(db, "every7")
    assert scheduler.tick(db, 1, at(11)) == 0
    # 10:00 + 9 * 7 min = 11:03
    assert task_row(sql, task["id"])["next_fire_at"] == at(11, 3)


def test_a_batch_smaller_than_the_due_tasks_still_fires_them_all(db, sql):
    ids = [
        make_task(db, f"t{i}", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))["id"]
        for i in range(7)
    ]
    unplanned = [
        make_task(
            db, f"u{i}", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2), enabled=False
        )["id"]
        for i in range(3)
    ]
    for name in ("u0", "u1", "u2"):
        tasks.resume(db, name)
    assert scheduler.tick(db, 1, at(10, 5), batch=2) == 7
    for task_id in ids:
        assert fire_times(sql, task_id) == [at(10, 5)]
        assert task_row(sql, task_id)["next_fire_at"] == at(10, 10)
    for task_id in unplanned:
        assert task_row(sql, task_id)["next_fire_at"] == at(10, 10)
        assert executions(sql, task_id) == []


def test_delete_drops_pending_executions_and_stops_firing(db, sql):
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    scheduler.tick(db, 1, at(10, 5))
    tasks.trigger(db, "five", run_at=at(12))
    assert len(executions(sql, task["id"])) == 2
    assert tasks.delete(db, "five") == 2
    assert executions(sql, task["id"]) == []
    assert scheduler.tick(db, 1, at(10, 30)) == 0
    assert executions(sql, task["id"]) == []
    t = task_row(sql, task["id"])
    assert t["deleted_at"] is not None and t["next_fire_at"] is None


def test_delete_keeps_a_running_execution(db, sql):
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    scheduler.tick(db, 1, at(10, 5))
    sql.execute(
        "UPDATE pgsched.execution SET state = 'running', attempt = 1 WHERE task_id = %s",
        [task["id"]],
    )
    assert tasks.delete(db, "five") == 0
    assert [r["state"] for r in executions(sql, task["id"])] == ["running"]


def fire(db, task_ids: list[int], fires: list[datetime], epoch: int, advance: bool = True) -> int:
    """A tick's two statements for one group (the tasks, as the text of a bigint[]):
    scheduler_fire at ``fires`` (returns the executions it inserted), then, with
    ``advance``, scheduler_advance (next fire 11:00, last fire the latest of ``fires``)."""
    ids = ["{" + ",".join(map(str, task_ids)) + "}"]
    with db.transaction() as tx:
        made = tx.exec(
            "scheduler_fire", ids=ids, run_group=[1] * len(fires), run_at=fires, epoch=epoch
        )
        if advance:
            tx.exec(
                "scheduler_advance",
                ids=ids,
                next_fire_at=[at(11, 0)],
                fired_at=[max(fires)],
                missed=[0],
                busy=[],
            )
    return made


def test_the_same_fire_inserted_twice_is_one_execution(db, sql):
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    other = make_task(db, "other", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    at_five = at(10, 5)
    # Two leaders sending the same fire before either moved last_fire_at: the live unique
    # (task_id, scheduled_at) keeps one.
    assert fire(db, [task["id"]], [at_five], epoch=1, advance=False) == 1
    assert fire(db, [task["id"]], [at_five], epoch=2, advance=False) == 0
    assert fire(db, [task["id"]], [at_five, at_five], epoch=3) == 0
    [row] = executions(sql, task["id"])
    assert row["leader_epoch"] == 1  # the first insert won; later ones changed nothing
    assert fire(db, [task["id"], other["id"]], [at(10, 10), at(10, 10)], epoch=1) == 2
    assert fire_times(sql, task["id"]) == [at_five, at(10, 10)]
    assert fire_times(sql, other["id"]) == [at(10, 10)]
    row = task_row(sql, task["id"])
    assert (row["next_fire_at"], row["last_fire_at"]) == (at(11, 0), at(10, 10))


def test_a_fire_at_or_before_last_fire_at_is_never_made_again_after_it_left_the_hot_table(db, sql):
    """The fire's execution has finished (moved to history, so the live unique index no
    longer holds it): sent again, by a stale leader or anything else, it is not made."""
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    assert scheduler.tick(db, 1, at(10, 5)) == 1
    sql.execute(
        """WITH done AS (DELETE FROM pgsched.execution WHERE task_id = %s RETURNING *)
                   INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
                          trigger, priority, queue, params, attempt, max_attempts, created_at, finished_at)
                   SELECT id, tenant, task_id, scheduled_at, run_at, 'succeeded', trigger, priority, queue,
                          params, 1, max_attempts, created_at, now() FROM done""",
        [task["id"]],
    )
    assert (
        fire(db, [task["id"]], [at(10, 5)], epoch=2, advance=False) == 0
    )  # the scheduler skips it
    assert fire(db, [task["id"]], [at(10, 0), at(10, 5)], epoch=2, advance=False) == 0
    assert executions(sql, task["id"]) == []
    # any other INSERT of such a fire is refused by the database itself, whatever it names
    for extra, values in (
        ("", ""),
        (", created_at", ", now() - interval '1 microsecond'"),
        (", id", ", (SELECT id FROM pgsched.execution_history LIMIT 1)"),
    ):
        with pytest.raises(psycopg.errors.CheckViolation, match="already fired through"):
            sql.execute(
                f"""INSERT INTO pgsched.execution (task_id, scheduled_at, run_at, trigger{extra})
                            VALUES (%s, %s, %s, 'schedule'{values})""",
                [task["id"], at(10, 5), at(10, 5)],
            )
    # nor can an UPDATE make another execution that fire
    other = tasks.trigger(db, "five", run_at=at(10, 7))
    with pytest.raises(psycopg.errors.CheckViolation, match="already fired through"):
        sql.execute(
            "UPDATE pgsched.execution SET trigger = 'schedule', scheduled_at = %s WHERE id = %s",
            [at(10, 5), other],
        )
    sql.execute("DELETE FROM pgsched.execution WHERE id = %s", [other])
    # and the next fire is made as usual
    assert scheduler.tick(db, 1, at(10, 10)) == 1
    assert fire_times(sql, task["id"]) == [at(10, 10)]


def test_a_manual_run_at_a_fire_instant_does_not_swallow_the_fire(db, sql):
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    manual = tasks.trigger(db, "five", run_at=at(10, 5))
    assert scheduler.tick(db, 1, at(10, 5)) == 1
    rows = executions(sql, task["id"])
    assert sorted((r["trigger"], r["scheduled_at"]) for r in rows) == [
        ("manual", at(10, 5)),
        ("schedule", at(10, 5)),
    ]
    assert manual in {r["id"] for r in rows}


@pytest.mark.parametrize(("batch", "transactions"), [(1000, 1), (2, 3)])
def test_a_tick_notifies_once_per_transaction(db, sql, dsn, batch, transactions):
    for i in range(5):
        make_task(db, f"t{i}", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_execution")
        assert scheduler.tick(db, 1, at(10, 5), batch=batch) == 5
        assert notifications_until_marker(listener, sql) == ["default"] * transactions
        assert scheduler.tick(db, 1, at(10, 6), batch=batch) == 0  # nothing due: no notification
        assert notifications_until_marker(listener, sql) == []


def test_a_delete_that_waits_for_a_tick_drops_what_that_tick_inserted(db, dsn, sql):
    task = tasks.create(
        db, TaskSpec(name="racy", command="true", schedule_kind="cron", schedule="* * * * *")
    )
    tick = psycopg.connect(dsn)  # plays the tick: holds the task row and inserts its fire
    try:
        tick.execute("SELECT 1 FROM pgsched.task WHERE id = %s FOR UPDATE", (task["id"],))
        tick.execute(
            "INSERT INTO pgsched.execution (task_id, scheduled_at, run_at, trigger) "
            "VALUES (%s, now(), now(), 'schedule')",
            (task["id"],),
        )
        result: dict = {}
        deleting = threading.Thread(target=lambda: result.update(dropped=tasks.delete(db, "racy")))
        deleting.start()
        wait_until(
            lambda: sql.execute("SELECT count(*) AS n FROM pg_locks WHERE NOT granted").fetchone()[
                "n"
            ],
            message="the delete to wait for the tick's row lock",
        )
        tick.commit()
        deleting.join(10)
    finally:
        tick.close()
    assert result == {"dropped": 1}
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


@pytest.mark.clone("ticks from several threads at once")
def test_a_burst_is_fired_by_parallel_batches_each_task_exactly_once(db, sql):
    """2,500 tasks on three schedules due at once, batches of 200 on 3 connections: every
    task fires once, and tasks that share a schedule get the same next fire time."""
    due = at(9, 0)
    sql.execute(
        """INSERT INTO pgsched.task (name, schedule_kind, schedule_expr, timezone, handler_kind, command,
                                            next_fire_at)
                   SELECT 'burst-' || i, 'cron', (ARRAY['* * * * *', '*/5 * * * *', '0 * * * *'])[i %% 3 + 1],
                          (ARRAY['UTC', 'Europe/Berlin'])[i %% 2 + 1], 'shell', 'true', %s
                     FROM generate_series(1, 2500) i""",
        [due],
    )
    assert scheduler.tick(db, 3, at(9, 0, 1), batch=200, parallel=3) == 2500
    per_task = sql.execute(
        "SELECT task_id, count(*) AS n FROM pgsched.execution GROUP BY task_id"
    ).fetchall()
    assert len(per_task) == 2500 and {r["n"] for r in per_task} == {1}
    planned = sql.execute("""SELECT schedule_expr, array_agg(DISTINCT next_fire_at) AS nexts FROM pgsched.task
                              GROUP BY schedule_expr ORDER BY schedule_expr""").fetchall()
    assert [(r["schedule_expr"], r["nexts"]) for r in planned] == [
        ("* * * * *", [at(9, 1)]),
        ("*/5 * * * *", [at(9, 5)]),
        ("0 * * * *", [at(10, 0)]),
    ]
    assert scheduler.tick(db, 3, at(9, 0, 2), batch=200, parallel=3) == 0


@pytest.mark.clone("ticks from several threads at once")
def test_two_schedulers_catching_up_one_burst_at_once_make_each_fire_once(db, sql):
    """A leader failover mid-burst leaves the old leader's ticks running while the new one
    starts (both with parallel batches): 1,500 tasks that missed five fires each (misfire
    policy all), some paused meanwhile. Every (task, fire) is made exactly once, none of a
    task left unpaused is missing, and every task's next fire is the next minute."""
    sql.execute(
        """INSERT INTO pgsched.task (name, schedule_kind, schedule_expr, timezone, handler_kind, command,
                                            next_fire_at, misfire_policy)
                   SELECT 'burst-' || i, 'cron', '* * * * *', (ARRAY['UTC', 'America/New_York'])[i %% 2 + 1],
                          'shell', 'true', %s, 'all'
                     FROM generate_series(1, 1500) i""",
        [at(9, 0)],
    )
    now = at(9, 4, 30)
    counts: list[int] = []
    leaders = [
        threading.Thread(
            target=lambda epoch=epoch: counts.append(
                scheduler.tick(db, epoch, now, batch=100, parallel=2)
            )
        )
        for epoch in (3, 4)
    ]
    for t in leaders:
        t.start()
    paused = [f"burst-{i}" for i in range(1, 1501, 150)]
    for name in paused:
        tasks.pause(db, name)
    for t in leaders:
        t.join()
    fires = sql.execute("""SELECT t.name, count(*) AS n, count(DISTINCT e.scheduled_at) AS distinct_fires,
                                  min(e.scheduled_at) AS first, max(e.scheduled_at) AS last
                             FROM pgsched.execution e JOIN pgsched.task t ON t.id = e.task_id
                            GROUP BY t.name""").fetchall()
    by_name = {r["name"]: r for r in fires}
    assert all(r["n"] == r["distinct_fires"] for r in fires)  # no fire twice
    unpaused = {f"burst-{i}" for i in range(1, 1501)} - set(paused)
    assert {
        name: (r["n"], r["first"], r["last"]) for name, r in by_name.items() if name in unpaused
    } == {name: (5, at(9, 0), at(9, 4)) for name in unpaused}
    assert all(by_name[name]["n"] in (0, 5) for name in paused if name in by_name)
    assert sum(counts) >= sum(r["n"] for r in fires)  # a fire both made counts for each
    nexts = sql.execute(
        "SELECT array_agg(DISTINCT next_fire_at) AS n FROM pgsched.task WHERE enabled"
    ).fetchone()
    assert nexts["n"] == [at(9, 5)]


def test_groups_of_a_batch_fire_apart_and_a_group_whose_schedule_breaks_is_paused(db, sql, caplog):
    """One batch holding three groups (two schedules, one that cannot be computed): each
    task fires once; the broken group's tasks are paused after that fire, each named in the
    log; 25 tasks that missed fires (more than the batch query names) are each named too."""
    due = at(9, 0)
    sql.execute(
        """INSERT INTO pgsched.task (name, schedule_kind, schedule_expr, timezone, handler_kind, command,
                                            next_fire_at, misfire_policy)
                   SELECT 'late-' || i, 'cron', '*/5 * * * *', 'UTC', 'shell', 'true', %s, 'once'
                     FROM generate_series(1, 25) i
                   UNION ALL
                   SELECT 'hourly-' || i, 'cron', '0 * * * *', 'UTC', 'shell', 'true', %s, 'once'
                     FROM generate_series(1, 3) i
                   UNION ALL
                   SELECT 'broken-' || i, 'cron', 'not a cron', 'UTC', 'shell', 'true', %s, 'once'
                     FROM generate_series(1, 2) i""",
        [at(8, 45), due, due],
    )
    assert scheduler.tick(db, 1, at(9, 0, 30)) == 30
    per_task = sql.execute("""SELECT t.name, count(e.id) AS n, min(e.scheduled_at) AS fire, t.enabled, t.next_fire_at,
                                     t.missed_fires
                                FROM pgsched.task t LEFT JOIN pgsched.execution e ON e.task_id = t.id
                               GROUP BY t.id ORDER BY t.name""").fetchall()
    assert {
        r["name"]: (r["n"], r["fire"], r["enabled"], r["next_fire_at"], r["missed_fires"])
        for r in per_task
    } == {
        **{f"late-{i}": (1, at(9, 0), True, at(9, 5), 3) for i in range(1, 26)},
        **{f"hourly-{i}": (1, due, True, at(10, 0), 0) for i in range(1, 4)},
        **{f"broken-{i}": (1, due, False, None, 0) for i in range(1, 3)},
    }
    warned = [r.getMessage() for r in caplog.records if "missed fire(s) not run" in r.getMessage()]
    assert sorted(warned) == sorted(
        f"task late-{i}: 3 missed fire(s) not run (misfire policy once)" for i in range(1, 26)
    )
    paused = [
        r.getMessage() for r in caplog.records if "cannot compute its next fire" in r.getMessage()
    ]
    assert [m.split(":")[0] for m in sorted(paused)] == ["task broken-1", "task broken-2"]
    assert scheduler.tick(db, 1, at(9, 0, 31)) == 0


@pytest.mark.clone("the check runs at commit")
def test_a_dead_scheduled_fire_retried_from_the_dead_letter_queue_runs_again(db, sql):
    """dlq_retry_v1 puts a dead execution back under its own id and instant: the same fire
    run again on request, which the watermark lets through."""
    task = make_task(db, "five", schedule_kind="cron", schedule="*/5 * * * *", now=at(10, 2))
    assert scheduler.tick(db, 1, at(10, 5)) == 1
    [row] = executions(sql, task["id"])
    sql.execute(
        """WITH done AS (DELETE FROM pgsched.execution WHERE id = %s RETURNING *)
                   INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
                          trigger, priority, queue, params, attempt, max_attempts, created_at, finished_at)
                   SELECT id, tenant, task_id, scheduled_at, run_at, 'dead', trigger, priority, queue,
                          params, 1, max_attempts, created_at, now() FROM done""",
        [row["id"]],
    )
    assert task_row(sql, task["id"])["last_fire_at"] == at(10, 5)
    # a copy of the dead row, the dead one kept for a retry, would run the fire twice: refused at commit
    with pytest.raises(psycopg.errors.CheckViolation, match="still in the dead-letter queue"):
        sql.execute(
            """INSERT INTO pgsched.execution (id, tenant, task_id, scheduled_at, run_at, trigger,
                              priority, queue, params, max_attempts, created_at)
                       SELECT id, tenant, task_id, scheduled_at, now(), trigger, priority, queue, params,
                              max_attempts, created_at FROM pgsched.execution_history WHERE id = %s""",
            [row["id"]],
        )
    with pytest.raises(
        psycopg.errors.CheckViolation, match="already fired through"
    ):  # a copy dated now, at once
        sql.execute(
            """INSERT INTO pgsched.execution (id, tenant, task_id, scheduled_at, run_at, trigger,
                              priority, queue, params, max_attempts)
                       SELECT id, tenant, task_id, scheduled_at, now(), trigger, priority, queue, params,
                              max_attempts FROM pgsched.execution_history WHERE id = %s""",
            [row["id"]],
        )
    assert executions(sql, task["id"]) == []
    sql.execute("SELECT pgsched.dlq_retry_v1(%s)", [row["id"]])
    [again] = executions(sql, task["id"])
    assert (again["id"], again["scheduled_at"], again["state"]) == (row["id"], at(10, 5), "pending")
