"""Two tenants with the same kinds of rows, and real login roles for each (migration 0018):
what the isolation tests attack. Roles are cluster-wide, so each gets a unique name and is
dropped when the test ends."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from pgsched import dag as dag_module
from pgsched.db import Database
from pgsched.stores import dags, tenants

from .factories import make_task

DAG = {
    "name": "etl",
    "nodes": [
        {"id": "extract", "command": "true"},
        {"id": "load", "command": "true", "depends_on": ["extract"]},
    ],
}


def login_dsn(dsn: str, role: str) -> str:
    """``dsn`` with the user replaced by ``role`` (the test server trusts local logins)."""
    info = {k: v for k, v in conninfo_to_dict(dsn).items() if v is not None}
    info.update(user=role)
    info.pop("password", None)
    return make_conninfo(**info)


@dataclass
class Tenant:
    name: str
    app: str  # the DSN of its application login (pgsched_app)
    engine: str  # the DSN of its engine login (pgsched_engine)
    task_id: int = 0
    pending_id: int = 0  # an execution waiting in the queue
    dead_id: int = 0  # an execution in the dead-letter queue
    run_id: int = 0  # a DAG run
    roles: list[str] = field(default_factory=list)


@contextlib.contextmanager
def two_tenants(dsn: str) -> Iterator[tuple[Tenant, Tenant, list[str]]]:
    """Tenants A and B, each with a task named ``job`` (same name in both), a pending and a
    dead execution, a DAG ``etl`` with a run, an API token and a web user; an app and an
    engine login for each. Yields (A, B, extra roles list: append more to drop them)."""
    tag = uuid.uuid4().hex[:8]
    made: list[str] = []
    db = Database.connect(dsn, max_size=2)
    try:
        out = []
        for letter in ("a", "b"):
            name = f"t{letter}_{tag}"
            app, engine = f"app_{letter}_{tag}", f"eng_{letter}_{tag}"
            tenants.create(db, name, logins=((app, "app"), (engine, "engine")))
            made += [app, engine]
            t = Tenant(name, login_dsn(dsn, app), login_dsn(dsn, engine), roles=[app, engine])
            t.task_id = make_task(db, "job", tenant=name)["id"]
            dags.apply(db, dag_module.parse(DAG), tenant=name)
            out.append(t)
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as c:
            for t in out:
                t.pending_id = c.execute(
                    "SELECT pgsched.enqueue_v1('job', tenant => %s) AS id", [t.name]
                ).fetchone()["id"]
                t.run_id = c.execute(
                    "SELECT pgsched.dag_trigger_v1('etl', tenant => %s) AS id", [t.name]
                ).fetchone()["id"]
                t.dead_id = c.execute(
                    "SELECT pgsched.enqueue_v1('job', tenant => %s) AS id", [t.name]
                ).fetchone()["id"]
                c.execute(
                    "SELECT pgsched_internal.finish_v1(e, 'dead', 'boom') "
                    "FROM pgsched.execution e WHERE e.id = %s",
                    [t.dead_id],
                )
                c.execute(
                    "INSERT INTO pgsched.api_token (tenant, role, name, token_sha256) "
                    "VALUES (%s, 'admin', 'ci', sha256(%s::bytea))",
                    [t.name, t.name],
                )
                c.execute(
                    "INSERT INTO pgsched.web_user (username, tenant, role, password_hash) "
                    "VALUES (%s, %s, 'admin', 'x')",
                    [f"admin_{t.name}", t.name],
                )
        yield out[0], out[1], made
    finally:
        db.close()
        drop_roles(dsn, made)


def drop_roles(dsn: str, roles: list[str]) -> None:
    """Drop test login roles (cluster-wide) after their sessions end."""
    with psycopg.connect(dsn, autocommit=True) as c:
        for role in roles:
            c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                [role],
            )
            c.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(role)))


def login(dsn: str, autocommit: bool = True) -> psycopg.Connection:
    """A connection as one of a tenant's logins (``Tenant.app``, ``Tenant.engine``), rows as
    dicts, autocommit unless asked otherwise."""
    return psycopg.connect(dsn, autocommit=autocommit, row_factory=dict_row)


def own_worker(conn: psycopg.Connection, tenant: str) -> int:
    """A worker registered by the tenant's own engine login ``conn``, as `pgsched worker`
    does: its id."""
    return conn.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
        "heartbeat_interval) VALUES ('w', 'h', 1, '{default}', ARRAY[%s], 4, 5) RETURNING id",
        [tenant],
    ).fetchone()["id"]
