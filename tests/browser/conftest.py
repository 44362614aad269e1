"""Browser tests: Debian's Chromium driven by Playwright against the real web server
(uvicorn in a thread of this process), a real ``pgsched worker`` and a real ``pgsched
scheduler`` subprocess, on one test database shared by the tests of a session (each test
uses task names of its own).

Every page a test visits is saved as a PNG in ``$PGSCHED_ARTIFACTS`` (default
``tests/browser/artifacts/``), named ``TEST-NN-WHAT.png``. Playwright's own browser
downloads are never used: ``CHROMIUM`` is the system's.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
from psycopg.rows import dict_row

from pgsched.db import Database
from pgsched.secret_keys import Keyring
from pgsched.web.app import create_app
from pgsched.web.credentials import create_token
from pgsched.web.server import free_port, serve_until

from ..conftest import _fresh_database
from ..helpers import Process, wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
KEYRING = Keyring([os.urandom(32)])
ARTIFACTS = Path(os.environ.get("PGSCHED_ARTIFACTS") or Path(__file__).parent / "artifacts")


class Stack:
    """The running system: ``url`` of the web admin, ``db`` (a pool), ``sql`` (an
    autocommit connection for assertions), ``dsn``, and the worker process."""

    def __init__(self, dsn: str, url: str, db: Database, sql: psycopg.Connection, worker: Process):
        self.dsn, self.url, self.db, self.sql, self.worker = dsn, url, db, sql, worker

    def one(self, query: str, *args: object) -> dict | None:
        return self.sql.execute(query, args).fetchone()


@pytest.fixture(scope="module")
def stack(
    pg_server: dict, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium")
    with _fresh_database(pg_server, "pgsched_b", template_db) as dsn:
        db = Database.connect(dsn, max_size=8)
        port = free_port("127.0.0.1", 18600)
        stop = threading.Event()
        app = create_app(db)
        app.state.secret_keyring = KEYRING  # /secrets seals with it (pgsched web: the env's)
        server = threading.Thread(
            target=serve_until,
            args=(app, "127.0.0.1", port, stop),
            name="web",
            daemon=True,
        )
        server.start()
        worker = Process(
            dsn,
            "worker",
            "--queue",
            "default",
            "--concurrency",
            "4",
            "--heartbeat-interval",
            "1",
            log_dir=tmp_path_factory.mktemp("worker"),
        )
        scheduler = Process(dsn, "scheduler", log_dir=tmp_path_factory.mktemp("scheduler"))
        sql = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)
        sql.execute("SET TIME ZONE 'UTC'")
        try:
            wait_until(
                lambda: sql.execute(
                    "SELECT 1 FROM pgsched.worker WHERE state = 'running'"
                ).fetchone(),
                message="the worker registers",
            )
            wait_until(
                lambda: sql.execute("SELECT 1 FROM pgsched.leader").fetchone(),
                message="a scheduler leads",
            )
            yield Stack(dsn, f"http://127.0.0.1:{port}", db, sql, worker)
        finally:
            worker.stop()
            scheduler.stop()
            stop.set()
            server.join(10)
            sql.close()
            db.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Visitor:
    """A signed-in browser tab: ``page`` (Playwright), ``go(path)`` and ``shot(what)``
    (a full-page screenshot in the artifacts folder)."""

    def __init__(self, page: Page, url: str, test: str):
        self.page, self.url, self.test, self.n = page, url, test, 0

    def go(self, path: str) -> None:
        self.page.goto(self.url + path)

    def shot(self, what: str) -> Path:
        self.n += 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.test}-{self.n:02d}-{what}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def signed_in(
    stack: Stack,
    browser: Browser,
    test: str,
    *,
    role: str,
    tenant: str,
    instance: bool,
    may_reveal: bool = False,
) -> tuple[Visitor, BrowserContext]:
    """A fresh browser context signed in through the sign-in form with a token made now of
    ``role`` in ``tenant`` (``instance``: of the instance scope; ``may_reveal``: reading
    sensitive values); close the context after."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    v = Visitor(page, stack.url, test)
    token, _ = create_token(
        stack.db,
        role=role,
        tenant=tenant,
        name="browser test",
        instance=instance,
        may_reveal=may_reveal,
    )
    v.go("/login")
    v.shot("login")
    page.fill("#token", token)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(stack.url + "/")
    return v, context


@pytest.fixture
def visitor(stack: Stack, browser: Browser, request: pytest.FixtureRequest) -> Iterator[Visitor]:
    """A fresh browser context signed in as an operator of the instance scope (the workers
    and scheduler pages are an instance principal's) through the sign-in form."""
    test = re.sub(r"^test_", "", request.node.name)
    v, context = signed_in(stack, browser, test, role="operator", tenant="default", instance=True)
    yield v
    context.close()
