"""Missed fires: exact counts over any span (Schedule.walk, cron.walk) and what each misfire
policy runs (pgsched.scheduler.catch_up), against a plain fire-by-fire walk as the oracle."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest

from pgsched import cron
from pgsched.schedule import Schedule
from pgsched.scheduler.catch_up import Misfire, catch_up

from ..helpers import utc

EXPRESSIONS = [
    "* * * * *",
    "*/7 2-5 * * *",
    "0 0 * * *",
    "30 2 * * *",
    "0 */3 * * 1-5",
    "15 1,2,3 L * *",
    "0 0 29 2 *",
    "5 4 * * sun",
    "*/20 * * * * *",
    "0 9 1W * *",
    "0 0 * * 5#2",
    "@hourly",
    "@daily",
    "0,30 * 1-7 * mon",
    "59 23 31 12 *",
]
ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "Asia/Kathmandu",
]


def one_by_one(
    schedule: Schedule, after: datetime, until: datetime
) -> tuple[int, datetime | None, datetime | None]:
    count, latest, at = 0, None, after
    while (nxt := schedule.next_after(at)) is not None and nxt <= until:
        count, latest, at = count + 1, nxt, nxt
    return count, latest, nxt


@pytest.mark.parametrize("seed", range(8))
def test_walk_counts_what_a_fire_by_fire_walk_counts(seed):
    """Spans from a minute to a month, over clock changes (Berlin, New York, Lord Howe's
    half-hour change) and odd offsets (Kathmandu's +5:45)."""
    rng = random.Random(seed)
    for _ in range(12):
        expr, tz = rng.choice(EXPRESSIONS), rng.choice(ZONES)
        after = utc(2025, 1, 1) + timedelta(seconds=rng.randint(0, 2 * 366 * 86400))
        span = timedelta(seconds=rng.choice([59, 3600, 86400, 3 * 86400, 35 * 86400]))
        if expr.startswith("*/20") and span > timedelta(days=3):
            span = timedelta(days=3)  # the oracle walks every fire: keep it quick
        schedule = Schedule("cron", expr, tz)
        assert tuple(schedule.walk(after, after + span)) == one_by_one(
            schedule, after, after + span
        ), (expr, tz)


def test_walk_of_a_long_span_is_exact_without_walking_every_fire():
    """A per-minute job down for a year: 525,600 fires, counted exactly (a walk of every
    fire would take about a minute)."""
    start = utc(2025, 1, 1)
    fires, latest, nxt = cron.walk("* * * * *", "Europe/Berlin", start, start + timedelta(days=365))
    assert (fires, latest, nxt) == (
        365 * 1440,
        start + timedelta(days=365),
        start + timedelta(days=365, minutes=1),
    )
    # (Berlin's clocks changed twice that year: those days are walked fire by fire, 23 and
    # 25 hours of readings, and the total is still one a minute.) An interval, by arithmetic:
    every = Schedule("interval", "7", anchor=utc(2025, 1, 1))
    span = every.walk(utc(2025, 1, 1, 0, 0, 3), utc(2025, 1, 11, 0, 0, 3))
    assert span == (123429, utc(2025, 1, 11, 0, 0, 3), utc(2025, 1, 11, 0, 0, 10))


def minutely() -> tuple[Schedule, datetime, datetime]:
    # due at 10:01, the scheduler back at 10:11:30: fires 10:01 .. 10:11 are due
    return Schedule("cron", "* * * * *"), utc(2025, 1, 15, 10, 1), utc(2025, 1, 15, 10, 11, 30)


def test_once_runs_the_latest_missed_fire():
    schedule, due, now = minutely()
    decided = catch_up(schedule, "once", due, now, Misfire())
    assert decided == (
        [utc(2025, 1, 15, 10, 11)],
        utc(2025, 1, 15, 10, 12),
        10,
        utc(2025, 1, 15, 10, 11),
    )


def test_skip_runs_only_a_fire_on_time_and_counts_every_other():
    schedule, due, now = minutely()
    # 10:11 is 30 s late: within the 60 s grace it is on time, not missed
    assert catch_up(schedule, "skip", due, now, Misfire(grace=60)).run == [utc(2025, 1, 15, 10, 11)]
    late = catch_up(schedule, "skip", due, now, Misfire(grace=10))
    assert (late.run, late.missed, late.latest) == ([], 11, utc(2025, 1, 15, 10, 11))


def test_all_runs_every_due_fire_up_to_the_cap():
    schedule, due, now = minutely()
    every = catch_up(schedule, "all", due, now, Misfire(cap=100))
    assert every.run == [utc(2025, 1, 15, 10, m) for m in range(1, 12)] and every.missed == 0
    capped = catch_up(schedule, "all", due, now, Misfire(cap=3))
    assert (capped.run, capped.missed, capped.latest) == (
        [utc(2025, 1, 15, 10, m) for m in (1, 2, 3)],
        8,
        utc(2025, 1, 15, 10, 11),
    )


@pytest.mark.parametrize("policy", ["once", "skip", "all"])
def test_a_month_down_counts_every_missed_fire(policy):
    """30 days of a per-minute job: 43,200 due fires, counted exactly (the count once
    stopped at 1,000 and said "at least")."""
    due = utc(2025, 6, 1)
    decided = catch_up(
        Schedule("cron", "* * * * *", "America/New_York"),
        policy,
        due,
        due + timedelta(days=30, seconds=5),
        Misfire(cap=100),
    )
    assert decided.missed + len(decided.run) == 30 * 1440 + 1
    assert decided.latest == due + timedelta(days=30) and decided.next == due + timedelta(
        days=30, minutes=1
    )


def test_first_fire_never_at_or_before_the_last_fire():
    """A re-plan (an update, a resume) with the database's clock behind the last fire (it
    was set back), or a one-shot moved to an instant it already ran."""
    hourly = Schedule("cron", "0 * * * *")
    assert hourly.first_fire(utc(2025, 1, 15, 9, 30)) == utc(2025, 1, 15, 10)
    assert hourly.first_fire(utc(2025, 1, 15, 9, 30), utc(2025, 1, 15, 11)) == utc(2025, 1, 15, 12)
    once = Schedule("once", "2025-01-15T08:00:00Z")
    assert once.first_fire(utc(2025, 1, 15, 9)) == utc(
        2025, 1, 15, 8
    )  # past, never fired: runs at once
    assert once.first_fire(utc(2025, 1, 15, 9), utc(2025, 1, 15, 8)) is None
    assert once.first_fire(utc(2025, 1, 15, 9), utc(2025, 1, 15, 7)) == utc(2025, 1, 15, 8)


@pytest.mark.parametrize(
    ("expr", "tz", "after", "until"),
    [
        # the clocks jump from 23:00 to 00:00: the skipped 23:30 runs at the next day's midnight
        ("30 23 * * *", "America/Nuuk", utc(2026, 3, 25), utc(2026, 4, 2)),
        ("30 23 * * *", "America/Scoresbysund", utc(2025, 3, 20), utc(2025, 4, 5)),
        ("*/30 * * * *", "America/Nuuk", utc(2026, 3, 20), utc(2026, 4, 5)),
        (
            "30 0 * * *",
            "America/Nuuk",
            utc(2026, 10, 20),
            utc(2026, 11, 5),
        ),  # and when they fall back
        (
            "0 12 * * *",
            "Pacific/Apia",
            utc(2011, 12, 20),
            utc(2012, 1, 10),
        ),  # 30 December 2011 skipped whole
    ],
)
def test_walk_counts_the_fires_next_to_a_clock_change_at_midnight(expr, tz, after, until):
    schedule = Schedule("cron", expr, tz)
    assert tuple(schedule.walk(after, until)) == one_by_one(schedule, after, until)
    decided = catch_up(schedule, "all", schedule.next_after(after), until, Misfire(cap=1000))
    assert len(decided.run) + decided.missed == one_by_one(schedule, after, until)[0]  # none lost


def test_the_catch_up_module_is_pure():
    """Neither it nor any pgsched module it imports, however indirectly, imports psycopg
    or the database boundary (pgsched/__init__.py does, for the public API: not counted)."""
    import ast
    from pathlib import Path

    import pgsched

    root = Path(pgsched.__file__).parent
    seen, todo, outside = set(), [root / "scheduler" / "catch_up.py"], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                outside |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                outside.add((node.module or "").split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                names = [node.module] if node.module else [a.name for a in node.names]
                for name in names:
                    target = base.joinpath(*name.split("."))
                    todo += [
                        p for p in (target.with_suffix(".py"), target / "__init__.py") if p.exists()
                    ]
    found = {p.relative_to(root).as_posix() for p in seen}
    assert {"scheduler/catch_up.py", "schedule.py", "taskspec.py"} <= found
    assert not found & {"db.py", "queries.py", "clock.py", "scheduler/__init__.py"}, found
    assert all(
        p.startswith("cron/")
        or p
        in {
            "scheduler/catch_up.py",
            "errors.py",
            "schedule.py",
            "taskspec.py",
            "task_rows.py",  # schedule_of, and the spec a row was made from
            "task_kinds.py",
            "task_checks.py",
            "jsontext.py",
            "retry.py",
            "windows.py",  # taskspec's overlap and unique-window fields (pure)
            "limits.py",  # taskspec's limit fields (pure)
        }
        for p in found
    ), found
    assert not outside & {"psycopg", "psycopg_pool", "pgsched"}
