"""``pgsched dag …``: DAG definitions (running them comes with the DAG engine)."""

from __future__ import annotations

import click

from .. import dag as dag_module
from .output import print_json
from .root import main


@main.group()
def dag() -> None:
    """DAGs: workflows of dependent tasks, defined in YAML or JSON (examples/dags/)."""


@dag.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def dag_validate(file: str, as_json: bool) -> None:
    """Check a DAG definition without a database: every error names the node and field
    (unknown dependency, duplicate id, handler, trigger rule, condition, cycles with their
    path). Prints the order the nodes can run in, level by level."""
    d = dag_module.load(file)
    edges = sum(len(n.depends_on) for n in d.nodes.values())
    if as_json:
        print_json({"name": d.name, "nodes": len(d.nodes), "edges": edges, "levels": d.levels,
                    "schedule": {"kind": d.schedule.kind, "expr": d.schedule.expr, "timezone": d.schedule.tz},
                    "failure_policy": d.failure_policy})
        return
    sched = "none" if d.schedule.kind == "none" else f"{d.schedule.kind} {d.schedule.expr} ({d.schedule.tz})"
    click.echo(f"{d.name}: valid; {len(d.nodes)} node(s), {edges} edge(s); schedule {sched}; "
               f"failure policy {d.failure_policy}")
    for number, level in enumerate(d.levels, 1):
        shown = ", ".join(level[:12]) + (f", … ({len(level) - 12} more)" if len(level) > 12 else "")
        click.echo(f"  {number}. {shown}")
