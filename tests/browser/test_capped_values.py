"""A value too large and too deep to show whole, as a person sees it: the execution page
shows a capped preview, says how large the whole is, and links to the raw JSON. The
full page goes to the artifacts folder, the view of each note to /tmp/webflood-capped-*.png."""

from __future__ import annotations

import json

from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from .conftest import Stack, Visitor


def test_an_execution_with_a_huge_deep_result_shows_a_capped_preview(
    stack: Stack, visitor: Visitor
):
    page = visitor.page
    task = tasks.create(stack.db, TaskSpec(name="browser-capped", command="true"))
    deep: list = []
    cursor = deep
    for _ in range(40):
        cursor.append({"level": len(str(cursor)), "next": []})
        cursor = cursor[0]["next"]
    result = {"rows": [{"n": i, "text": "row " * 20} for i in range(400)], "deep": deep}
    ident = stack.one(
        "INSERT INTO pgsched.execution_history (id, task_id, scheduled_at, run_at, state,"
        " trigger, priority, queue, params, attempt, max_attempts, created_at, finished_at,"
        " result) SELECT nextval('pgsched.execution_id_seq'), %s, now(), now(), 'succeeded',"
        " 'manual', 5, 'default', %s::jsonb, 1, 1, now(), now(), %s::jsonb RETURNING id",
        task["id"],
        '{"x": ' + "[" * 5000 + "]" * 5000 + "}",  # too deep for json.loads
        json.dumps(result),
    )["id"]
    visitor.go(f"/executions/{ident}")
    notes = page.locator("p.truncated")
    assert notes.count() == 2
    assert "nested deeper than can be read here" in notes.nth(0).inner_text()
    assert "longer than 16384 bytes" in notes.nth(1).inner_text()
    shot = visitor.shot("capped-execution")
    page.screenshot(path="/tmp/webflood-capped-execution.png")  # the top: params, too deep
    notes.nth(1).scroll_into_view_if_needed()
    page.screenshot(path="/tmp/webflood-capped-result.png")  # the result's end, cut at 16 KiB
    assert shot.stat().st_size > 0
    with page.expect_response(f"**/api/v1/executions/{ident}") as answer:
        notes.nth(1).locator("a").click()
    assert answer.value.status == 200
    assert json.loads(page.inner_text("body"))["result"] == result
