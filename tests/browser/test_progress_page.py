"""In a real browser: the execution page of a running Python task shows its handler's
``ctx.progress`` (a bar, the percentage and the message) and follows it live, without a
reload, as the handler reports more (the log stream's ``progress`` events). Screenshots
of the page at each step; the stored progress is asserted in the database."""

from __future__ import annotations

import textwrap
from pathlib import Path

from playwright.sync_api import Browser, expect

from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..helpers import Process, wait_until
from .conftest import Stack, signed_in

QUEUE = "browser-progress"  # served by this test's own worker, which imports the module

MODULE = textwrap.dedent("""
    import os, time
    from pgsched import App

    app = App()

    def _until(path):
        while not os.path.exists(path):
            time.sleep(0.02)

    @app.task(queue="browser-progress")
    def crawl(folder, *, ctx):
        ctx.progress(0.3, "page 1 of 3")
        _until(os.path.join(folder, "one"))
        ctx.progress(0.6, "page 2 of 3")
        _until(os.path.join(folder, "two"))
        return "crawled"
""")


def test_the_execution_page_follows_progress_live(stack: Stack, browser: Browser, tmp_path: Path):
    (tmp_path / "progress_tasks.py").write_text(MODULE)
    worker = Process(
        stack.dsn,
        "worker",
        "--queue",
        QUEUE,
        "--pythonpath",
        str(tmp_path),
        log_dir=tmp_path,
    )
    v, context = signed_in(
        stack, browser, "progress", role="viewer", tenant="default", instance=False
    )
    try:
        tasks.create(
            stack.db,
            TaskSpec(
                name="browser-crawl",
                handler_kind="python",
                python_target="progress_tasks:crawl",
                queue=QUEUE,
                params={"folder": str(tmp_path)},
            ),
        )
        ident = tasks.trigger(stack.db, "browser-crawl")
        wait_until(
            lambda: (
                stack.one("SELECT progress FROM pgsched.execution WHERE id = %s", ident)
                and stack.one("SELECT progress FROM pgsched.execution WHERE id = %s", ident)[
                    "progress"
                ]
                == 0.3
            ),
            message="progress 0.3 stored",
        )
        v.go(f"/executions/{ident}")
        page = v.page
        expect(page.locator("#progress-pct")).to_have_text("30%")
        expect(page.locator("#progress-message")).to_have_text("page 1 of 3")
        assert page.locator("#progress").get_attribute("value") == "0.3"
        v.shot("running-30")
        (tmp_path / "one").write_text("")
        # no reload: the page's log stream brings the new report
        expect(page.locator("#progress-pct")).to_have_text("60%", timeout=15_000)
        expect(page.locator("#progress-message")).to_have_text("page 2 of 3")
        v.shot("running-60")
        (tmp_path / "two").write_text("")
        expect(page.locator("#live")).to_have_text("ended", timeout=15_000)
        page.reload()
        expect(page.locator("#progress-pct")).to_have_text("60%")
        v.shot("ended")
        row = stack.one(
            "SELECT state, progress, progress_message FROM pgsched.execution_history WHERE id = %s",
            ident,
        )
        assert row == {"state": "succeeded", "progress": 0.6, "progress_message": "page 2 of 3"}
    finally:
        context.close()
        worker.stop()
