"""A tenant's secrets page as its admin uses it (issue 19, item 3): a value set through the
password field is stored sealed and shown nowhere (not in the page, the API, the audit log
nor any table as text); a delete asks first. The pages go to the artifacts folder and
/tmp/secrets-page.png."""

from __future__ import annotations

from psycopg import sql as pgsql

from pgsched.stores import secrets as store
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from .conftest import KEYRING, Stack, signed_in

VALUE = "s3cr3t-browser-value-77"
REF = "{{secret:browser-db}}"


def test_an_admin_sets_and_deletes_a_secret_and_its_value_is_nowhere(stack: Stack, browser):
    admin, context = signed_in(
        stack, browser, "secrets", role="admin", tenant="default", instance=False
    )
    try:
        page = admin.page
        admin.go("/secrets")
        assert page.get_attribute("#secret-value", "type") == "password"
        page.fill("#secret-name", "browser-db")
        page.fill("#secret-value", VALUE)
        admin.shot("filled")
        assert VALUE not in page.content()  # a password field's value is no attribute
        page.click("#secret-form button[type=submit]")
        page.wait_for_url(stack.url + "/secrets?done=secret_created")
        admin.shot("set")
        page.screenshot(path="/tmp/secrets-page.png", full_page=True)
        body = page.inner_text("#secrets")
        assert "browser-db" in body and KEYRING.current_id in body
        assert VALUE not in page.content()
        sealed = store.fetch_sealed(stack.db, "default", ["browser-db"])["browser-db"]
        assert KEYRING.open("default", "browser-db", sealed) == VALUE
        for path in ("/api/v1/audit", "/audit", "/account", "/"):
            response = page.request.get(stack.url + path)
            assert response.ok and VALUE not in response.text(), path
        _nowhere_in_the_database(stack)
        tasks.create(stack.db, TaskSpec(name="browser-uses-db", command="true", env={"DB": REF}))
        page.click("#secrets a:has-text('Delete')")
        page.wait_for_url(stack.url + "/secrets/browser-db/delete")
        assert "Referenced now by 1 task: browser-uses-db" in page.inner_text("#secret-users")
        admin.shot("confirm")
        page.click("form[action='/secrets/browser-db/delete'] button[type=submit]")
        page.wait_for_url(stack.url + "/secrets?done=secret_deleted")
        admin.shot("deleted")
        assert "browser-db" not in page.inner_text("#secrets")
        assert store.list_secrets(stack.db, "default") == []
        events = stack.sql.execute(
            "SELECT action, target, detail::text AS detail FROM pgsched.audit_event "
            "WHERE action LIKE %s ORDER BY id",
            ["secret%"],
        ).fetchall()
        assert [(e["action"], e["target"]) for e in events] == [
            ("secret_set", "secret browser-db"),
            ("secret_delete", "secret browser-db"),
        ]
    finally:
        stack.sql.execute("DELETE FROM pgsched.task WHERE name = 'browser-uses-db'")
        context.close()


def _nowhere_in_the_database(stack: Stack) -> None:
    """The value as text or hex in no row of any table of pgsched and pgsched_internal."""
    tables = stack.sql.execute(
        "SELECT n.nspname, c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname IN ('pgsched', 'pgsched_internal') AND c.relkind IN ('r', 'p')"
    ).fetchall()
    assert len(tables) > 20
    hexed = VALUE.encode().hex()
    for row in tables:
        table = pgsql.Identifier(row["nspname"], row["relname"])
        hit = stack.sql.execute(
            pgsql.SQL("SELECT 1 FROM {} x WHERE x::text LIKE %s OR x::text LIKE %s LIMIT 1").format(
                table
            ),
            [f"%{VALUE}%", f"%{hexed}%"],
        ).fetchone()
        assert hit is None, row
