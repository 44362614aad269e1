"""The account and audit pages in a real browser, and a followed log that stops when the
session is ended elsewhere (the page says so instead of reconnecting)."""

from __future__ import annotations

import re

from playwright.sync_api import Browser

from pgsched.stores import executions, tasks
from pgsched.taskspec import TaskSpec
from pgsched.web.credentials import create_user, end_user_sessions

from ..helpers import wait_until
from .conftest import ARTIFACTS, Stack, Visitor

PASSWORD = "correct horse"


def _signed_in_as(stack: Stack, browser: Browser, username: str, test: str) -> Visitor:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    v = Visitor(page, stack.url, test)
    v.go("/login")
    page.fill("#username", username)
    page.fill("#password", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(stack.url + "/")
    return v


def test_account_sign_out_everywhere_and_the_audit_log(stack: Stack, browser: Browser):
    create_user(stack.db, "b-root", PASSWORD, role="admin", tenant="b-lab")
    create_user(stack.db, "b-ada", PASSWORD, role="viewer", tenant="b-lab")
    admin = _signed_in_as(stack, browser, "b-root", "account")
    ada = _signed_in_as(stack, browser, "b-ada", "account-ada")
    admin.page.click("a[href='/account']")
    admin.page.wait_for_selector("#users")
    assert "b-ada" in admin.page.inner_text("#users")
    assert len(admin.page.query_selector_all("#sessions tbody tr")) == 1
    admin.shot("account")
    admin.page.click("#users form[action='/users/sign-out'] input[value='b-ada'] ~ button")
    admin.page.wait_for_selector(".notice")
    ada.go("/tasks")
    assert ada.page.url.startswith(stack.url + "/login")  # ended by the admin
    admin.go("/audit")
    table = admin.page.inner_text("#audit")
    assert "sign_out_everywhere" in table and "user b-ada" in table and "sign_in" in table
    path = admin.shot("audit")
    assert path.parent == ARTIFACTS
    admin.page.context.close()
    ada.page.context.close()


def test_a_followed_log_stops_when_the_session_ends(stack: Stack, browser: Browser):
    create_user(stack.db, "b-eve", PASSWORD, role="viewer")
    tasks.create(stack.db, TaskSpec(name="browser-sleeper", command="echo started; sleep 30"))
    ident = tasks.trigger(stack.db, "browser-sleeper")
    eve = _signed_in_as(stack, browser, "b-eve", "log-revoked")
    try:
        wait_until(
            lambda: executions.find(stack.db, ident, "default")["state"] == "running",
            message="the worker runs it",
        )
        eve.go(f"/executions/{ident}")
        assert eve.page.inner_text("#live") == "live"
        end_user_sessions(stack.db, "b-eve")  # ended from elsewhere (an admin, the CLI)
        eve.page.wait_for_selector("#log-end:not([hidden])", timeout=5_000)
        assert eve.page.inner_text("#live") == "signed out"
        assert re.search(r"Your session ended", eve.page.inner_text("#log-end"))
        eve.shot("log-revoked")
    finally:
        executions.cancel(stack.db, ident, "default")
        eve.page.context.close()
