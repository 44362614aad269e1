"""Migration 0018 run as people run it in production: by a login that is not a superuser
(docs/security.md, "A deployment where only migrate uses the owner")."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict

from pgsched import migrate
from pgsched.errors import MigrationError, PgschedError

from ..tenancy import drop_roles, login_dsn


@pytest.fixture
def migrator(empty_dsn, template_db):
    """(the migrator's DSN, its name): a login that owns the empty database, and nothing
    else. The group roles exist (the template's migration made them in this cluster), as
    in a cluster where another database of pgsched was migrated first."""
    role = f"migrator_{uuid.uuid4().hex[:8]}"
    dbname = conninfo_to_dict(empty_dsn)["dbname"]
    with psycopg.connect(empty_dsn, autocommit=True) as c:
        c.execute(pgsql.SQL("CREATE ROLE {} LOGIN").format(pgsql.Identifier(role)))
        c.execute(
            pgsql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                pgsql.Identifier(dbname), pgsql.Identifier(role)
            )
        )
    try:
        yield login_dsn(empty_dsn, role), role
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as c:
            c.execute(
                pgsql.SQL("ALTER DATABASE {} OWNER TO CURRENT_USER").format(
                    pgsql.Identifier(dbname)
                )
            )
            c.execute(pgsql.SQL("DROP OWNED BY {}").format(pgsql.Identifier(role)))
        drop_roles(empty_dsn, [role])


def test_a_migrator_outside_pgsched_owner_is_told_what_to_run(empty_dsn, migrator):
    dsn, role = migrator
    with pytest.raises((MigrationError, PgschedError), match="member of pgsched_owner") as caught:
        migrate.migrate(dsn)
    assert f"GRANT pgsched_owner TO {role}" in str(caught.value)  # the hint


def test_a_migrator_in_pgsched_owner_installs_everything_owned_by_the_owner(empty_dsn, migrator):
    dsn, role = migrator
    with psycopg.connect(empty_dsn, autocommit=True) as c:
        c.execute(pgsql.SQL("GRANT pgsched_owner TO {}").format(pgsql.Identifier(role)))
    migrate.migrate(dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as c:
        owners = {
            r[0]
            for r in c.execute(
                "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relnamespace IN "
                "('pgsched'::regnamespace, 'pgsched_internal'::regnamespace)"
            ).fetchall()
        }
        assert owners == {"pgsched_owner"}
        # the owner's partitions were made by the migration too (partition_ensure, definer)
        assert (
            c.execute(
                "SELECT count(*) FROM pg_inherits WHERE inhparent = 'pgsched.execution_history'::regclass"
            ).fetchone()[0]
            >= 5
        )
