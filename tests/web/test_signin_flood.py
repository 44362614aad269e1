"""A flood of wrong-password sign-ins against a real ``pgsched web`` process: other
requests still answer in under 100 ms and the process stays under a memory bound.

Before the throttle and the bounded hashing executor, 40 parallel sign-ins took the
process to 2.5 GB (argon2 holds 64 MiB per hash, and Starlette's thread pool has 40
threads) and a viewer's page to 16 s.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pgsched.web.credentials import create_user
from pgsched.web.server import free_port

from ..helpers import Process, cli, wait_until

pytestmark = pytest.mark.e2e

FLOOD = 300  # parallel wrong-password sign-ins
LATENCY = 0.100  # seconds: what every other request must answer within
RSS_BOUND = 400 * 1024 * 1024  # bytes: the web process's peak resident memory (VmHWM)
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def peak_rss(pid: int) -> int:
    """The peak resident set of process ``pid`` (VmHWM of /proc/PID/status), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def request(port: int, method: str, path: str, body: str = "", headers=None):
    """``(status, headers, body)`` of one request on a new connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        response = conn.getresponse()
        headers = dict(response.getheaders())
        # every cookie set (a sign-in sets the session's and clears the anonymous CSRF one),
        # as a Cookie header would send them back
        headers["set-cookie"] = "; ".join(
            v.split(";")[0] for k, v in response.getheaders() if k.lower() == "set-cookie"
        )
        return response.status, headers, response.read().decode()
    finally:
        conn.close()


def answers_at(port: int) -> bool:
    try:
        return request(port, "GET", "/login")[0] == 200
    except OSError:  # not listening yet
        return False


class Timer:
    """Times requests on one kept-alive connection until stopped: ``seconds`` of each,
    and the statuses seen."""

    def __init__(self, port: int, path: str, headers: dict[str, str]):
        self.port, self.path, self.headers = port, path, headers
        self.seconds: list[float] = []
        self.statuses: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"timer {path}", daemon=True)

    def _run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        while not self.stop.is_set():
            began = time.perf_counter()
            conn.request("GET", self.path, headers=self.headers)
            response = conn.getresponse()
            response.read()
            self.seconds.append(time.perf_counter() - began)
            self.statuses.add(response.status)
            self.stop.wait(0.02)  # pacing: a person clicking, not a second flood
        conn.close()

    def report(self) -> str:
        s = sorted(self.seconds)
        return (
            f"{self.path}: {len(s)} requests, median {statistics.median(s) * 1000:.1f} ms, "
            f"p90 {s[int(len(s) * 0.9)] * 1000:.1f} ms, max {s[-1] * 1000:.1f} ms, "
            f"{sum(x >= LATENCY for x in s)} at or over {LATENCY * 1000:.0f} ms"
        )


def flood(port: int, cookie: str, csrf: str, usernames: list[str]) -> list[tuple[int, dict]]:
    """``FLOOD`` wrong-password sign-ins from another process (:mod:`.signin_flood_client`),
    one thread each, released at once; their ``(status, headers)``."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.web.signin_flood_client", str(port), cookie, csrf]
        + [str(FLOOD), *usernames],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
        check=True,
    ).stdout
    answers = [json.loads(line) for line in out.splitlines()]
    return [
        (a["status"], {"retry-after": a["retry_after"]} if a["retry_after"] else {})
        for a in answers
    ]


def attack(dsn: str, db, tmp_path: Path, *web_options: str, usernames: list[str]):
    """Start ``pgsched web`` with ``web_options``, time a signed-in viewer's page and a
    Bearer API GET while ``FLOOD`` wrong-password sign-ins run; return the answers to the
    flood, the two timers and the process's peak RSS (bytes)."""
    token = cli(dsn, "token", "create", "--role", "viewer").stdout.strip()
    create_user(db, "ada", "correct horse", role="viewer")
    # a port of its own: other test runs on this machine start servers from 18000 up
    port = free_port("127.0.0.1", random.randrange(20_000, 30_000))
    web = Process(dsn, "web", "--port", str(port), *web_options, log_dir=tmp_path)
    try:
        wait_until(
            lambda: (
                web.proc.poll() is not None or ("web admin on" in web.output and answers_at(port))
            ),
            timeout=30,
            message="the web admin to answer",
        )
        assert web.proc.poll() is None, web.output  # it is ours that answers
        # the viewer signs in with the link, opened directly
        status, headers, _ = request(
            port, "GET", f"/login?token={token}", headers={"Sec-Fetch-Site": "none"}
        )
        assert status == 303, headers
        viewer_cookie = headers["set-cookie"]
        # the attacker's session: the form's CSRF token (a cookie and its token are all it needs)
        _, headers, page = request(port, "GET", "/login")
        cookie, csrf = headers["set-cookie"], _CSRF.search(page).group(1)
        before = peak_rss(web.proc.pid)
        timers = [
            Timer(port, "/tasks", {"Cookie": viewer_cookie}),
            Timer(port, "/api/v1/tasks", {"Authorization": f"Bearer {token}"}),
        ]
        for t in timers:
            t.thread.start()
        wait_until(lambda: all(t.seconds for t in timers), message="the timers to start")
        answers = flood(port, cookie, csrf, usernames)
        for t in timers:
            t.stop.set()
            t.thread.join(30)
        peak = peak_rss(web.proc.pid)
        print(f"peak RSS {before / 2**20:.0f} MiB before, {peak / 2**20:.0f} MiB after the flood")
        for t in timers:
            print(t.report())
        return answers, timers, peak
    finally:
        web.stop()


def check(answers, timers, peak) -> None:
    assert len(answers) == FLOOD
    for t in timers:
        assert t.statuses == {200}, t.statuses
        # The claim is "under 100 ms", held by the median. On this 2-core machine, shared
        # with other test runs (load 4-6), the 90th percentile gets a slack of 2× (it is
        # 17-65 ms when the load is lower), and the max one of 20× (seen: 140-910 ms): the
        # one or two requests caught at the instant the flood lands wait while the event
        # loop accepts and answers 300 connections and the attacker's 300 threads, on the
        # same two cores, wake together. Before the fix, a viewer's page took 13-16 s and
        # the process reached 2.4 GB.
        ordered = sorted(t.seconds)
        assert statistics.median(ordered) < LATENCY, t.report()
        assert ordered[int(len(ordered) * 0.9)] < 2 * LATENCY, t.report()
        assert ordered[-1] < 20 * LATENCY, t.report()
    assert peak < RSS_BOUND, f"peak RSS {peak / 2**20:.0f} MiB"


def test_a_sign_in_flood_is_throttled_and_other_requests_still_answer_at_once(dsn, db, tmp_path):
    """The defaults (20 failures per address per minute, 5 per username per 5 minutes): the
    flood from one address is answered 429 with Retry-After before anything is hashed."""
    answers, timers, peak = attack(dsn, db, tmp_path, usernames=["ada", "root", "admin"])
    statuses = [status for status, _ in answers]
    refused = [headers for status, headers in answers if status in (429, 503)]
    print(f"flood answers: { {s: statuses.count(s) for s in set(statuses)} }")
    # 20 sign-ins from one address are let through (the hashing threads and their queue
    # take 10 of them, the others are 503); every one after is 429, unread
    assert statuses.count(401) <= 20 and statuses.count(429) >= FLOOD - 20, statuses
    assert len(refused) >= FLOOD - 20, statuses
    assert all(1 <= int(h["retry-after"]) <= 300 for h in refused)
    assert set(statuses) <= {401, 429, 503}
    check(answers, timers, peak)


def test_a_flood_the_throttle_lets_through_waits_on_two_hashing_threads_not_forty(
    dsn, db, tmp_path
):
    """The throttle set out of the way (a flood from many addresses, or a proxy in front,
    looks like this): the bounded hashing executor alone keeps memory and the other
    requests' latency; what it cannot take at once is answered 503 with Retry-After."""
    answers, timers, peak = attack(
        dsn,
        db,
        tmp_path,
        *("--address-failures", "1000", "--user-failures", "1000"),
        usernames=[f"guess-{i}" for i in range(FLOOD)],
    )
    statuses = [status for status, _ in answers]
    print(f"flood answers: { {s: statuses.count(s) for s in set(statuses)} }")
    busy = [headers for status, headers in answers if status == 503]
    assert busy and all(int(h["retry-after"]) >= 1 for h in busy), statuses
    assert set(statuses) <= {401, 503}
    check(answers, timers, peak)
