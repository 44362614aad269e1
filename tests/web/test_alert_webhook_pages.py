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
    assert f"<code>{HOOK}</code>" in page.text
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


def test_the_api_reads_and_sets_it_and_names_a_bad_field(db, client, token_for):
    admin = {"Authorization": f"Bearer {token_for('admin')}"}
    viewer = {"Authorization": f"Bearer {token_for('viewer')}"}
    path = "/api/v1/tenants/default/alert-webhook"
    assert client.get(path, headers=viewer).json() == {"tenant": "default", "alert_webhook": None}
    assert client.put(path, json={"alert_webhook": HOOK}, headers=viewer).status_code == 403
    put = client.put(path, json={"alert_webhook": HOOK}, headers=admin)
    assert put.status_code == 200 and put.json()["alert_webhook"] == HOOK
    bad = client.put(path, json={"alert_webhook": "mailto:x@example.com"}, headers=admin)
    assert bad.status_code == 422 and "alert_webhook" in bad.text
    assert client.put(path, json={}, headers=admin).status_code == 422
    assert client.put(path, json={"alert_webhook": None}, headers=admin).json() == {
        "tenant": "default",
        "alert_webhook": None,
    }
