"""The DAG store, definitions: apply a validated :class:`~pgsched.dag.Dag` (create, update or
leave unchanged its schedule task, node tasks and nodes), get, list and show DAGs, pause,
resume and delete them. Each operation is one transaction. Their runs are
:mod:`pgsched.stores.dagruns`; the engine itself (what happens when a node ends) is SQL, in
``migrations/0003_dags.sql``.

How a DAG is stored: a task of kind ``dag`` named like the DAG carries its schedule and
paused state (so the scheduler fires it, with the task's misfire policy); every node is a
task named ``DAG.NODE`` (source ``dag:DAG``) that the workers run like any other, with the
node's retries and timeout.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ..dag import Dag, Node
from ..db import Database, Row, Session
from ..errors import NotFound, ValidationError
from ..schedule import Schedule
from ..task_checks import check_name
from . import tasks


@dataclass
class ApplyReport:
    """What ``apply`` did (or would do, with ``dry_run``): ``dag`` is created, updated or
    unchanged; node ids by what happened to them."""

    name: str
    dag: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    schedule_changed: bool = False
    dry_run: bool = False


def node_definition(node: Node) -> dict[str, Any]:
    """What a node is, as stored in ``dag_node.definition`` and compared on re-apply."""
    spec = asdict(node.task)
    for key in (
        "name",
        "tenant",
        "source",
        "enabled",
        "description",
        "schedule",
        "schedule_kind",
        "timezone",
    ):
        spec.pop(key, None)
    if not spec.get("sensitive_params"):  # as stored before 0031: a re-apply changes nothing
        spec.pop("sensitive_params", None)
    return {
        **spec,
        "depends_on": list(node.depends_on),
        "trigger_rule": node.trigger_rule,
        "condition": asdict(node.condition) if node.condition else None,
    }


def _condition_json(node: Node) -> Jsonb | None:
    c = node.condition
    return Jsonb({"field": c.field, c.test: c.value}) if c else None


def _schedule_row(
    dag: Dag, now: datetime, enabled: bool, fired_through: datetime | None = None
) -> dict[str, Any]:
    """The schedule columns of a DAG's task, planned from the database's ``now`` and never
    at or before ``fired_through`` (its task's ``last_fire_at``)."""
    s = dag.schedule
    plan = s.plan(now, fired_through, enabled=enabled)
    return dict(
        schedule_kind=s.kind,
        schedule_expr=s.expr,
        timezone=s.tz,
        schedule_anchor=plan.anchor,
        next_fire_at=plan.next_fire_at,
    )


def apply(
    db: Database,
    dag: Dag,
    *,
    tenant: str = "default",
    source: str | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> ApplyReport:
    """Store ``dag`` (already validated by :func:`pgsched.dag.load`), creating or updating
    its schedule task, its node tasks and its nodes; nodes no longer in it are removed
    (their tasks soft-deleted; runs in flight still finish them). Applying the same
    definition again changes nothing.

    A changed node gets a new task (the old one is soft-deleted), so a run in flight keeps
    running the version it started with: graph, handlers and params. One transaction,
    serialised per DAG (and with the start of its runs). Raises ValidationError when a
    task name the DAG needs (``DAG`` or ``DAG.NODE``) is taken by a task that is not this
    DAG's; nothing is written then. With ``dry_run`` the transaction is rolled back and the
    report says what would have happened.
    """
    return apply_all(db, [(dag, source)], tenant=tenant, dry_run=dry_run, now=now)[0]


def apply_all(
    db: Database,
    dags: list[tuple[Dag, str | None]],
    *,
    tenant: str = "default",
    dry_run: bool = False,
    now: datetime | None = None,
) -> list[ApplyReport]:
    """:func:`apply` for several DAGs (each with its source file name) in ONE transaction:
    all are stored or none. Raises ValidationError for two DAGs of the same name."""
    check_name("tenant", tenant)
    seen: dict[str, str | None] = {}
    for d, source in dags:
        if d.name in seen:
            raise ValidationError(
                "name", d.name, f"is defined twice ({seen[d.name]} and {source}); nothing applied"
            )
        seen[d.name] = source
    try:
        with db.transaction() as tx:
            at = now or tx.now()  # the database's clock plans the schedules
            reports = [_apply(tx, d, tenant, source, dry_run, at) for d, source in dags]
            if dry_run:
                raise _RolledBack(reports)
    except _RolledBack as done:
        return done.reports
    return reports


class _RolledBack(Exception):
    def __init__(self, reports: list[ApplyReport]):
        self.reports = reports


def _apply(
    tx: Session, dag: Dag, tenant: str, source: str | None, dry_run: bool, now: datetime
) -> ApplyReport:
    owner = f"dag:{dag.name}"
    tx.exec("dag_lock", tenant=tenant, name=dag.name)
    tx.exec("dag_lock_schedule_task", tenant=tenant, name=dag.name)  # before the dag row, as a tick
    existing = tx.one(
        "dag_get", tenant=tenant, name=dag.name
    )  # read under the locks: last_fire_at is current
    if existing is not None:
        tx.exec(
            "dag_lock_row", id=existing["id"]
        )  # runs starting now wait (dag_start_v1: FOR SHARE)
    report = ApplyReport(dag.name, "unchanged" if existing else "created", dry_run=dry_run)
    old_nodes = (
        {r["node_id"]: r for r in tx.many("dag_nodes", dag_id=existing["id"])} if existing else {}
    )
    names = [dag.name] + [n.task.name for n in dag.nodes.values()]
    taken = {r["name"]: r for r in tx.many("dag_tasks_by_name", tenant=tenant, names=names)}
    # The schedule task.
    if existing is None:
        if dag.name in taken:
            raise ValidationError(
                "name",
                dag.name,
                f"is the name of an existing task in tenant {tenant!r}; "
                "a DAG and its schedule task share the name",
            )
        task_row = tx.one(
            "dag_task_insert",
            tenant=tenant,
            name=dag.name,
            description=dag.description,
            source=owner,
            **_schedule_row(dag, now, True),
        )
        if task_row is None:
            raise ValidationError(
                "name", dag.name, f"was taken by a task created meanwhile in tenant {tenant!r}"
            )
        task_id = task_row["id"]
    else:
        task_id = existing["task_id"]
        old = Schedule(existing["schedule_kind"], existing["schedule_expr"], existing["timezone"])
        new = dag.schedule
        if (old.kind, old.expr, old.tz) != (new.kind, new.expr, new.tz) or existing[
            "description"
        ] != dag.description:
            report.schedule_changed = (old.kind, old.expr, old.tz) != (new.kind, new.expr, new.tz)
            values = _schedule_row(dag, now, existing["enabled"], existing["last_fire_at"])
            if not report.schedule_changed:
                values.update(
                    schedule_anchor=existing["schedule_anchor"],
                    next_fire_at=existing["next_fire_at"],
                )
            tx.exec("dag_task_update", id=task_id, description=dag.description, **values)
            if report.schedule_changed:
                tx.exec("task_wake_scheduler")
    # Node tasks: new or changed nodes get a task of their own; a changed node's old task
    # is soft-deleted, not updated, so that runs in flight keep what they started with.
    task_ids: dict[str, int] = {}
    for node in dag.nodes.values():
        spec = node.task
        spec.tenant, spec.source, spec.description = (
            tenant,
            owner,
            f"node {node.id} of DAG {dag.name}",
        )
        holder = taken.get(spec.name)
        if holder is not None and holder["source"] != owner:
            raise ValidationError(
                f"nodes[{node.id}].id",
                node.id,
                f"needs the task name {spec.name!r}, which "
                f"an existing task holds in tenant {tenant!r}",
            )
        if (
            holder is not None
            and node.id in old_nodes
            and old_nodes[node.id]["task_id"] == holder["id"]
            and old_nodes[node.id]["definition"] == json.loads(json.dumps(node_definition(node)))
        ):
            task_ids[node.id] = holder["id"]
            report.unchanged.append(node.id)
            continue
        if holder is not None:
            tx.exec("dag_tasks_soft_delete", ids=[holder["id"]])
        row = tasks.create(tx, spec, now=now)
        assert row is not None
        task_ids[node.id] = row["id"]
        (report.updated if node.id in old_nodes else report.created).append(node.id)
    report.removed = [n for n in old_nodes if n not in dag.nodes]
    gone = [old_nodes[n]["task_id"] for n in report.removed]
    if gone:
        tx.exec("dag_tasks_soft_delete", ids=gone)
    fields = dict(
        description=dag.description,
        failure_policy=dag.failure_policy,
        params=Jsonb(dag.params),
        definition=Jsonb(dag.definition),
        source=source,
    )
    if existing is None:
        stored = tx.one("dag_insert", tenant=tenant, name=dag.name, task_id=task_id, **fields)
        assert stored is not None
        dag_id = stored["id"]
    else:
        dag_id = existing["id"]
        if (
            existing["definition"] != json.loads(json.dumps(dag.definition))
            or report.created
            or report.updated
            or report.removed
            or existing["source"] != source
        ):
            tx.one("dag_update", id=dag_id, **fields)
            report.dag = "updated"
    downstream = dag.downstream()
    order = list(dag.nodes)
    tx.exec(
        "dag_nodes_replace",
        dag_id=dag_id,
        node_id=order,
        position=list(range(len(order))),
        task_id=[task_ids[n] for n in order],
        trigger_rule=[dag.nodes[n].trigger_rule for n in order],
        condition=[_condition_json(dag.nodes[n]) for n in order],
        upstream=[Jsonb(list(dag.nodes[n].depends_on)) for n in order],
        downstream=[Jsonb(downstream[n]) for n in order],
        definition=[Jsonb(node_definition(dag.nodes[n])) for n in order],
    )
    return report


def get(db: Database | Session, name: str, tenant: str = "default") -> Row:
    """The live DAG ``name`` with its schedule, paused state and node count, as this session
    may see it (params and nodes' env and params masked for a viewer: ``dag_shown``,
    migration 0031). Raises NotFound."""
    row = db.one("dag_shown", name=name, tenant=tenant)
    if row is None:
        raise NotFound(f"dag: no DAG named {name!r} in tenant {tenant!r}")
    return row


def nodes(db: Database | Session, dag_id: int) -> list[Row]:
    """A DAG's nodes in file order, with their tasks' handler fields, as this session may see
    them (``dag_nodes_shown``: env and params masked for a viewer, migration 0031)."""
    return db.many("dag_nodes_shown", dag_id=dag_id)


def list_dags(db: Database | Session, tenant: str = "default", limit: int = 1000) -> list[Row]:
    """Live DAGs with schedule, paused state, node count and last run."""
    return db.many("dag_list", tenant=tenant, limit=limit)


def pause(db: Database, name: str, tenant: str = "default") -> None:
    """Stop the DAG's schedule (runs in flight go on). Raises NotFound."""
    get(db, name, tenant)
    tasks.pause(db, name, tenant)


def resume(db: Database, name: str, tenant: str = "default") -> None:
    """Restart the DAG's schedule from now (missed fires are skipped). Raises NotFound."""
    get(db, name, tenant)
    tasks.resume(db, name, tenant)


def delete(db: Database, name: str, tenant: str = "default") -> None:
    """Soft-delete the DAG, its schedule task and its node tasks; runs in flight finish.
    Raises NotFound."""
    with db.transaction() as tx:
        tx.exec("dag_lock_schedule_task", tenant=tenant, name=name)  # before the dag row, as a tick
        row = tx.one("dag_soft_delete", name=name, tenant=tenant)
        if row is None:
            raise NotFound(f"dag: no DAG named {name!r} in tenant {tenant!r}")
        ids = [row["task_id"]] + [n["task_id"] for n in tx.many("dag_nodes", dag_id=row["id"])]
        tx.exec("dag_tasks_soft_delete", ids=ids)
