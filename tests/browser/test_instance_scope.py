"""The instance scope in a real browser (issue 17, item 6): a tenant's admin sees no
Workers or Scheduler link and gets 403 on those pages; an instance admin sees the workers
with the tenants each serves. Screenshots: the artifacts folder, and /tmp/tenantworker-*.png
to look at."""

from __future__ import annotations

import shutil
from pathlib import Path

from .conftest import signed_in

SHOTS = Path("/tmp")


def test_a_tenant_admin_sees_no_cluster_page_and_an_instance_admin_sees_the_workers(stack, browser):
    tenant, context = signed_in(
        stack, browser, "tenant_admin_nav", role="admin", tenant="acme", instance=False
    )
    try:
        nav = [a.inner_text() for a in tenant.page.query_selector_all("nav[aria-label=Main] a")]
        # its own tenant's audit log is an admin's, a tenant's too
        assert nav == [
            "Dashboard",
            "Tasks",
            "Executions",
            "DAGs",
            "Dead letters",
            "Queues",
            "Quotas",
            "Secrets",
            "Audit",
        ]
        assert "Health" not in tenant.page.inner_text("main")
        shutil.copy(tenant.shot("dashboard"), SHOTS / "tenantworker-tenant-admin-nav.png")
        answer = tenant.page.goto(stack.url + "/workers")
        assert answer is not None and answer.status == 403
        tenant.shot("workers-403")
    finally:
        context.close()

    instance, context = signed_in(
        stack, browser, "instance_admin_cluster", role="admin", tenant="acme", instance=True
    )
    try:
        nav = [a.inner_text() for a in instance.page.query_selector_all("nav[aria-label=Main] a")]
        assert nav[-4:] == ["Workers", "Scheduler", "Secrets", "Audit"]
        instance.go("/workers")
        row = instance.page.inner_text("main table tbody")
        assert "default" in row  # the stack's worker serves tenant 'default' (its default)
        shutil.copy(instance.shot("workers"), SHOTS / "tenantworker-instance-admin-workers.png")
        instance.go("/scheduler")
        assert instance.page.query_selector("main h1") is not None
        shutil.copy(instance.shot("scheduler"), SHOTS / "tenantworker-instance-admin-scheduler.png")
    finally:
        context.close()
