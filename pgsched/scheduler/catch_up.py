"""What a due task fires at a tick: the misfire policies and the plan of a schedule. Pure:
no database (the tick, :mod:`pgsched.scheduler.tick`, reads the settings and the due tasks
and hands them here); tests/unit/test_catch_up.py checks it against a fire-by-fire walk."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from ..errors import PgschedError
from ..schedule import Schedule
from ..task_rows import schedule_of


@dataclass(frozen=True)
class Misfire:
    """How missed fires are handled (the ``setting`` table): ``grace`` seconds late before
    a fire counts as missed (policy ``skip``); ``cap``: most catch-up runs per task (policy
    ``all``)."""

    grace: float = 60.0
    cap: int = 100

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> Misfire:
        """From the ``setting`` rows as name → value (``misfire_grace_seconds``,
        ``misfire_all_cap``; the defaults for those absent)."""
        return cls(
            float(settings.get("misfire_grace_seconds", 60)),
            int(settings.get("misfire_all_cap", 100)),
        )


class CatchUp(NamedTuple):
    """What a due task does at a tick (:func:`catch_up`): the fire times to ``run`` now,
    its ``next`` fire time (after now; None: never again), how many due fires are
    ``missed`` and not run, and the ``latest`` due fire, which becomes its ``last_fire_at``
    (no fire at or before it is ever created again: migration 0010)."""

    run: list[datetime]
    next: datetime | None
    missed: int
    latest: datetime


def catch_up(
    schedule: Schedule, policy: str, due_at: datetime, now: datetime, misfire: Misfire
) -> CatchUp:
    """For a task due at ``due_at`` (UTC) and ticked at the database's ``now``: which of
    its due fires (``due_at`` and every fire after it up to ``now``) run.

    Policies (the field's: APScheduler's coalesce, Quartz's misfire instructions):
    ``once`` runs one, for the latest due fire (Quartz's fire-once-now, APScheduler's
    coalesce); ``skip`` runs only a fire that is on time, i.e. the latest due fire when it
    is at most ``misfire.grace`` seconds late, and nothing else; ``all`` runs every due
    fire, at most ``misfire.cap`` of them (the earliest). Every due fire not run counts as
    missed, however many: the count is exact (:meth:`Schedule.walk`).
    """
    span = schedule.walk(due_at, now)
    due, latest = 1 + span.fires, span.latest or due_at
    if policy == "all":
        run, at = [due_at], due_at
        while len(run) < min(misfire.cap, due) and (nxt := schedule.next_after(at)) is not None:
            run.append(nxt)
            at = nxt
    elif policy == "skip":
        run = [latest] if (now - latest).total_seconds() <= misfire.grace else []
    else:
        run = [latest]
    return CatchUp(run, span.next, due - len(run), latest)


def plan(
    row: Mapping[str, Any], compute: Callable[[Schedule], datetime | None]
) -> tuple[datetime | None, str | None]:
    """``compute(schedule)`` for one task; (None, reason) when it cannot be computed or a
    cron/interval schedule has no next fire (the task is then paused, not retried forever,
    and the reason is stored on it: ``task.pause_reason``)."""
    try:
        nxt = compute(schedule_of(row))
    except PgschedError as exc:  # a stored time zone the tz database has dropped: names the field
        return None, str(exc)
    except Exception as exc:  # one task's bad data must not stop every other task
        return None, f"{type(exc).__name__}: {exc}"
    if nxt is None and row["schedule_kind"] in ("cron", "interval"):
        return None, "the schedule has no next fire time"
    return nxt, None


_MEMO_SIZE = 10_000


class Memo:
    """Tasks that share a schedule share its fire times: computed once per tick (a burst
    of 100,000 tasks on a few expressions is a few computations, not 100,000). Shared by
    the tick's threads (a lost race computes a value twice, the same value)."""

    def __init__(self, now: datetime):
        self.now = now
        self.planned: dict[tuple, CatchUp] = {}
        self.firsts: dict[tuple, datetime | None] = {}

    def first(self, s: Schedule, fired_through: datetime | None) -> datetime | None:
        """:meth:`Schedule.first_fire` at this tick's ``now``, for a task that last fired
        at ``fired_through``."""
        key = (s.kind, s.expr, s.tz, s.anchor)
        if key not in self.firsts:
            if len(self.firsts) >= _MEMO_SIZE:
                self.firsts.clear()
            self.firsts[key] = s.first_fire(self.now)
        first = self.firsts[key]
        if first is not None and fired_through is not None and first <= fired_through:
            return s.first_fire(self.now, fired_through)  # not shared: rare (a resumed task)
        return first

    def catch_up(self, s: Schedule, policy: str, due_at: datetime, misfire: Misfire) -> CatchUp:
        """:func:`catch_up` at this tick's ``now``, computed once per schedule, policy and
        due time."""
        key = (s.kind, s.expr, s.tz, s.anchor, policy, due_at)
        found = self.planned.get(key)
        if found is None:
            if len(self.planned) >= _MEMO_SIZE:  # all different: memory stays flat
                self.planned.clear()
            found = self.planned[key] = catch_up(s, policy, due_at, self.now, misfire)
        return found
