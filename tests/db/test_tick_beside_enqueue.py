"""A tick fires a due task while an application's open transaction holds a run of it
(``scheduler_due_groups``): an enqueue's INSERT locks the task's row FOR KEY SHARE (the
execution's foreign key) until that transaction ends, and the tick's FOR UPDATE SKIP
LOCKED passed the task over, so a long application transaction that enqueued a run of a
cron task held back that task's fires, and the leader, finding it still due, ticked again
at once, over and over. The tick now locks FOR NO KEY UPDATE (its writes change no key),
which such an enqueue does not block; a task's edit or delete (FOR UPDATE) still does."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
from psycopg.rows import dict_row

from pgsched import scheduler
from pgsched.db import Database

from ..factories import make_task


def test_a_tick_fires_a_task_an_open_transaction_enqueued_a_run_of(dsn, sql):
    db = Database.connect(dsn, max_size=4)
    try:
        now = sql.execute("SELECT date_trunc('minute', now()) AS t").fetchone()["t"]
        task = make_task(db, "nightly", schedule_kind="cron", schedule="* * * * *", now=now)
        fire_at = now + timedelta(minutes=1)
        app = psycopg.connect(dsn, row_factory=dict_row)  # a transaction, not autocommit
        try:
            app.execute("SELECT pgsched.enqueue_v1('nightly')")
            ticked: list[int] = []
            started = time.monotonic()
            thread = threading.Thread(
                target=lambda: ticked.append(scheduler.tick(db, None, fire_at)), daemon=True
            )
            thread.start()
            thread.join(10)
            assert not thread.is_alive() and time.monotonic() - started < 5
            row = sql.execute(
                "SELECT next_fire_at, (SELECT count(*) FROM pgsched.execution e "
                "WHERE e.task_id = t.id AND e.scheduled_at = %s AND e.trigger = 'schedule') AS n "
                "FROM pgsched.task t WHERE t.id = %s",
                [fire_at, task["id"]],
            ).fetchone()
            assert ticked == [1] and row["n"] == 1, (ticked, row)
            assert row["next_fire_at"] == fire_at + timedelta(minutes=1)
        finally:
            app.commit()
            app.close()
        assert scheduler.tick(db, None, fire_at) == 0  # fired once, not again
    finally:
        db.close()
