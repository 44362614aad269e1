"""In a real browser: an operator pauses a queue with a reason on ``/queues``, the waiting
execution's page says why it waits, and the operator resumes the queue; each step is
asserted in pgsched.queue. Screenshots of the queues, quotas and execution pages at 1400
and 390 px wide."""

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

        # quotas far above what the other browser tests use (the stack is shared)
        stack.sql.execute(
            "UPDATE pgsched.tenant SET max_running = 50, max_starts_per_hour = 100000, "
            "max_log_bytes = 100000000000 WHERE name = 'default'"
        )
        v.go("/quotas")
        assert page.locator("#tenant-default meter").count() == 3  # compute: none
        assert page.locator("form[action='/quotas/default']").count() == 0  # not an admin's
        both(v, "quotas")
        v.go("/")
        assert page.locator("#dashboard-quotas meter").count() == 3
        both(v, "dashboard")
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
        page.click("#tenant-default summary")
        page.fill("#weight-default", "0")
        page.click("form[action='/quotas/default'] button[type=submit]")
        assert "weight: '0' must be an integer from 1 to 100" in page.inner_text(
            "#err-default-weight"
        )
        assert page.input_value("#weight-default") == "0"  # what was typed is kept
        both(v, "quota-refused")
        page.fill("#weight-default", "3")
        page.click("form[action='/quotas/default'] button[type=submit]")
        page.wait_for_url("**/quotas?done=updated")
        assert stack.one("SELECT weight FROM pgsched.tenant WHERE name = 'default'") == {
            "weight": 3
        }
        assert "weight 3" in page.inner_text("#tenant-default h2")
        both(v, "quotas-saved")
    finally:
        stack.sql.execute("UPDATE pgsched.tenant SET weight = 1 WHERE name = 'default'")
        context.close()
