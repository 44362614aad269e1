"""The log stream (server-sent events) under load, served by a real uvicorn: many open
streams must not stall the rest of the app."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import httpx2 as httpx
import pytest

from pgsched import tasks
from pgsched.tasks import TaskSpec
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
    server = threading.Thread(target=serve_until, args=(create_app(db), "127.0.0.1", port, stop), daemon=True)
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
    ident = tasks.trigger(db, "job")  # pending: nobody claims it, so its log is followed until closed
    headers = {"Authorization": f"Bearer {token_for('viewer')}"}

    async def scenario() -> float:
        async with httpx.AsyncClient(base_url=served.base, headers=headers, timeout=60,
                                     limits=httpx.Limits(max_connections=STREAMS + 5)) as client:
            opened = 0

            async def follow() -> None:
                nonlocal opened
                async with client.stream("GET", f"/api/v1/executions/{ident}/logs") as response:
                    assert response.status_code == 200
                    opened += 1
                    async for _ in response.aiter_bytes():
                        pass

            streams = [asyncio.create_task(follow()) for _ in range(STREAMS)]
            while opened < STREAMS:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # two polls of every stream
            slowest = 0.0
            for _ in range(5):
                began = time.monotonic()
                assert (await client.get("/api/v1/tasks")).status_code == 200
                slowest = max(slowest, time.monotonic() - began)
            for stream in streams:
                stream.cancel()
            await asyncio.gather(*streams, return_exceptions=True)
            return slowest

    slowest = asyncio.run(scenario())
    assert slowest < 1.0, f"a listing took {slowest:.1f} s while {STREAMS} log streams were open"


def test_stopping_the_server_ends_open_log_streams_at_once(served, db, token_for):
    tasks.create(db, TaskSpec(name="job", command="echo hi"))
    ident = tasks.trigger(db, "job")
    headers = {"Authorization": f"Bearer {token_for('viewer')}"}
    opened: list[int] = []
    ended: list[bytes] = []

    def follow() -> None:
        with httpx.stream("GET", f"{served.base}/api/v1/executions/{ident}/logs", headers=headers,
                          timeout=60) as response:
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
