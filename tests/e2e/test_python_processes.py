"""Python handlers in the worker's child processes (pgsched/handlers/process_pool.py), on
real workers: a call spinning in Python or blocked in C is killed on its timeout and on
a cancel within 1 s, its process gone, while the worker's other slot keeps completing
work; a crash fails only its attempt; a child is reused, holds no login and no database
socket; ``--python-isolation thread`` still runs them in the worker itself."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from pgsched.stores import executions

from ..helpers import alive, cli, finished, trigger, wait_for

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import ctypes, os, select, time
    from pgsched import App

    app = App()

    def started():
        print("pid", os.getpid(), flush=True)

    @app.task()
    def spin():
        started()
        while True:
            pass

    @app.task()
    def paused():
        started()
        ctypes.CDLL(None).pause()  # blocked in C until a signal: TaskInterrupted never lands

    @app.task()
    def selecting():
        started()
        select.select([], [], [], 3600)

    @app.task()
    def segfault():
        started()
        ctypes.string_at(0)

    @app.task()
    def exits():
        os._exit(3)

    @app.task()
    def pid():
        return os.getpid()

    @app.task()
    def hog():
        started()
        kept = []
        while True:  # a leak: 64 MiB at a time until the allocation fails
            kept.append(bytearray(64 * 1024 * 1024))

    @app.task()
    def quick(n=0):
        print("quick", n)
        return n
""")


@pytest.fixture
def module_dir(tmp_path):
    (tmp_path / "proctasks.py").write_text(MODULE)
    return tmp_path


def _worker(start, module_dir, *extra: str):
    return start(
        "worker",
        "--concurrency",
        "2",
        "--poll-interval",
        "0.5",
        "--pythonpath",
        str(module_dir),
        *extra,
    )


def _create(dsn, name: str, *options: str) -> None:
    cli(dsn, "task", "create", name, "--python", f"proctasks:{name}", *options)


def _started_pid(sql, ident: int) -> int:
    """The pid the handler printed first (it runs from then on)."""
    line = wait_for(
        lambda: sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s AND line LIKE 'pid %%'",
            [ident],
        ).fetchone(),
        timeout=30,
        what=f"execution {ident} to start",
    )
    return int(line["line"].split()[1])


def _attempt(sql, ident: int) -> dict:
    return sql.execute(
        "SELECT state, error, started_at, finished_at FROM pgsched.execution_attempt "
        "WHERE execution_id = %s",
        [ident],
    ).fetchone()


def _quick_ones_complete(dsn, sql, n: int = 3) -> None:
    for _ in range(n):
        ident = trigger(dsn, "quick")
        assert finished(sql, ident, timeout=20)["state"] == "succeeded"


@pytest.mark.parametrize("name", ["spin", "paused"])
def test_a_stuck_call_is_killed_on_its_timeout_within_a_second(dsn, sql, start, module_dir, name):
    _create(dsn, name, "--timeout", "1")
    _create(dsn, "quick")
    worker = _worker(start, module_dir)
    ident = trigger(dsn, name)
    child = _started_pid(sql, ident)
    assert child != worker.proc.pid
    _quick_ones_complete(dsn, sql)  # the other slot keeps running while one is stuck
    done = finished(sql, ident, timeout=20)
    attempt = _attempt(sql, ident)
    assert done["state"] == "dead" and attempt["state"] == "timed_out", attempt
    assert "its process was killed" in attempt["error"]
    took = (attempt["finished_at"] - attempt["started_at"]).total_seconds()
    assert took < 1 + 1, took  # its 1 s timeout, then within 1 s killed and recorded
    assert not alive(child)
    _quick_ones_complete(dsn, sql, 1)


@pytest.mark.parametrize("name", ["selecting", "paused"])
def test_a_call_blocked_in_c_is_killed_on_cancel_within_a_second(
    dsn, db, sql, start, module_dir, name
):
    _create(dsn, name)
    _create(dsn, "quick")
    _worker(start, module_dir)
    ident = trigger(dsn, name)
    child = _started_pid(sql, ident)
    asked = sql.execute("SELECT clock_timestamp() AS now").fetchone()["now"]
    assert executions.cancel(db, ident, "default") == "cancelling"
    done = finished(sql, ident, timeout=20)
    assert done["state"] == "cancelled", done
    took = (done["finished_at"] - asked).total_seconds()
    assert took < 1, took
    assert not alive(child)
    _quick_ones_complete(dsn, sql, 2)


def test_a_crash_fails_only_its_attempt_and_the_next_call_gets_a_new_child(
    dsn, sql, start, module_dir
):
    for name in ("segfault", "exits", "pid"):
        _create(dsn, name)
    _worker(start, module_dir, "--concurrency", "1")
    first = finished(sql, trigger(dsn, "pid"))["result"]
    ident = trigger(dsn, "segfault")
    crashed = _started_pid(sql, ident)
    assert crashed == first  # the same child ran both
    done = finished(sql, ident)
    assert done["state"] == "dead"
    assert done["error"] == "the handler's process died: signal 11 (SIGSEGV)"
    after = finished(sql, trigger(dsn, "pid"))
    assert after["state"] == "succeeded" and after["result"] != first and alive(after["result"])
    done = finished(sql, trigger(dsn, "exits"))
    assert done["error"] == "the handler's process died: exit status 3"
    assert finished(sql, trigger(dsn, "pid"))["state"] == "succeeded"


def test_a_child_is_reused_and_holds_neither_login_nor_database_socket(dsn, sql, start, module_dir):
    _create(dsn, "pid")
    worker = _worker(start, module_dir, "--concurrency", "1")
    pids = {finished(sql, trigger(dsn, "pid"))["result"] for _ in range(4)}
    assert len(pids) == 1, pids
    (child,) = pids
    assert child != worker.proc.pid and alive(child)
    with open(f"/proc/{child}/environ", "rb") as f:
        environ = f.read()
    assert b"PGSCHED_DSN" not in environ and dsn.encode() not in environ
    assert b"PGSCHED_WORKER_TOKEN=" in environ  # the guardian knows it as the worker's
    links = [os.readlink(f"/proc/{child}/fd/{fd}") for fd in os.listdir(f"/proc/{child}/fd")]
    assert not [link for link in links if link.startswith("socket:")], links
    worker.stop()
    wait_for(lambda: not alive(child), timeout=10, what="the child to end with its worker")


def test_thread_isolation_runs_the_handler_in_the_worker_itself(dsn, sql, start, module_dir):
    _create(dsn, "pid")
    _create(dsn, "quick")
    worker = _worker(start, module_dir, "--python-isolation", "thread")
    assert finished(sql, trigger(dsn, "pid"))["result"] == worker.proc.pid
    ident = trigger(dsn, "quick")
    assert finished(sql, ident)["state"] == "succeeded"
    logged = sql.execute(
        "SELECT stream, line FROM pgsched.execution_log WHERE execution_id = %s", [ident]
    ).fetchall()
    assert [(r["stream"], r["line"]) for r in logged] == [("stdout", "quick 0")]
    assert json.loads(json.dumps(finished(sql, ident)["result"])) == 0


def test_a_leaking_handler_stops_at_its_memory_limit_and_only_its_child_is_replaced(
    dsn, sql, start, module_dir
):
    """``--python-memory-limit`` (RLIMIT_AS of each child): a handler that allocates
    without end gets MemoryError there, its attempt fails naming it, the worker stays as it
    was, and the next call runs in a new child."""
    _create(dsn, "hog")
    _create(dsn, "pid")
    worker = _worker(start, module_dir, "--concurrency", "1", "--python-memory-limit", "512MB")
    ident = trigger(dsn, "hog")
    leaked = _started_pid(sql, ident)
    done = finished(sql, ident)
    assert done["state"] == "dead" and "MemoryError" in (done["error"] or ""), done
    with open(f"/proc/{worker.proc.pid}/status") as f:  # the worker did not grow with it
        rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    assert rss_kib < 400 * 1024, rss_kib
    after = finished(sql, trigger(dsn, "pid"))
    assert after["state"] == "succeeded" and after["result"] != leaked
    wait_for(lambda: not alive(leaked), timeout=10, what="the leaking child to be replaced")


def test_a_memory_limit_with_the_thread_mode_is_refused(dsn):
    """A newcomer's finding: ``--python-memory-limit`` with ``--python-isolation thread``
    started and limited nothing (the help says it needs the process mode)."""
    out = cli(
        dsn, "worker", "--python-isolation", "thread", "--python-memory-limit", "1GB", check=False
    )
    assert out.returncode != 0
    assert "python_memory_limit" in out.stderr and "--python-isolation process" in out.stderr
