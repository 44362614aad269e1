"""``pgsched dag …``: DAG definitions and runs."""

from __future__ import annotations

import zoneinfo
from typing import Any

import click

from .. import dag as dag_module
from .. import task_rows
from ..errors import PgschedError
from ..lifecycle import RUN_FINAL_STATES, RUN_OPEN_STATES
from ..stores import dagruns, dags
from .output import fmt, parse_json_object, print_fields, print_json, table
from .root import Context, main, pass_ctx

STATE_MARKS = {"failed": "FAILED"}  # the state names, a failure in capitals to stand out


@main.group()
def dag() -> None:
    """DAGs: workflows of dependent tasks, defined in YAML or JSON (examples/dags/).

    \b
    pgsched dag apply examples/dags/etl.yaml
    pgsched dag trigger nightly-etl
    pgsched dag run show RUN_ID
    """


@dag.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def dag_validate(file: str, as_json: bool) -> None:
    """Check a DAG definition without a database: every error names the node, the field and
    the line (unknown dependency, duplicate id, handler, trigger rule, condition, cycles
    with their path). Prints the order the nodes can run in, level by level."""
    d = dag_module.load(file)
    edges = sum(len(n.depends_on) for n in d.nodes.values())
    if as_json:
        print_json(
            {
                "name": d.name,
                "nodes": len(d.nodes),
                "edges": edges,
                "levels": d.levels,
                "schedule": {
                    "kind": d.schedule.kind,
                    "expr": d.schedule.expr,
                    "timezone": d.schedule.tz,
                },
                "failure_policy": d.failure_policy,
            }
        )
        return
    click.echo(
        f"{d.name}: valid; {len(d.nodes)} node(s), {edges} edge(s); schedule {_schedule(d.schedule.kind, d.schedule.expr, d.schedule.tz)}; "
        f"failure policy {d.failure_policy}"
    )
    for number, level in enumerate(d.levels, 1):
        shown = ", ".join(level[:12]) + (f", … ({len(level) - 12} more)" if len(level) > 12 else "")
        click.echo(f"  {number}. {shown}")


def _schedule(kind: str, expr: str | None, tz: str) -> str:
    return "none" if kind == "none" else f"{kind} {expr} ({tz})"


@dag.command("apply")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Validate and say what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dag_apply(c: Context, files: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Create or update DAGs from YAML/JSON files. Idempotent: applying the same file again
    changes nothing. Every file is validated before anything is written, and all of them
    are applied in one transaction: all or nothing. Runs in flight keep the version they
    started with."""
    loaded, errors = [], []
    for f in files:  # every file valid, or nothing applied; every file's problems shown
        try:
            loaded.append(dag_module.load(f))
        except PgschedError as exc:
            errors.append(str(exc))
    if errors:
        raise PgschedError("\n".join(errors) + ("\nnothing applied" if len(files) > 1 else ""))
    reports = dags.apply_all(
        c.db(), list(zip(loaded, files, strict=True)), tenant=c.tenant, dry_run=dry_run
    )
    if as_json:
        print_json([r.__dict__ for r in reports])
        return
    for r in reports:
        verb = {
            "created": "would create" if dry_run else "created",
            "updated": "would update" if dry_run else "updated",
            "unchanged": "unchanged",
        }[r.dag]
        parts = [
            f"{len(v)} {k}"
            for k, v in (
                ("new", r.created),
                ("changed", r.updated),
                ("removed", r.removed),
                ("unchanged", r.unchanged),
            )
            if v
        ]
        click.echo(
            f"{r.name}: {verb} ({', '.join(parts)} node(s))"
            + ("; schedule changed" if r.schedule_changed else "")
        )
        for label, ids in (("new", r.created), ("changed", r.updated), ("removed", r.removed)):
            if ids and len(ids) <= 20:
                click.echo(f"  {label}: {', '.join(ids)}")


@dag.command("list")
@click.option("--limit", default=500, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dag_list(c: Context, limit: int, as_json: bool) -> None:
    """List DAGs with their schedule, next fire (UTC) and last run."""
    rows = dags.list_dags(c.db(), c.tenant, limit)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        r["schedule"] = _schedule(r["schedule_kind"], r["schedule_expr"], r["timezone"])
        r["state"] = "enabled" if r["enabled"] else "paused"
        r["nodes"] = r["node_count"]
        r["last_run"] = f"{r['last_run_id']} {r['last_run_state']}" if r["last_run_id"] else None
    table(
        rows, ["name", "state", "nodes", "schedule", "next_fire_at", "failure_policy", "last_run"]
    )


@dag.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dag_show(c: Context, name: str, as_json: bool) -> None:
    """Show a DAG: schedule, next fires, policy and its nodes with their dependencies."""
    db = c.db()
    row = dags.get(db, name, c.tenant)
    nodes = dags.nodes(db, row["id"])
    if as_json:
        print_json({**row, "nodes": nodes})
        return
    print_fields(
        {
            "name": row["name"],
            "description": row["description"],
            "state": "enabled" if row["enabled"] else "paused",
            "schedule": _schedule(row["schedule_kind"], row["schedule_expr"], row["timezone"]),
            "next_fire_at": row["next_fire_at"],
            "failure_policy": row["failure_policy"],
            "version": row["version"],
            "source": row["source"],
            "updated_at": row["updated_at"],
        }
    )
    problem = task_rows.schedule_problem(row) if row["schedule_kind"] != "none" else None
    if problem:
        click.echo(f"  next fires cannot be computed: {problem}")
    elif row["enabled"] and row["schedule_kind"] != "none":
        upcoming = task_rows.schedule_of(row).upcoming(db.now(), 3)
        for t in upcoming:
            click.echo(
                f"  next {fmt(t)}   {t.astimezone(zoneinfo.ZoneInfo(row['timezone'])).isoformat()}"
            )
    click.echo(f"nodes ({len(nodes)}):")
    for n in nodes:
        handler = n["command"] or (
            " ".join(n["argv"]) if n["argv"] else f"python {n['python_target']}"
        )
        after = f"  after {', '.join(n['upstream'])}" if n["upstream"] else ""
        rule = f" [{n['trigger_rule']}]" if n["trigger_rule"] != "all_success" else ""
        cond = f"  if {_condition(n['condition'])}" if n["condition"] else ""
        click.echo(f"  {n['node_id']}: {handler}{after}{rule}{cond}")


def _condition(c: dict[str, Any]) -> str:
    test = next(k for k in c if k != "field")
    return f"{c['field']} {test} {fmt(c[test])}"


@dag.command("trigger")
@click.argument("name")
@click.option("--params", help="JSON object merged over every node's params.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dag_trigger(c: Context, name: str, params: str | None, as_json: bool) -> None:
    """Start a run of a DAG now (also when it is paused)."""
    run_id = dagruns.trigger(
        c.db(), name, params=parse_json_object(params, "params"), tenant=c.tenant
    )
    if as_json:
        print_json({"run_id": run_id})
    else:
        click.echo(f"DAG run {run_id} started (pgsched dag run show {run_id})")


@dag.command("runs")
@click.argument("name")
@click.option("--state", type=click.Choice(RUN_OPEN_STATES + RUN_FINAL_STATES))
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dag_runs(c: Context, name: str, state: str | None, limit: int, as_json: bool) -> None:
    """List a DAG's runs, newest first, with how many nodes ended in each state."""
    rows = dagruns.runs(c.db(), name, state=state, limit=limit, tenant=c.tenant)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        r["nodes"] = ", ".join(f"{n} {s}" for s, n in sorted((r["node_states"] or {}).items()))
        r["run"] = r["id"]
        r["started_at"] = r["created_at"]
    table(
        rows, ["run", "state", "trigger", "started_at", "finished_at", "duration_seconds", "nodes"]
    )


@dag.group("run")
def dag_run() -> None:
    """One DAG run: show it."""


@dag_run.command("show")
@click.argument("run_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dag_run_show(c: Context, run_id: int, as_json: bool) -> None:
    """Show a run as a tree: each node under its upstream node listed last in the file
    (others named), with its state, start (UTC), duration, attempt and error or result."""
    run, nodes = dagruns.run(c.db(), run_id, c.tenant)
    if as_json:
        print_json({**run, "nodes": nodes})
        return
    how = f"rerun of {run['rerun_of']}" if run["rerun_of"] else run["trigger"]
    click.echo(
        f"DAG run {run['id']} of {run['dag_name']}: {run['state']} ({how}; "
        f"started {fmt(run['created_at'])}, {fmt(run['duration_seconds'])}s"
        + (f"; finished {fmt(run['finished_at'])}" if run["finished_at"] else "")
        + ")"
    )
    if run["error"]:
        click.echo(f"  {run['error']}")
    for line in tree_lines(nodes):
        click.echo(line)


def tree_lines(nodes: list[dict]) -> list[str]:
    """The nodes of a run as an indented tree. A node with several upstream nodes is drawn
    under the one listed last in the file, with the others named (``also after``), so
    each node appears once."""
    by_id = {n["node_id"]: n for n in nodes}
    children: dict[str | None, list[str]] = {}
    for n in nodes:
        parent = max(n["upstream"], key=lambda u: by_id[u]["position"]) if n["upstream"] else None
        children.setdefault(parent, []).append(n["node_id"])
    rows: list[tuple[str, str, str]] = []

    def line(node_id: str, prefix: str, last: bool, depth: int) -> None:
        n = by_id[node_id]
        branch = "" if depth == 0 else ("└─ " if last else "├─ ")
        state = STATE_MARKS.get(n["state"], n["state"]) + (" (kept)" if n.get("kept") else "")
        detail = []
        if n["started_at"]:
            detail.append(f"started {fmt(n['started_at'])}")
        if n["duration_seconds"] is not None:
            detail.append(f"{n['duration_seconds']:.2f}s")
        if n.get("attempt") and n["attempt"] > 1:
            detail.append(f"attempt {n['attempt']}")
        others = [
            u for u in n["upstream"] if u != max(n["upstream"], key=lambda u: by_id[u]["position"])
        ]
        if others and depth:
            detail.append(f"also after {', '.join(others)}")
        tail = (
            n["error"]
            if n["error"]
            else (f"result {fmt(n['result'])}" if n["result"] is not None else "")
        )
        if tail:
            detail.append(tail if len(tail) <= 80 else tail[:77] + "...")
        rows.append((f"{prefix}{branch}{node_id}", state, "; ".join(detail)))

    # depth-first with an explicit stack: a chain of thousands of nodes is no recursion
    stack = [(root, "", True, 0) for root in reversed(children.get(None, []))]
    while stack:
        node_id, prefix, last, depth = stack.pop()
        line(node_id, prefix, last, depth)
        kids = children.get(node_id, [])
        # past 30 levels the indent stops growing (a long chain stays readable)
        inner = (
            prefix if depth >= 30 else prefix + ("" if depth == 0 else ("   " if last else "│  "))
        )
        for i in reversed(range(len(kids))):
            stack.append((kids[i], inner, i == len(kids) - 1, depth + 1))
    width = max((len(label) for label, _, _ in rows), default=0)
    return [f"  {label:<{width}}  {state:<16} {detail}".rstrip() for label, state, detail in rows]


@dag.command("cancel")
@click.argument("run_id", type=int)
@pass_ctx
def dag_cancel(c: Context, run_id: int) -> None:
    """Cancel a run: nodes not started are cancelled, running ones are killed by their
    workers; the run ends 'cancelled' when the last one has stopped."""
    outcome = dagruns.cancel(c.db(), run_id, c.tenant)
    click.echo(
        {
            "cancelled": f"DAG run {run_id} cancelled",
            "cancelling": f"DAG run {run_id} cancelling: running nodes are being stopped",
            "failing": f"DAG run {run_id} is already failing (fail_all): its running nodes are being stopped",
            "finished": f"DAG run {run_id} had already ended; nothing changed",
        }[outcome]
    )


@dag.command("rerun")
@click.argument("run_id", type=int)
@click.option(
    "--from", "from_node", metavar="NODE", help="Re-run this node and everything downstream of it."
)
@click.option(
    "--failed-only",
    is_flag=True,
    help="Re-run nodes that failed, were cancelled or upstream_failed "
    "(not those skipped by a condition), and what is downstream of them.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def dag_rerun(
    c: Context, run_id: int, from_node: str | None, failed_only: bool, as_json: bool
) -> None:
    """Run a finished run again, as a new run with the same params. Nodes not re-run keep
    their state and result from the old run (and pass the result downstream)."""
    new = dagruns.rerun(
        c.db(), run_id, from_node=from_node, failed_only=failed_only, tenant=c.tenant
    )
    if as_json:
        print_json({"run_id": new, "rerun_of": run_id})
    else:
        click.echo(f"DAG run {new} started, re-running run {run_id} (pgsched dag run show {new})")


def _simple(name: str, help_text: str, action: Any, done: str) -> None:
    @dag.command(name, help=help_text)
    @click.argument("dag_name")
    @pass_ctx
    def command(c: Context, dag_name: str) -> None:
        action(c.db(), dag_name, c.tenant)
        click.echo(f"{dag_name}: {done}")


_simple(
    "pause",
    "Stop a DAG's schedule: no new scheduled runs (runs in flight go on; trigger still works).",
    dags.pause,
    "paused",
)
_simple(
    "resume",
    "Restart a DAG's schedule from now (fires missed while paused are skipped).",
    dags.resume,
    "resumed",
)
_simple(
    "delete",
    "Delete a DAG, its schedule and its node tasks (runs in flight finish; history stays).",
    dags.delete,
    "deleted",
)
