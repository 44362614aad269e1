"""The log stream (server-sent events) under load, served by a real uvicorn: many open
streams must not stall the rest of the app."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx2 as httpx
import pytest

from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec
from pgsched.web import api_executions, pages_executions
from pgsched.web.app import create_app
from pgsched.web.server import free_port, serve_until

from ..helpers import wait_until

STREAMS = 60  # more than the 40 threads anyio lends synchronous endpoints by default


class Served:
    """A running server: ``base`` URL, ``stop`` event, ``thread`` serving."""

    def __init__(self, base: str, stop: threading.Event, thread: threading.Thread):
        self.base, self.stop, self.thread = base, stop, thread


@pytest.fixture
def served(db) -> Iterator[Served]:
    """The app over the test database, served on a free port."""
    port = free_port("127.0.0.1", 18700)
    stop = threading.Event()
    server = threading.Thread(
        target=serve_until, args=(create_app(db), "127.0.0.1", port, stop), daemon=True
    )
    server.start()
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return httpx.get(base + "/login").status_code == 200
        except httpx.TransportError:
            return False

    wait_until(answers, message="the web admin to answer")
    yield Served(base, stop, server)
    stop.set()
    server.join(15)
    assert not server.is_alive(), "the server did not stop"


def test_open_log_streams_leave_the_app_responsive(served, db, token_for):
    tasks.create(db, TaskSpec(name="job", command="echo hi"))
    ident = tasks.trigger(
        db, "job"
    )  # pending: nobody claims it, so its log is followed until closed
    headers = {"Authorization": f"Bearer {token_for('viewer')}"}

    async def scenario() -> float:
        async with httpx.AsyncClient(
            base_url=served.base,
            headers=headers,
            timeout=60,
            limits=httpx.Limits(max_connections=STREAMS + 5),
        ) as client:
            opened = 0

            async def follow() -> None:
                nonlocal opened
                async with client.stream("GET", f"/api/v1/executions/{ident}/logs") as response:
                    assert response.status_code == 200
                    opened += 1
                    async for _ in response.aiter_bytes():
                        pass

            streams = [asyncio.create_task(follow()) for _ in range(STREAMS)]
            async with asyncio.timeout(
                30
            ):  # a poll on a condition (wait_for blocks, this is the event loop)
                while opened < STREAMS:
                    await asyncio.sleep(0.05)
            # Time passes on purpose: the load measured is every stream polling, twice.
            await asyncio.sleep(1.0)
            slowest = 0.0
            for _ in range(5):
                began = time.monotonic()
                assert (await client.get("/api/v1/tasks")).status_code == 200
                slowest = max(slowest, time.monotonic() - began)
            for stream in streams:
                stream.cancel()
            await asyncio.gather(*streams, return_exceptions=True)
            return slowest

    # In a thread of its own: an event loop left running in this thread by an earlier test
    # (Playwright's sync API runs one) would refuse asyncio.run.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slowest = pool.submit(asyncio.run, scenario()).result()
    assert slowest < 1.0, f"a listing took {slowest:.1f} s while {STREAMS} log streams were open"


def test_stopping_the_server_ends_open_log_streams_at_once(served, db, token_for):
    tasks.create(db, TaskSpec(name="job", command="echo hi"))
    ident = tasks.trigger(db, "job")
    headers = {"Authorization": f"Bearer {token_for('viewer')}"}
    opened: list[int] = []
    ended: list[bytes] = []

    def follow() -> None:
        with httpx.stream(
            "GET", f"{served.base}/api/v1/executions/{ident}/logs", headers=headers, timeout=60
        ) as response:
            opened.append(response.status_code)
            ended.append(b"".join(response.iter_bytes()))

    readers = [threading.Thread(target=follow) for _ in range(3)]
    for reader in readers:
        reader.start()
    wait_until(lambda: opened == [200] * 3, message="three open log streams")
    began = time.monotonic()
    served.stop.set()
    served.thread.join(10)
    took = time.monotonic() - began
    assert not served.thread.is_alive() and took < 2.0, f"the server took {took:.1f} s to stop"
    for reader in readers:
        reader.join(5)
    # each stream ended cleanly without an "end" event: the client resumes elsewhere
    assert len(ended) == 3 and all(b"event: end" not in body for body in ended)


def _long_log(db, lines: int) -> int:
    """An ended execution of task "job" with ``lines`` log lines ("line 1" ...)."""
    tasks.create(db, TaskSpec(name="job", command="echo hi"))
    ident = tasks.trigger(db, "job")
    db.one("execution_cancel", id=ident, tenant="default")  # pending -> cancelled: ended
    now = datetime.now(UTC)
    db.exec(
        "execution_log_insert",
        id=ident,
        attempt=1,
        tenant="default",
        seq=list(range(1, lines + 1)),
        stream=["stdout"] * lines,
        logged_at=[now] * lines,
        line=[f"line {i}" for i in range(1, lines + 1)],
    )
    return ident


def test_a_long_log_is_streamed_whole_a_batch_at_a_time(db, api, monkeypatch):
    monkeypatch.setattr(api_executions, "LOG_BATCH", 7)
    ident = _long_log(db, 7 * 3 + 2)
    viewer = api("viewer")
    text = viewer.get(f"/api/v1/executions/{ident}/logs", params={"follow": "false"}).text
    sent = [
        json.loads(d[6:])["line"]
        for d in text.splitlines()
        if d.startswith("data: ") and "line" in d
    ]
    assert sent == [f"line {i}" for i in range(1, 24)] and text.rstrip().endswith(
        '{"state": "cancelled"}'
    )
    # after= starts where a page left off, as Last-Event-ID does
    text = viewer.get(
        f"/api/v1/executions/{ident}/logs", params={"follow": "false", "after": "1:20"}
    ).text
    assert [d for d in text.splitlines() if d.startswith("id: ")] == [
        "id: 1:21",
        "id: 1:22",
        "id: 1:23",
    ]


def test_the_execution_page_shows_the_end_of_a_long_log(db, client, token_for, monkeypatch):
    monkeypatch.setattr(pages_executions, "LOG_LINES", 10)
    ident = _long_log(db, 25)
    assert (
        client.get(
            f"/login?token={token_for('viewer')}", headers={"Sec-Fetch-Site": "none"}
        ).status_code
        == 303
    )
    page = client.get(f"/executions/{ident}").text
    shown = re.findall(r"</span> (line \d+)\n", page)
    assert shown == [f"line {i}" for i in range(16, 26)] and 'id="log-cut"' in page


def test_a_stream_cut_by_shutdown_never_claims_to_have_ended(db, app, api, monkeypatch):
    monkeypatch.setattr(api_executions, "LOG_BATCH", 3)
    ident = _long_log(db, 7)
    app.state.closing.set()  # the server is stopping
    text = api("viewer").get(f"/api/v1/executions/{ident}/logs", params={"follow": "false"}).text
    # the client sees a cut stream and reconnects; an "end" now would hide lines 4-7 from it
    assert "event: end" not in text and text.count("event: line") <= 3
