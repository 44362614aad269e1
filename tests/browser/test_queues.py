"""In a real browser: an operator pauses a queue with a reason on ``/queues``, the waiting
execution's page says why it waits, and the operator resumes the queue and sets its limits
as the CLI writes them (``60/1m``); an instance admin sets quotas the same way (``500GB``);
a tenant exactly at a quota is labelled "at quota". Each step is asserted in the database.
Screenshots of the queues, quotas, dashboard and execution pages at 1400 and 390 px wide."""

from __future__ import annotations

from playwright.sync_api import Browser

from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from .conftest import Stack, Visitor, signed_in

WIDE, NARROW = {"width": 1400, "height": 900}, {"width": 390, "height": 844}
QUEUE = "browser-imports"  # no worker serves it: its execution waits


def both(v: Visitor, what: str) -> None:
    """Screenshots of the page at 1400 px and at 390 px wide."""
    v.page.set_viewport_size(WIDE)
    v.shot(f"{what}-1400")
    v.page.set_viewport_size(NARROW)
    v.shot(f"{what}-390")
    v.page.set_viewport_size(WIDE)


def queue_row(stack: Stack) -> dict | None:
    return stack.one(
        "SELECT paused_at, paused_by, pause_reason FROM pgsched.queue "
        "WHERE tenant = 'default' AND name = %s",
        QUEUE,
    )


def test_an_operator_pauses_and_resumes_a_queue(stack: Stack, browser: Browser):
    tasks.create(stack.db, TaskSpec(name="browser-load", command="true", queue=QUEUE))
    waiting = tasks.trigger(stack.db, "browser-load")
    v, context = signed_in(
        stack, browser, "queues", role="operator", tenant="default", instance=False
    )
    try:
        page = v.page
        token_id = stack.one(
            "SELECT id FROM pgsched.api_token WHERE name = 'browser test' ORDER BY id DESC LIMIT 1"
        )["id"]
        v.go("/queues")
        card = page.locator(f"#queue-{QUEUE}")
        assert "active" in card.inner_text()
        both(v, "queues")

        page.fill(f"#reason-{QUEUE}", "vendor maintenance")
        page.click(f"form[action='/queues/{QUEUE}/pause'] button[type=submit]")
        page.wait_for_url("**/queues?done=queue_paused")
        row = queue_row(stack)
        assert row is not None and row["paused_at"] is not None
        assert (row["paused_by"], row["pause_reason"]) == (
            f"token {token_id}",
            "vendor maintenance",
        )
        text = card.inner_text()
        assert "paused" in text and "vendor maintenance" in text and f"token {token_id}" in text
        assert page.inner_text("p.notice").startswith("Queue paused")
        both(v, "queues-paused")

        v.go(f"/executions/{waiting}")
        assert page.inner_text("td.wait-reason") == f"queue {QUEUE} is paused: vendor maintenance"
        both(v, "execution-waiting")

        v.go("/queues")
        page.click(f"form[action='/queues/{QUEUE}/resume'] button[type=submit]")
        page.wait_for_url("**/queues?done=queue_resumed")
        row = queue_row(stack)
        assert row is not None and (row["paused_at"], row["paused_by"], row["pause_reason"]) == (
            None,
            None,
            None,
        )
        assert "active" in card.inner_text()

        page.click(f"#queue-{QUEUE} summary")
        page.fill(f"#mr-{QUEUE}", "0")
        page.click(f"form[action='/queues/{QUEUE}/limits'] button[type=submit]")
        assert "max_running: '0' must be an integer from 1" in page.inner_text(
            f"#err-{QUEUE}-max_running"
        )
        both(v, "queues-limit-refused")

        # limits as the CLI writes them: a rate of 60 a minute
        page.fill(f"#mr-{QUEUE}", "4")
        page.fill(f"#rl-{QUEUE}", "5/400d")
        page.click(f"form[action='/queues/{QUEUE}/limits'] button[type=submit]")
        assert page.inner_text(f"#err-{QUEUE}-rate_limit") == (
            "rate_limit: '5/400d' must have a period from 0.001 seconds (1 ms) to 366 days "
            "(31622400 seconds)"
        )
        assert page.input_value(f"#rl-{QUEUE}") == "5/400d"
        both(v, "queues-rate-refused")
        page.fill(f"#rl-{QUEUE}", "60/1m")
        page.click(f"form[action='/queues/{QUEUE}/limits'] button[type=submit]")
        page.wait_for_url("**/queues?done=updated")
        assert stack.one(
            "SELECT max_running, rate_limit, rate_period_seconds FROM pgsched.queue "
            "WHERE tenant = 'default' AND name = %s",
            QUEUE,
        ) == {"max_running": 4, "rate_limit": 60, "rate_period_seconds": 60.0}
        assert card.locator("span.rate").inner_text() == "60/1m"
        page.click(f"#queue-{QUEUE} summary")
        assert page.input_value(f"#rl-{QUEUE}") == "60/1m"
        assert page.input_value(f"#mr-{QUEUE}") == "4"
        both(v, "queues-limits-set")

        # quotas far above what the other browser tests use (the stack is shared)
        stack.sql.execute(
            "UPDATE pgsched.tenant SET max_running = 50, max_starts_per_hour = 100000, "
            "max_log_bytes = 100000000000 WHERE name = 'default'"
        )
        v.go("/quotas")
        assert page.locator("#tenant-default meter").count() == 3  # compute: none
        assert page.locator("form[action='/quotas/default']").count() == 0  # not an admin's
        log_row = page.locator("#tenant-default tr[data-quota='log_bytes']")
        assert "100 GB" in log_row.inner_text()
        both(v, "quotas")
        v.go("/")
        assert page.locator("#dashboard-quotas meter").count() == 3
        both(v, "dashboard")

        # exactly at a quota: "at quota" (work waits), not "over"
        stack.sql.execute(
            "UPDATE pgsched.tenant SET max_starts_per_hour = 0 WHERE name = 'default'"
        )
        v.go("/quotas")
        starts = page.locator("#tenant-default tr[data-quota='max_starts_per_hour']")
        hour_starts = stack.one(
            "SELECT CASE WHEN hour_start = date_trunc('hour', now(), 'UTC') THEN hour_starts "
            "ELSE 0 END AS n FROM pgsched.tenant_usage WHERE tenant = 'default'"
        )
        assert hour_starts is not None
        label = "at quota" if hour_starts["n"] == 0 else "over"
        assert starts.locator(".state").inner_text() == label
        both(v, "quotas-at-quota")
        v.go("/")
        dash = page.locator("#dashboard-quotas tr[data-quota='max_starts_per_hour'] .state")
        assert dash.inner_text() == label
        both(v, "dashboard-at-quota")
    finally:
        stack.sql.execute(
            "UPDATE pgsched.tenant SET max_running = NULL, max_starts_per_hour = NULL, "
            "max_log_bytes = NULL WHERE name = 'default'"
        )
        context.close()


def test_an_instance_admin_sets_a_tenant_quota(stack: Stack, browser: Browser):
    v, context = signed_in(stack, browser, "quotas", role="admin", tenant="default", instance=True)
    try:
        page = v.page
        v.go("/quotas")
        page.click("#tenant-default details.set-limits summary")
        page.fill("#weight-default", "0")
        page.click("form[action='/quotas/default'] button[type=submit]")
        assert "weight: '0' must be an integer from 1 to 100" in page.inner_text(
            "#err-default-weight"
        )
        assert page.input_value("#weight-default") == "0"  # what was typed is kept
        both(v, "quota-refused")
        page.fill("#weight-default", "3")
        page.fill("#max_log_bytes-default", "lots")
        page.click("form[action='/quotas/default'] button[type=submit]")
        assert page.inner_text("#err-default-max_log_bytes").startswith(
            "max_log_bytes: 'lots' must be a size like 100GB"
        )
        both(v, "quota-bytes-refused")
        page.fill("#max_log_bytes-default", "500GB")
        page.click("form[action='/quotas/default'] button[type=submit]")
        page.wait_for_url("**/quotas?done=updated")
        assert stack.one(
            "SELECT weight, max_log_bytes FROM pgsched.tenant WHERE name = 'default'"
        ) == {"weight": 3, "max_log_bytes": 500 * 10**9}
        assert "weight 3" in page.inner_text("#tenant-default h2")
        page.click("#tenant-default details.set-limits summary")
        assert page.input_value("#max_log_bytes-default") == "500GB"
        assert "500 GB" in page.inner_text("#tenant-default tr[data-quota='log_bytes']")
        both(v, "quotas-saved")
    finally:
        stack.sql.execute(
            "UPDATE pgsched.tenant SET weight = 1, max_log_bytes = NULL WHERE name = 'default'"
        )
        context.close()


def test_a_tenants_admin_sends_quota_alerts_to_a_webhook(stack: Stack, browser: Browser):
    v, context = signed_in(
        stack, browser, "webhook", role="admin", tenant="default", instance=False
    )
    try:
        page = v.page
        v.go("/quotas")
        assert "POSTed to nowhere" in page.inner_text("#tenant-default .alert-webhook")
        page.click("#tenant-default details.set-webhook summary")
        page.fill("#alert_webhook-default", "ftp://files.example.com/x")
        page.click("form[action='/quotas/default/webhook'] button[type=submit]")
        assert "alert_webhook: 'ftp://files.example.com/x'" in page.inner_text(
            "#err-default-alert_webhook"
        )
        assert page.input_value("#alert_webhook-default") == "ftp://files.example.com/x"
        both(v, "webhook-refused")
        page.fill("#alert_webhook-default", "https://hooks.example.com/pgsched")
        page.click("form[action='/quotas/default/webhook'] button[type=submit]")
        page.wait_for_url("**/quotas?done=updated")
        assert stack.one("SELECT alert_webhook FROM pgsched.tenant WHERE name = 'default'") == {
            "alert_webhook": "https://hooks.example.com/pgsched"
        }
        assert "https://hooks.example.com/pgsched" in page.inner_text(
            "#tenant-default .alert-webhook"
        )
        both(v, "webhook-saved")
    finally:
        stack.sql.execute("UPDATE pgsched.tenant SET alert_webhook = NULL WHERE name = 'default'")
        context.close()
