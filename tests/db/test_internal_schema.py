"""The schema pgsched holds the documented SQL API alone; the engine's functions are in
pgsched_internal (migration 0017), every function body calls functions where they are, and
a database upgraded from 0016 with work in flight is the schema a fresh one is and goes on."""

from __future__ import annotations

import re

import psycopg
from psycopg.rows import dict_row

from pgsched import dag as dag_module
from pgsched import migrate
from pgsched.db import Database
from pgsched.stores import dagruns, dags

from .. import schema_snapshot
from ..helpers import REPO
from .test_dag_engine import ETL, Driver
from .test_sql_privileges import at_0016

# A function named in a body or a heading: schema, name and version suffix.
CALL = re.compile(r"\b(pgsched(?:_internal)?)\.([a-z][a-z0-9_]*_v[0-9]+)\(")


def functions(sql, schema: str) -> set[str]:
    return {
        r["proname"]
        for r in sql.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = %s::regnamespace", [schema]
        )
    }


def test_the_public_schema_holds_exactly_the_functions_docs_sql_api_describes(sql):
    documented = {
        name
        for schema, name in CALL.findall(
            "\n".join(
                line
                for line in (REPO / "docs" / "sql-api.md").read_text().splitlines()
                if line.startswith("### ")
            )
        )
    }
    assert documented, "no '### `pgsched.name_vN(...)`' headings found in docs/sql-api.md"
    assert functions(sql, "pgsched") == documented


def test_every_function_a_body_calls_is_in_the_schema_it_names(sql):
    known = {(s, n) for s in ("pgsched", "pgsched_internal") for n in functions(sql, s)}
    wrong = []
    for row in sql.execute(
        "SELECT oid::regprocedure::text AS f, prosrc FROM pg_proc "
        "WHERE pronamespace IN ('pgsched'::regnamespace, 'pgsched_internal'::regnamespace)"
    ):
        wrong += [
            f"{row['f']} calls {s}.{n}"
            for s, n in CALL.findall(row["prosrc"])
            if (s, n) not in known
        ]
    assert wrong == []


def test_every_function_the_named_queries_call_is_in_the_schema_they_name(sql):
    known = {(s, n) for s in ("pgsched", "pgsched_internal") for n in functions(sql, s)}
    wrong = [
        f"{path.name}: {s}.{n}"
        for path in sorted((REPO / "sql").glob("*.sql"))
        if path.name != "schema.sql"
        for s, n in CALL.findall(path.read_text())
        if (s, n) not in known
    ]
    assert wrong == []


def test_an_upgrade_from_0016_with_work_in_flight_is_a_fresh_schema_and_goes_on(
    empty_dsn, monkeypatch
):
    known = migrate.load()
    at = next(i for i, m in enumerate(known) if m.name == "internal_schema")
    migrate.migrate(empty_dsn, known[:at])
    db = Database.connect(empty_dsn, max_size=4)
    try:
        with psycopg.connect(empty_dsn, autocommit=True, row_factory=dict_row) as sql:
            # Before: a DAG run in flight, a pending execution, a paused task.
            with monkeypatch.context() as m:
                at_0016(m)
                dags.apply(db, dag_module.parse(ETL))
            run = sql.execute("SELECT pgsched.dag_trigger_v1('etl') AS id").fetchone()["id"]
            sql.execute(
                "INSERT INTO pgsched.task (name, handler_kind, command, queue) "
                "VALUES ('old', 'shell', 'true', 'elsewhere')"
            )
            pending = sql.execute("SELECT pgsched.enqueue_v1('old') AS id").fetchone()["id"]
            assert sql.execute("SELECT pgsched.pause_v1('old') AS ok").fetchone()["ok"]

            assert [m.version for m in migrate.migrate(empty_dsn)] == [
                m.version for m in known[at:]
            ]
            snapshot = (
                schema_snapshot.SNAPSHOT.read_text()
            )  # what a fresh database is (test_schema_snapshot)
            if schema_snapshot.snapshot_major(snapshot) == schema_snapshot.server_major(empty_dsn):
                assert schema_snapshot.dump(empty_dsn) == snapshot

            # After: the run goes on through the moved DAG engine (a trigger on history
            # calls it), a cancel ends an execution through the moved finish_v1, resume
            # clears the pause through the moved trigger function.
            drive = Driver(db, sql)
            drive.finish(run, "extract_a")
            drive.finish(run, "extract_b")
            assert drive.states(run)["merge"] == "queued"
            assert (
                sql.execute("SELECT pgsched.cancel_v1(%s) AS how", [pending]).fetchone()["how"]
                == "cancelled"
            )
            assert sql.execute("SELECT pgsched.resume_v1('old') AS ok").fetchone()["ok"]
            assert (
                sql.execute("SELECT paused_by FROM pgsched.task WHERE name = 'old'").fetchone()[
                    "paused_by"
                ]
                is None
            )
            assert dagruns.cancel(db, run) == "cancelled"
            assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0
    finally:
        db.close()
