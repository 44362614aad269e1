"""``/secrets`` (issue 19, item 3): a tenant's admin lists, sets and deletes its secrets; an
operator is refused (403); a form without the CSRF token is refused; a refused form never
shows the value back; a web server without a key says so and seals nothing; the value is
in no page nor the audit log."""

from __future__ import annotations

import os

import pytest

from pgsched.secret_keys import Keyring
from pgsched.stores import secrets as store

from ..factories import make_task
from .conftest import csrf_of
from .test_pages import post, signed  # noqa: F401  (a fixture)

VALUE = "v@lue-never-shown-41"
RING = Keyring([os.urandom(32)])


@pytest.fixture
def keyed(app):
    app.state.secret_keyring = RING
    return app


def test_an_admin_sets_lists_and_deletes(keyed, db, signed, sql):  # noqa: F811
    admin = signed("admin")
    made = post(admin, "/secrets", name="db-url", value=VALUE)
    assert made.status_code == 303 and made.headers["location"].endswith("secret_created")
    assert post(admin, "/secrets", name="db-url", value=VALUE + "2").status_code == 303
    page = admin.get("/secrets")
    assert "db-url" in page.text and RING.current_id in page.text and VALUE not in page.text
    sealed = store.fetch_sealed(db, "default", ["db-url"])["db-url"]
    assert RING.open("default", "db-url", sealed) == VALUE + "2"
    assert store.list_secrets(db, "default")[0]["updated_by"].startswith("token ")
    confirm = admin.get("/secrets/db-url/delete")
    assert confirm.status_code == 200 and "Delete secret db-url?" in confirm.text
    assert "No task references it now." in confirm.text
    make_task(db, "nightly", env={"DB": "{{secret:db-url}}"})
    confirm = admin.get("/secrets/db-url/delete")
    assert 'Referenced now by 1 task: <a href="/tasks/nightly">nightly</a>' in confirm.text
    assert store.list_secrets(db, "default") != []  # asking deletes nothing
    assert post(admin, "/secrets/db-url/delete").status_code == 303
    assert store.list_secrets(db, "default") == []
    assert post(admin, "/secrets/db-url/delete").status_code == 404
    audit = sql.execute("SELECT * FROM pgsched.audit_event WHERE action LIKE 'secret%'").fetchall()
    assert [a["action"] for a in audit] == ["secret_set", "secret_set", "secret_delete"]
    assert all(VALUE not in str(a) for a in audit)


def test_an_operator_is_refused_and_a_form_needs_its_csrf_token(keyed, db, signed):  # noqa: F811
    operator = signed("operator")
    assert operator.get("/secrets").status_code == 403
    assert post(operator, "/secrets", name="x", value=VALUE).status_code == 403
    admin = signed("admin")
    refused = admin.post("/secrets", data={"name": "x", "value": VALUE})
    assert refused.status_code == 403 and store.list_secrets(db, "default") == []
    assert "/secrets" in admin.get("/").text  # the admin's menu has it
    assert 'href="/secrets"' not in operator.get("/").text


def test_a_refused_form_keeps_the_name_and_never_the_value(keyed, db, signed):  # noqa: F811
    admin = signed("admin")
    bad = post(admin, "/secrets", name="has space", value=VALUE)
    assert (
        bad.status_code == 422 and "name: &#39;has space&#39;" in bad.text and VALUE not in bad.text
    )
    empty = post(admin, "/secrets", name="ok", value="")
    assert empty.status_code == 422 and "value" in empty.text
    assert store.list_secrets(db, "default") == []


def test_without_a_key_the_page_says_so_and_seals_nothing(app, db, signed):  # noqa: F811
    admin = signed("admin")
    page = admin.get("/secrets")
    assert page.status_code == 200 and 'id="no-key"' in page.text
    assert 'id="secret-form"' not in page.text
    token = csrf_of(page.text)
    refused = admin.post("/secrets", data={"csrf_token": token, "name": "x", "value": VALUE})
    assert refused.status_code == 422 and "no secret key" in refused.text
    assert VALUE not in refused.text and store.list_secrets(db, "default") == []
