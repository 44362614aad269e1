"""Open log streams, served by a real uvicorn, close within seconds of their token or
session being revoked, whichever way it is revoked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx2 as httpx
import pytest

from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec
from pgsched.web.credentials import (
    create_token,
    create_user,
    delete_user,
    end_user_sessions,
    revoke_token,
    set_password,
)

from ..helpers import wait_until
from .conftest import csrf_of
from .test_log_stream import served  # noqa: F401  (the fixture: the app on a real server)

PASSWORD = "correct horse"
CLOSES_WITHIN = 3.0  # seconds from a revocation to the stream's end (it re-checks every second)


class Stream:
    """A followed log read in a thread: ``status``, ``body`` once it ended, ``ended_at``."""

    def __init__(self, client: httpx.Client, path: str):
        self.status: int | None = None
        self.body = b""
        self.ended_at: float | None = None
        self.thread = threading.Thread(target=self._read, args=(client, path), daemon=True)
        self.thread.start()
        wait_until(lambda: self.status is not None, message="the log stream to open")

    def _read(self, client: httpx.Client, path: str) -> None:
        with client.stream("GET", path, timeout=60) as response:
            self.status = response.status_code
            for chunk in response.iter_bytes():
                self.body += chunk
        self.ended_at = time.monotonic()


def _pending_execution(db) -> int:
    tasks.create(db, TaskSpec(name="job", command="echo hi"))
    return tasks.trigger(db, "job")  # pending: nobody claims it, so its log is followed


def _browser(base: str, **fields: str) -> httpx.Client:
    """An httpx client signed in through the sign-in form (its cookie jar holds the session)."""
    browser = httpx.Client(base_url=base, follow_redirects=False)
    page = browser.get("/login")
    done = browser.post("/login", data={"csrf_token": csrf_of(page.text), **fields})
    assert done.status_code == 303, done.text
    return browser


def _by_token(db, sql) -> tuple[dict[str, str], Callable[[], None]]:
    token, row = create_token(db, role="viewer")
    return {"token": token}, lambda: revoke_token(db, row["id"])


def _expiry(db, sql) -> tuple[dict[str, str], Callable[[], None]]:
    token, row = create_token(db, role="viewer", expires_in=3600)

    def expire() -> None:  # its hour passes, by the database's clock
        sql.execute("UPDATE pgsched.api_token SET expires_at = now() WHERE id = %s", (row["id"],))

    return {"token": token}, expire


def _user(db) -> dict[str, str]:
    create_user(db, "ada", PASSWORD, role="viewer")
    return {"username": "ada", "password": PASSWORD}


REVOCATIONS = {
    "token revoked": _by_token,
    "token expired": _expiry,
    "signed out everywhere": lambda db, sql: (_user(db), lambda: end_user_sessions(db, "ada")),
    "password changed": lambda db, sql: (_user(db), lambda: set_password(db, "ada", "new horse!")),
    "user deleted": lambda db, sql: (_user(db), lambda: delete_user(db, "ada")),
}


CASES = [("session", how) for how in REVOCATIONS] + [
    ("bearer", "token revoked"),
    ("bearer", "token expired"),
]


@pytest.mark.parametrize(("credential", "how"), CASES)
def test_an_open_log_stream_closes_within_seconds_of_revocation(
    served,  # noqa: F811
    db,
    sql,
    how,
    credential,
):
    fields, revoke = REVOCATIONS[how](db, sql)
    ident = _pending_execution(db)
    if credential == "session":
        client = _browser(served.base, **fields)
    else:
        client = httpx.Client(
            base_url=served.base, headers={"Authorization": f"Bearer {fields['token']}"}
        )
    try:
        stream = Stream(client, f"/api/v1/executions/{ident}/logs")
        assert stream.status == 200
        # Time passes on purpose: the stream is seen to stay open while its credential holds.
        time.sleep(1.5)
        assert stream.ended_at is None, stream.body
        revoked_at = time.monotonic()
        revoke()
        stream.thread.join(CLOSES_WITHIN + 5)
        assert stream.ended_at is not None, "the stream was still open"
        took = stream.ended_at - revoked_at
        assert took < CLOSES_WITHIN, f"the stream closed {took:.1f} s after the revocation"
        assert b"event: revoked" in stream.body and b"event: end" not in stream.body
        again = client.get(f"/api/v1/executions/{ident}/logs")
        assert again.status_code == 401  # reconnecting is refused too
    finally:
        client.close()


def test_signing_out_closes_the_stream_of_that_session(served, db):  # noqa: F811
    ident = _pending_execution(db)
    create_user(db, "ada", PASSWORD, role="viewer")
    browser = _browser(served.base, username="ada", password=PASSWORD)
    # the same session in a second connection, as a second tab's stream
    tab = httpx.Client(base_url=served.base, cookies=browser.cookies)
    try:
        stream = Stream(tab, f"/api/v1/executions/{ident}/logs")
        page = browser.get("/")
        assert page.status_code == 200
        began = time.monotonic()
        out = browser.post("/logout", data={"csrf_token": csrf_of(page.text)})
        assert out.status_code == 303
        stream.thread.join(CLOSES_WITHIN + 5)
        assert stream.ended_at is not None and stream.ended_at - began < CLOSES_WITHIN
        assert b"event: revoked" in stream.body
    finally:
        tab.close()
        browser.close()
