"""Attack 20 on who reveals (migrations 0031, 0036): a tenant's login of purpose ``web``
(``pgsched tenant create --login NAME:web``) is a member of pgsched_web, which the
database trusts to set ``pgsched.reveal`` (and reads the tables raw: docs/security.md).
So the reveal permission is no boundary against whoever holds that login: setting the flag
itself shows it its tenant's values. What holds is the tenant: setting ``pgsched.tenant``
to another tenant or to every tenant ('*'), with the flag on, shows it no other tenant's
row, value or secret."""

from __future__ import annotations

import uuid

import psycopg
from psycopg.rows import dict_row

from pgsched.stores import tenants

from ..factories import make_task
from ..tenancy import drop_roles, login_dsn

VALUE = "hunter2-web-login"


def test_a_tenants_web_login_reveals_its_own_tenant_only(db, dsn):
    tag = uuid.uuid4().hex[:8]
    mine, theirs, role = f"tw_{tag}", f"tx_{tag}", f"web_{tag}"
    tenants.create(db, mine, logins=((role, "web"),))
    tenants.create(db, theirs)
    try:
        make_task(db, "job", tenant=mine, env={"DB_PASSWORD": "mine"})
        make_task(db, "job", tenant=theirs, env={"DB_PASSWORD": VALUE})
        with psycopg.connect(login_dsn(dsn, role), row_factory=dict_row) as c:
            c.execute("SELECT set_config('pgsched.reveal', 'on', false)")
            own = c.execute("SELECT env FROM pgsched.task_v1('job')").fetchone()
            assert own["env"] == {"DB_PASSWORD": "mine"}  # the web login is trusted: as designed
            for acting in (theirs, "*"):
                c.execute("SELECT set_config('pgsched.tenant', %s, false)", [acting])
                rows = c.execute("SELECT tenant, env FROM pgsched.task").fetchall()
                assert rows == [{"tenant": mine, "env": {"DB_PASSWORD": "mine"}}], acting
                try:
                    c.execute("SELECT env FROM pgsched.task_v1('job', tenant => %s)", [theirs])
                    raise AssertionError("another tenant's task was read")
                except psycopg.errors.InsufficientPrivilege as exc:
                    assert VALUE not in str(exc) and "tenant" in str(exc)
                    c.rollback()
                    c.execute("SELECT set_config('pgsched.reveal', 'on', false)")
    finally:
        drop_roles(dsn, [role])
