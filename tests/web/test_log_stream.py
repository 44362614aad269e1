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


@pytest.fixture
def served(db) -> Iterator[str]:
    """The app over the test database, served on a free port; its base URL."""
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
    yield base
    stop.set()
    server.join(15)
    assert not server.is_alive(), "the server did not stop"


def test_open_log_streams_leave_the_app_responsive(served, db, token_for):
    tasks.create(db, TaskSpec(name="job", command="echo hi"))
    ident = tasks.trigger(db, "job")  # pending: nobody claims it, so its log is followed until closed
    headers = {"Authorization": f"Bearer {token_for('viewer')}"}

    async def scenario() -> float:
        async with httpx.AsyncClient(base_url=served, headers=headers, timeout=60,
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
