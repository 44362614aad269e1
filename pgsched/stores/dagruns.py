"""The DAG store, runs: trigger, cancel and re-run a DAG's runs (through the public SQL API,
``pgsched.dag_trigger_v1``, ``dag_cancel_v1``, ``dag_rerun_v1``), list them and show one
with its nodes. Each operation is one transaction. The DAGs themselves (apply, list, pause,
delete) are :mod:`pgsched.stores.dags`.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from ..db import Database, Row, Session
from ..errors import NotFound
from ..jsontext import check_json_object
from . import dags


def trigger(
    db: Database | Session,
    name: str,
    *,
    params: dict[str, Any] | None = None,
    tenant: str = "default",
) -> int:
    """Start a run of ``name`` now, also when paused (pgsched.dag_trigger_v1). ``params``
    are merged over every node's params. Returns the run id. Raises NotFound,
    ValidationError (params not a JSON object)."""
    if params is not None:
        check_json_object("params", params)
    row = db.one(
        "dag_trigger",
        name=name,
        tenant=tenant,
        params=Jsonb(params) if params is not None else None,
    )
    assert row is not None
    return int(row["run_id"])


def cancel(db: Database | Session, run_id: int, tenant: str = "default") -> str:
    """Cancel a run (pgsched.dag_cancel_v1): ``cancelled``, ``cancelling`` (running nodes
    are being stopped) or ``finished`` (it had ended). Raises NotFound."""
    row = db.one("dag_cancel", run_id=run_id, tenant=tenant)
    assert row is not None
    return str(row["outcome"])


def rerun(
    db: Database | Session,
    run_id: int,
    *,
    from_node: str | None = None,
    failed_only: bool = False,
    tenant: str = "default",
) -> int:
    """Run a finished run again as a new run (pgsched.dag_rerun_v1); see its comment for
    which nodes run again. Returns the new run id. Raises NotFound, ValidationError."""
    row = db.one(
        "dag_rerun", run_id=run_id, from_node=from_node, failed_only=failed_only, tenant=tenant
    )
    assert row is not None
    return int(row["run_id"])


def runs(
    db: Database | Session,
    name: str,
    *,
    state: str | None = None,
    limit: int = 20,
    tenant: str = "default",
) -> list[Row]:
    """Runs of DAG ``name``, newest first, with node counts by state. Raises NotFound."""
    dags.get(db, name, tenant)
    return db.many("dag_runs", name=name, tenant=tenant, state=state, limit=limit)


def run_page(
    db: Database | Session,
    tenant: str,
    *,
    dag: str | None = None,
    state: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[Row]:
    """Up to ``limit`` runs of ``tenant``'s DAGs, newest first, below id ``before``: of DAG
    ``dag``, in ``state``, each filter optional."""
    return db.many(
        "api_dag_run_list", tenant=tenant, dag=dag, state=state, before=before, limit=limit
    )


def run(db: Database | Session, run_id: int, tenant: str = "default") -> tuple[Row, list[Row]]:
    """A run and its nodes (file order; a node a worker is running shows ``running``).
    Raises NotFound."""
    row = db.one("dag_run_get", run_id=run_id, tenant=tenant)
    if row is None:
        raise NotFound(f"run: no DAG run {run_id} in tenant {tenant!r}")
    return row, db.many("dag_run_nodes", run_id=run_id)
