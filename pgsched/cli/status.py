"""``pgsched status``: the leader, the workers (their queues and tenants), the queue depth
of each tenant's queues, the paused queues and the tenants at a quota, partition health,
clock offsets and old snapshots: what spans every tenant (an instance operator's view)."""

from __future__ import annotations

import click

from .. import health
from ..db import Database
from ..stores import limits
from .output import fmt, print_json, table
from .root import Context, main, pass_ctx


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def status(c: Context, as_json: bool) -> None:
    """Leader, workers, queue depth and partition health."""

    db = c.db()
    leader = db.one("scheduler_leader")
    standbys = db.many("scheduler_standbys", seconds=10.0)
    workers = db.many("worker_list", all=False)
    queues = db.many("execution_queue_depth")
    strays = {k: v for k, v in (db.one("partition_default_rows") or {}).items() if v}
    partitions = db.one("partition_summary") or {}
    checked = health.check(db)
    unserved = _unserved(workers, queues)
    paused, at_quota = _limits(db)
    if as_json:
        print_json(
            {
                "leader": leader,
                "standbys": standbys,
                "workers": workers,
                "queues": queues,
                "unserved_queues": [{"tenant": t, "queue": q} for t, q in unserved],
                "paused_queues": paused,
                "tenants_at_quota": at_quota,
                "partitions": partitions,
                "default_partition_rows": strays,
                **checked.as_dict(),
            }
        )
        return
    if leader and leader["lock_held"]:
        age = leader["heartbeat_age_seconds"]
        click.echo(
            f"leader: {leader['holder']} (term {leader['epoch']}, since {fmt(leader['elected_at'])}, "
            f"last tick {fmt(leader['last_tick_at'])}"
            + (f", heartbeat {age:.1f}s ago" if age is not None else "")
            + ")"
            + (
                "  (silent: it may be hung; standbys take over after --leader-timeout)"
                if age is not None and age > 5
                else ""
            )
        )
    else:
        click.echo("leader: none (no scheduler is running)")
    click.echo(
        f"standby schedulers: {len(standbys)}"
        + "".join(f"\n  {s['name']} (seen {s['seen_seconds_ago']:.1f}s ago)" for s in standbys)
    )
    silent = sum(1 for w in workers if w["presumed_dead"])
    click.echo(
        f"workers: {len(workers) - silent} running"
        + (f", {silent} presumed dead" if silent else "")
    )
    for w in workers:
        click.echo(
            f"  {w['id']} {w['name']} queues={','.join(w['queues'])} "
            f"tenants={'(all)' if w['tenants'] is None else ','.join(w['tenants'])} "
            f"running={w['running']}/"
            f"{w['concurrency']} heartbeat {w['heartbeat_age_seconds']:.1f}s ago"
            + ("  (silent for 3 heartbeats: presumed dead)" if w["presumed_dead"] else "")
            + (
                f"  (claimer stalled for {w['claimer_stalled_seconds']:.0f}s: its queues are not served)"
                if w["claimer_stalled_since"] is not None
                else ""
            )
        )
    if queues:
        click.echo("queues:")
        table(queues, ["tenant", "queue", "ready", "scheduled", "running"])
    else:
        click.echo("queues: empty")
    for t, q in unserved:
        click.echo(
            f"warning: queue {q!r} of tenant {t!r} has ready executions and no running worker "
            f"serves it (pgsched --tenant {t} worker --queue {q})"
        )
    _print_limits(paused, at_quota)
    if partitions.get("daily"):
        click.echo(
            f"history partitions: {partitions['daily']} daily, {partitions['first_day']} to "
            f"{partitions['last_day']} (UTC); DEFAULT partitions "
            + ("NOT empty" if strays else "empty")
        )
    else:
        click.echo("history partitions: none yet (the leader creates them)")
    if strays:
        click.echo(f"warning: rows outside every daily partition: {strays}")
    _print_health(checked)


def _unserved(workers: list[dict], queues: list[dict]) -> list[tuple[str, str]]:
    """(tenant, queue) of ``queues`` (execution_queue_depth rows) with ready executions that
    no live worker of ``workers`` (worker_list rows; tenants None: every tenant) serves."""

    def served(w: dict, tenant: str, queue: str) -> bool:
        return (
            not w["presumed_dead"]
            and queue in w["queues"]
            and (w["tenants"] is None or tenant in w["tenants"])
        )

    return [
        (q["tenant"], q["queue"])
        for q in queues
        if q["ready"] and not any(served(w, q["tenant"], q["queue"]) for w in workers)
    ]


def _limits(db: Database) -> tuple[list[dict], list[dict]]:
    """The paused queues (of every tenant the login sees) and the tenants a quota holds
    now (docs/limits.md)."""
    return limits.paused_queues(db), limits.tenants_at_quota(db)


def _print_limits(paused: list[dict], at_quota: list[dict]) -> None:
    for q in paused:
        click.echo(
            f"queue {q['name']!r} of tenant {q['tenant']!r} is paused since {fmt(q['paused_at'])} "
            f"by {q['paused_by']}"
            + (f": {q['pause_reason']}" if q["pause_reason"] else "")
            + f" ({q['ready']} ready wait; pgsched --tenant {q['tenant']} queue resume {q['name']})"
        )
    quotas = {
        "max_running": lambda t: f"runs {t['running']} of its {t['max_running']} at once",
        "max_starts_per_hour": lambda t: (
            f"started {t['hour_starts']} of its {t['max_starts_per_hour']} this hour (UTC)"
        ),
        "compute_minutes": lambda t: "is at or over its quota of compute minutes this month",
        "log_bytes": lambda t: "is at or over its quota of stored log bytes",
    }
    for t in at_quota:
        said = "; ".join(quotas[a](t) if a in quotas else f"is at {a}" for a in t["at"])
        click.echo(f"tenant {t['tenant']!r} {said}: its work waits (pgsched tenant quota show)")


def _print_health(h: health.Health) -> None:
    """The clock offsets of the live processes, the oldest snapshot, and their warnings."""
    click.echo(
        f"clock offsets (host - database; warning above {h.clock_offset_warn_seconds:g} s):"
        + ("" if h.clock_offsets else " no live process")
    )
    for c in h.clock_offsets:
        offset = "not measured yet" if c.offset_seconds is None else f"{c.offset_seconds:+.3f} s"
        trip = (
            f"  (round trip {c.round_trip_seconds * 1000:.1f} ms)"
            if c.round_trip_seconds is not None
            else ""
        )
        click.echo(f"  {c.label} on {c.hostname}: {offset}{trip}" + ("  WARNING" if c.warn else ""))
    old = h.oldest_snapshot
    if old is None:
        click.echo("oldest snapshot: none holds back the cleanup of dead rows")
    else:
        age = f"{old.age_seconds:.1f} s old, " if old.age_seconds is not None else ""
        since = f" since {fmt(old.since)}" if old.since else ""
        state = f", {old.state}" if old.kind == "session" and old.state else ""
        click.echo(
            f"oldest snapshot: {age}{old.xid_age} transactions behind, held by {old.label}{state}{since} "
            f"(warning above {h.snapshot_age_warn_seconds:g} s)"
        )
    for w in h.warnings:
        click.echo(f"warning: {w['message']}")
