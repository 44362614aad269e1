"""A task's secrets as a person sees them (issue 19, item 4): an operator's task and
execution pages show the env values and sensitive params as masks and hold no plaintext
anywhere in the page; an admin granted the reveal permission (migration 0036) sees the values. The task page goes to the artifacts
folder and to /tmp/masked-task.png."""

from __future__ import annotations

from pgsched.masking import MASK
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from .conftest import Stack, Visitor, signed_in

SECRETS = ("hunter2-browser", "tok-browser-1", "cust-browser-2", "run-browser-3")


def test_an_operator_sees_masks_and_an_admin_the_values(stack: Stack, visitor: Visitor, browser):
    spec = TaskSpec(
        name="browser-masked",
        command="true",
        env={"DB_PASSWORD": SECRETS[0], "REGION": "eu-west-1"},
        params={"api_token": SECRETS[1], "customer": SECRETS[2], "batch": 50},
        sensitive_params=["customer"],
    )
    tasks.create(stack.db, spec)
    run = tasks.trigger(stack.db, spec.name, params={"password": SECRETS[3]})
    page = visitor.page
    visitor.go(f"/tasks/{spec.name}")
    shot = visitor.shot("operator-task")
    page.screenshot(path="/tmp/masked-task.png", full_page=True)
    html = page.content()
    assert [s for s in SECRETS if s in html] == []
    assert f"DB_PASSWORD={MASK}" in page.inner_text("body") and '"batch": 50' in html
    assert shot.stat().st_size > 0
    visitor.go(f"/executions/{run}")
    visitor.shot("operator-execution")
    assert [s for s in SECRETS if s in page.content()] == []
    admin, context = signed_in(
        stack,
        browser,
        "masked-admin",
        role="admin",
        tenant="default",
        instance=False,
        may_reveal=True,
    )
    try:
        admin.go(f"/tasks/{spec.name}")
        admin.shot("admin-task")
        assert f"DB_PASSWORD={SECRETS[0]}" in admin.page.inner_text("body")
    finally:
        context.close()
