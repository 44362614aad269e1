"""0026's virtual time (tenant_usage.vtime) against tenant B's own logins: B cannot read
A's, nor lower its own or raise A's by writing the table (the engine login has the table
privileges, row-level security gives it its own row to read and nothing to write). This
attack holds; the test keeps it held."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row

from ..tenancy import two_tenants


def test_attack26_a_tenants_logins_cannot_read_or_write_the_virtual_times(dsn, sql):
    with two_tenants(dsn) as (a, b, _):
        sql.execute(
            "INSERT INTO pgsched.tenant_usage (tenant, vtime) VALUES (%s, 5), (%s, 7)"
            " ON CONFLICT (tenant) DO UPDATE SET vtime = EXCLUDED.vtime",
            [a.name, b.name],
        )
        with psycopg.connect(b.engine, autocommit=True, row_factory=dict_row) as engine:
            seen = engine.execute("SELECT tenant, vtime FROM pgsched.tenant_usage").fetchall()
            assert seen == [{"tenant": b.name, "vtime": 7.0}]
            assert engine.execute("UPDATE pgsched.tenant_usage SET vtime = 0").rowcount == 0
            assert engine.execute("DELETE FROM pgsched.tenant_usage").rowcount == 0
            try:
                engine.execute(
                    "INSERT INTO pgsched.tenant_usage (tenant, vtime) VALUES (%s, 1e9)"
                    " ON CONFLICT (tenant) DO UPDATE SET vtime = EXCLUDED.vtime",
                    [a.name],
                )
                raise AssertionError("B's engine wrote A's tenant_usage row")
            except pg_errors.InsufficientPrivilege:
                pass
        with psycopg.connect(b.app, autocommit=True, row_factory=dict_row) as app:
            for statement in (
                "SELECT vtime FROM pgsched.tenant_usage",
                "UPDATE pgsched.tenant_usage SET vtime = 0",
                "DELETE FROM pgsched.tenant_usage",
            ):
                try:
                    app.execute(statement)
                    raise AssertionError(f"B's app login ran {statement!r}")
                except pg_errors.InsufficientPrivilege:
                    pass
        left = sql.execute(
            "SELECT tenant, vtime FROM pgsched.tenant_usage WHERE tenant IN (%s, %s)"
            " ORDER BY vtime",
            [a.name, b.name],
        ).fetchall()
        assert [r["vtime"] for r in left] == [5.0, 7.0]
