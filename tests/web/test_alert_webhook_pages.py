"""The tenant's alert webhook on ``/quotas`` and in the API (migration 0034): its admin sets
it there, a viewer sees where alerts go but has no form and is refused; a bad URL is shown
beside its field (422) and changes nothing."""

from __future__ import annotations

from pgsched.stores import tenants

from .test_limits_pages import post, signed  # noqa: F401 (a fixture)

HOOK = "https://hooks.example.com/pgsched"


def test_the_tenants_admin_sets_the_webhook_and_a_viewer_only_sees_it(db, signed):  # noqa: F811
    admin, _ = signed("admin")
    page = admin.get("/quotas")
    assert "Quota alerts are POSTed to" in page.text and "nowhere" in page.text
    assert 'action="/quotas/default/webhook"' in page.text
    assert post(admin, "/quotas/default/webhook", alert_webhook=HOOK).status_code == 303
    assert tenants.alert_webhook(db, "default")["alert_webhook"] == HOOK
    viewer, _ = signed("viewer")
    page = viewer.get("/quotas")
    assert "<code>https://hooks.example.com/…</code>" in page.text
    assert HOOK not in page.text  # its path may be its token
    assert 'action="/quotas/default/webhook"' not in page.text
    assert post(viewer, "/quotas/default/webhook", alert_webhook="").status_code == 403
    assert tenants.alert_webhook(db, "default")["alert_webhook"] == HOOK
    assert post(admin, "/quotas/default/webhook", alert_webhook="").status_code == 303
    assert tenants.alert_webhook(db, "default")["alert_webhook"] is None


def test_a_bad_url_is_shown_beside_its_field_and_nothing_changes(db, signed):  # noqa: F811
    admin, _ = signed("admin")
    tenants.set_alert_webhook(db, "default", HOOK)
    refused = post(admin, "/quotas/default/webhook", alert_webhook="ftp://files.example.com")
    assert refused.status_code == 422
    assert 'id="err-default-alert_webhook"' in refused.text
    assert "ftp://files.example.com" in refused.text  # the draft stays in the field
    assert tenants.alert_webhook(db, "default")["alert_webhook"] == HOOK
    metadata = "http://169.254.169.254/latest/meta-data/"  # the SSRF guard's refusal
    refused = post(admin, "/quotas/default/webhook", alert_webhook=metadata)
    assert refused.status_code == 422 and 'id="err-default-alert_webhook"' in refused.text
    assert "169.254.169.254 is a link-local address" in refused.text
    assert tenants.alert_webhook(db, "default")["alert_webhook"] == HOOK


def test_the_api_reads_and_sets_it_and_names_a_bad_field(db, client, token_for):
    admin = {"Authorization": f"Bearer {token_for('admin')}"}
    viewer = {"Authorization": f"Bearer {token_for('viewer')}"}
    path = "/api/v1/tenants/default/alert-webhook"
    assert client.get(path, headers=viewer).json() == {"tenant": "default", "alert_webhook": None}
    assert client.put(path, json={"alert_webhook": HOOK}, headers=viewer).status_code == 403
    with_login = "https://u:pw@hooks.example.com/x"  # would be logged, and never sent
    refused = client.put(path, json={"alert_webhook": with_login}, headers=admin)
    assert refused.status_code == 422 and "user name or password" in refused.text
    secret_hook = "https://hooks.example.com:8443/services/T0/B0/XyZ?token=abc"
    put = client.put(path, json={"alert_webhook": secret_hook}, headers=admin)
    assert put.status_code == 200 and put.json()["alert_webhook"] == secret_hook
    assert client.get(path, headers=admin).json()["alert_webhook"] == secret_hook
    shown = client.get(path, headers=viewer).json()["alert_webhook"]
    assert shown == "https://hooks.example.com:8443/…"  # no user, path or query to a viewer
    bad = client.put(path, json={"alert_webhook": "mailto:x@example.com"}, headers=admin)
    assert bad.status_code == 422 and "alert_webhook" in bad.text
    assert client.put(path, json={}, headers=admin).status_code == 422
    assert client.put(path, json={"alert_webhook": None}, headers=admin).json() == {
        "tenant": "default",
        "alert_webhook": None,
    }


def test_a_tenants_admin_may_not_read_or_set_another_tenants(db, sql, signed, client, token_for):  # noqa: F811
    """The test app's login is the installation's (it passes the database's tenant check),
    so this is the web's own refusal, the one an installation's web login relies on."""
    sql.execute("INSERT INTO pgsched.tenant (name) VALUES ('other')")
    tenants.set_alert_webhook(db, "other", HOOK)
    admin, _ = signed("admin")
    assert (
        post(admin, "/quotas/other/webhook", alert_webhook="https://evil.example.com/").status_code
        == 403
    )
    headers = {"Authorization": f"Bearer {token_for('admin')}"}
    path = "/api/v1/tenants/other/alert-webhook"
    assert client.get(path, headers=headers).status_code == 403
    assert client.put(path, json={"alert_webhook": None}, headers=headers).status_code == 403
    assert tenants.alert_webhook(db, "other")["alert_webhook"] == HOOK
    instance = {"Authorization": f"Bearer {token_for('admin', instance=True)}"}
    assert client.get(path, headers=instance).json()["alert_webhook"] == HOOK
