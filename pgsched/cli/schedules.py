"""``pgsched cron next`` (no database needed) and ``pgsched task next``: upcoming fire
times in UTC and in the schedule's zone."""

from __future__ import annotations

from datetime import datetime

import click

from .. import task_rows
from ..clock import HostClock, ServerClock
from ..schedule import Schedule, zone
from ..stores import tasks
from .output import fmt, parse_when, print_json
from .root import Context, main, pass_ctx
from .tasks import task


def _show(schedule: Schedule, after: datetime, count: int, as_json: bool) -> None:
    fires = schedule.upcoming(after, count)
    local = zone(schedule.tz)
    rows = [{"utc": t, "local": t.astimezone(local)} for t in fires]
    if as_json:
        print_json({"timezone": schedule.tz, "after": after, "fires": rows})
        return
    if not rows:
        click.echo(f"no fire times after {fmt(after)}")
    for row in rows:
        click.echo(f"{fmt(row['utc'])}   {row['local'].isoformat()} {schedule.tz}")


@main.group()
def cron() -> None:
    """Work with cron expressions (no database needed)."""


@cron.command("next")
@click.argument("expression")
@click.option(
    "--tz", "tz", default="UTC", show_default=True, help="IANA time zone the expression is read in."
)
@click.option(
    "--after", help="Start after this instant (ISO 8601; without an offset: in --tz). Default: now."
)
@click.option(
    "-n", "count", default=5, show_default=True, type=click.IntRange(1, 1000), help="How many."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def cron_next(expression: str, tz: str, after: str | None, count: int, as_json: bool) -> None:
    """The next fire times of EXPRESSION (5 fields, 6 with a leading second, or @daily…),
    in UTC and in --tz. The day fields also take Quartz's L, LW, L-n, dW, wL and w#k
    (e.g. '0 9 LW * *', '0 9 * * fri#3'); syntax and DST rules: docs/cron.md."""
    schedule = Schedule.parse("cron", expression, tz)
    # no database here (a preview of an expression): "now" is this host's clock
    host = HostClock()
    start = parse_when(after, "after", tz, now=host.now) or host.now()
    _show(schedule, start, count, as_json)


@task.command("next")
@click.argument("name")
@click.option(
    "--after", help="Start after this instant (ISO 8601; without an offset: in the task's zone)."
)
@click.option(
    "-n", "count", default=5, show_default=True, type=click.IntRange(1, 1000), help="How many."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def task_next(c: Context, name: str, after: str | None, count: int, as_json: bool) -> None:
    """The next fire times of stored task NAME, in UTC and in its zone."""
    schedule = task_rows.schedule_of(tasks.get(c.db(), name, c.tenant))
    clock = ServerClock(c.db())
    start = parse_when(after, "after", schedule.tz, now=clock.now) or clock.now()
    _show(schedule, start, count, as_json)
