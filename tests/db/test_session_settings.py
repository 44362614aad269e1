"""pgsched sets what its sessions need, whatever the server or database was set to: a
database whose DateStyle is not ISO (which psycopg cannot parse) or whose time zone is
far from UTC works the same."""

from __future__ import annotations

from datetime import UTC

from pgsched.db import Database, connect
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec


def test_a_database_set_to_another_datestyle_and_time_zone_works(dsn, sql):
    name = sql.execute("SELECT current_database() AS d").fetchone()["d"]
    sql.execute(f"ALTER DATABASE {name} SET DateStyle = 'SQL, DMY'")
    sql.execute(f"ALTER DATABASE {name} SET TimeZone = 'Asia/Kolkata'")
    db = Database.connect(dsn)
    try:
        row = tasks.create(
            db, TaskSpec(name="daily", command="true", schedule_kind="cron", schedule="0 9 * * *")
        )
        assert row is not None and row["next_fire_at"].tzinfo is not None
        assert tasks.get(db, "daily")["next_fire_at"] == row["next_fire_at"]
        assert db.now().utcoffset() == UTC.utcoffset(None)
    finally:
        db.close()
    with connect(dsn) as conn:  # the dedicated connections (listener, leader lock, migrations)
        assert conn.execute("SELECT now() AS now").fetchone()["now"].utcoffset() == UTC.utcoffset(
            None
        )
