"""Commands that run or inspect processes: migrate, scheduler, worker, dev, status."""

from __future__ import annotations

import click

from .. import health
from .. import migrate as migrations
from .output import fmt, print_json, table
from .root import Context, Seconds, log_options, main, pass_ctx

# --- processes ----------------------------------------------------------------------------


@main.command()
@click.option(
    "--status", "show_status", is_flag=True, help="Only show applied and pending migrations."
)
@pass_ctx
def migrate(c: Context, show_status: bool) -> None:
    """Create or upgrade the pgsched schema (safe to run from many processes at once)."""
    if show_status:
        db = c.db(check_schema=False)
        with db.transaction() as tx:
            st = migrations.status(tx)
        click.echo(
            f"applied: {st.applied or 'none'}  pending: {st.pending or 'none'}"
            + (f"  unknown (newer): {st.ahead}" if st.ahead else "")
        )
        return
    applied = migrations.migrate(c.dsn)
    if applied:
        for m in applied:
            click.echo(f"applied {m.version:04d}_{m.name}")
    else:
        click.echo("schema is up to date")


@main.command()
@log_options
@click.option(
    "--batch",
    default=1000,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Tasks fired per transaction.",
)
@click.option(
    "--max-sleep",
    default=5.0,
    show_default=True,
    type=Seconds(0.01, 3600),
    help="Longest sleep between ticks (seconds).",
)
@click.option(
    "--retention-days",
    default=30,
    show_default=True,
    type=click.IntRange(1, 36_500),
    help="Days of execution history kept (at least 1).",
)
@click.option(
    "--premake-days",
    default=3,
    show_default=True,
    type=click.IntRange(1, 60),
    help="Days of partitions created ahead.",
)
@click.option(
    "--leader-timeout",
    default=10.0,
    show_default=True,
    type=Seconds(2, 3600),
    help="Seconds a leader may go without heartbeating (it does every second) before a standby "
    "ends its session and takes over: a hung leader, not a dead one (that takes about 1 s).",
)
@click.option(
    "--observe-interval",
    default=60.0,
    show_default=True,
    type=Seconds(0.5, 3600),
    help="How often the leader rolls up statistics and looks for alerts (seconds).",
)
@pass_ctx
def scheduler(
    c: Context,
    batch: int,
    max_sleep: float,
    retention_days: int,
    premake_days: int,
    leader_timeout: float,
    observe_interval: float,
) -> None:
    """Run a scheduler: fires due tasks while it is leader, stands by otherwise."""
    from ..node import SchedulerSettings, run_scheduler

    run_scheduler(
        c,
        SchedulerSettings(
            batch=batch,
            max_sleep=max_sleep,
            retention_days=retention_days,
            premake_days=premake_days,
            leader_timeout=leader_timeout,
            observe_interval=observe_interval,
        ),
    )


@main.command()
@log_options
@click.option(
    "--queue",
    "-q",
    "queues",
    multiple=True,
    default=["default"],
    show_default=True,
    help="Queue to serve (repeat for several).",
)
@click.option(
    "--concurrency",
    "-c",
    default=4,
    show_default=True,
    type=click.IntRange(1, 1024),
    help="Executions run at once.",
)
@click.option(
    "--poll-interval",
    default=2.0,
    show_default=True,
    type=Seconds(0.05, 3600),
    help="Seconds between polls (besides LISTEN).",
)
@click.option(
    "--heartbeat-interval",
    default=5.0,
    show_default=True,
    type=Seconds(0.5, 3600),
    help="Seconds between heartbeats; the leader declares a worker silent for 3 of them dead "
    "and runs its executions elsewhere, so keep it well above the longest stall you expect.",
)
@click.option(
    "--kill-grace",
    default=5.0,
    show_default=True,
    type=Seconds(0, 3600),
    help="Seconds between SIGTERM and SIGKILL when a command times out.",
)
@click.option(
    "--shutdown-timeout",
    default=30.0,
    show_default=True,
    type=Seconds(0, 86400),
    help="Seconds running executions get to finish on SIGTERM before they are handed back.",
)
@click.option(
    "--pythonpath",
    "pythonpath",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Folder to import Python tasks from (repeat; the current folder is always searched).",
)
@click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE at start; when given, Python tasks come only from these modules "
    "(and their submodules). Repeat for several.",
)
@click.option(
    "--max-output-lines",
    default=10_000,
    show_default=True,
    type=click.IntRange(1, 10_000_000),
    help="Output lines stored per attempt; the rest is counted, not stored.",
)
@click.option(
    "--max-output-bytes",
    default=10 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(1024, 1024**3),
    help="Output bytes stored per attempt.",
)
@click.option(
    "--prefetch",
    default=100,
    show_default=True,
    type=click.IntRange(0, 10_000),
    help="Executions claimed at most ahead of the free slots, so that a slot never waits for a "
    "claim; only while handlers are short (a claimed execution waits about 50 ms for its "
    "slot, on average). 0: claim only for free slots.",
)
@click.option(
    "--statement-deadline",
    default=30.0,
    show_default=True,
    type=Seconds(0, 3600),
    help="Seconds a statement of the worker (a claim, a heartbeat, the end of an attempt) may go "
    "without a reply before its connection is shut down and opened again: a connection gone "
    "silent (a proxy that stopped forwarding) must not block the worker. Raised to 5 s past the "
    "server's statement_timeout, which fires first; heartbeats get at most one interval. A "
    "claimer that goes round its loop for none of 3 poll intervals plus this (at least 10 s) is "
    "reported (pgsched status), its connection cut, and if it is still stuck that long again "
    "the worker exits with status 70 for its supervisor to restart it. 0: no deadline.",
)
@pass_ctx
def worker(
    c: Context,
    queues: tuple[str, ...],
    concurrency: int,
    poll_interval: float,
    heartbeat_interval: float,
    kill_grace: float,
    shutdown_timeout: float,
    max_output_lines: int,
    max_output_bytes: int,
    pythonpath: tuple[str, ...],
    imports: tuple[str, ...],
    prefetch: int,
    statement_deadline: float,
) -> None:
    """Run a worker: claims and runs executions from its queues. Python tasks
    ('module:function') are imported from the current folder, --pythonpath folders and
    PYTHONPATH."""
    from ..node import WorkerSettings, run_worker

    run_worker(
        c,
        WorkerSettings(
            queues=queues,
            concurrency=concurrency,
            poll_interval=poll_interval,
            heartbeat_interval=heartbeat_interval,
            kill_grace=kill_grace,
            shutdown_timeout=shutdown_timeout,
            max_output_lines=max_output_lines,
            max_output_bytes=max_output_bytes,
            pythonpath=pythonpath,
            imports=imports,
            prefetch=prefetch,
            statement_deadline=statement_deadline,
        ),
    )


@main.command()
@log_options
@click.option(
    "--examples/--no-examples", default=True, show_default=True, help="Load the example tasks."
)
@click.option("--concurrency", default=4, show_default=True)
@click.option("--web/--no-web", default=True, show_default=True, help="Run the web admin too.")
@click.option(
    "--web-port",
    default=8080,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="Port of the web admin (or the next free one), on 127.0.0.1.",
)
@click.pass_context
def dev(ctx: click.Context, examples: bool, concurrency: int, web: bool, web_port: int) -> None:
    """Everything in one process for a first look: embedded PostgreSQL (unless --dsn or
    PGSCHED_DSN), migrations, the example tasks and DAGs, a scheduler and a worker (queues
    default and examples), and the web admin on 127.0.0.1 with a sign-in link printed.
    Ctrl-C stops.

    The embedded data lives in ~/.local/share/pgsched/pgdata, or $PGSCHED_HOME/pgdata, and
    is reused next time; other pgsched commands with the same PGSCHED_HOME use it too. The
    example tasks stay there and fire whenever a scheduler runs: delete them (pgsched task
    delete) or the data folder to start clean."""
    from ..node import DevSettings, run_dev

    run_dev(
        ctx.obj, DevSettings(examples=examples, concurrency=concurrency, web=web, web_port=web_port)
    )


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def status(c: Context, as_json: bool) -> None:
    """Leader, workers, queue depth and partition health."""
    from ..scheduler import LEADER_LOCK_KEY

    db = c.db()
    leader = db.one("scheduler_leader", key=LEADER_LOCK_KEY)
    standbys = db.many("scheduler_standbys", seconds=10.0)
    workers = db.many("worker_list", all=False)
    queues = db.many("execution_queue_depth")
    strays = {k: v for k, v in (db.one("partition_default_rows") or {}).items() if v}
    partitions = db.one("partition_summary") or {}
    checked = health.check(db)
    if as_json:
        served = {q for w in workers if not w["presumed_dead"] for q in w["queues"]}
        print_json(
            {
                "leader": leader,
                "standbys": standbys,
                "workers": workers,
                "queues": queues,
                "unserved_queues": [
                    q["queue"] for q in queues if q["ready"] and q["queue"] not in served
                ],
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
            f"  {w['id']} {w['name']} queues={','.join(w['queues'])} running={w['running']}/"
            f"{w['concurrency']} heartbeat {w['heartbeat_age_seconds']:.1f}s ago"
            + ("  (silent for 3 heartbeats: presumed dead)" if w["presumed_dead"] else "")
            + (
                f"  (claimer stalled for {w['claimer_stalled_seconds']:.0f}s: its queues are not served)"
                if w["claimer_stalled_since"] is not None
                else ""
            )
        )
    served = {q for w in workers if not w["presumed_dead"] for q in w["queues"]}
    unserved = [q["queue"] for q in queues if q["ready"] and q["queue"] not in served]
    if queues:
        click.echo("queues:")
        table(queues, ["queue", "ready", "scheduled", "running"])
    else:
        click.echo("queues: empty")
    for q in unserved:
        click.echo(
            f"warning: queue {q!r} has ready executions and no running worker serves it "
            f"(pgsched worker --queue {q})"
        )
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
