"""Progress and results (issue 20, item 3) on real workers, in both Python isolation modes:
a handler that takes ``ctx`` gets its execution's id, attempt, scheduled time (UTC),
tenant and task, a logger into the execution's log, and ``ctx.progress``, stored on the
execution at most a few times a second and shown live by ``execution show --json``; a bad
progress value fails the attempt naming the field and value. ``App.wait`` and
``App.wait_async`` return the result (or raise the execution's error) within 100 ms of the
finish, by the database's clock, woken by NOTIFY; a timeout raises TimeoutError."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
import time

import pytest

from pgsched import App, ExecutionFailed

from ..helpers import cli, finished, trigger, wait_until

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import json, os, time
    from pgsched import App

    app = App()
    FLAG = os.environ["PROGRESS_FLAG"]

    @app.task()
    def steps(*, ctx):
        ctx.logger.info("begin %s", ctx.task_name)
        print("meta", json.dumps({
            "id": ctx.execution_id, "attempt": ctx.attempt, "tenant": ctx.tenant,
            "task": ctx.task_name, "scheduled_at": ctx.scheduled_at.isoformat(),
            "offset": ctx.scheduled_at.utcoffset().total_seconds(),
        }), flush=True)
        ctx.progress(0.2)
        ctx.progress(0.4, "step 2 of 5")
        while not os.path.exists(FLAG):
            time.sleep(0.02)
        return {"done": True}

    @app.task()
    def chatter(seconds=1.5, *, ctx):
        end, i = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            i += 1
            ctx.progress(min(i / 1e6, 1.0), f"call {i}")
        ctx.progress(1, f"calls {i}")
        return i

    @app.task()
    def bad_progress(*, ctx):
        ctx.progress(1.5, "too far")

    @app.task()
    def boom():
        raise ValueError("no luck")

    @app.task()
    def sleepy(seconds=1.0):
        time.sleep(seconds)
        return "slept"
""")

MODES = ["process", "thread"]


@pytest.fixture
def setup(dsn, start, tmp_path):
    (tmp_path / "progtasks.py").write_text(MODULE)
    flag = tmp_path / "flag"
    for name in ("steps", "chatter", "bad_progress", "boom", "sleepy"):
        cli(dsn, "task", "create", name, "--python", f"progtasks:{name}", "--max-attempts", "1")

    def worker(mode: str):
        return start(
            "worker",
            "--concurrency",
            "4",
            "--poll-interval",
            "0.5",
            "--python-isolation",
            mode,
            "--pythonpath",
            str(tmp_path),
            env={"PROGRESS_FLAG": str(flag)},
        )

    return worker, flag


def _show(dsn, ident: int) -> dict:
    return json.loads(cli(dsn, "execution", "show", str(ident), "--json").stdout)


@pytest.mark.parametrize("mode", MODES)
def test_context_progress_live_and_kept(dsn, sql, setup, mode):
    worker, flag = setup
    worker(mode)
    ident = trigger(dsn, "steps")
    shown = wait_until(
        lambda: (s := _show(dsn, ident))["progress"] == 0.4 and s,
        timeout=30,
        message="progress 0.4 shown by execution show",
    )
    assert shown["state"] == "running"
    assert shown["progress_message"] == "step 2 of 5"
    assert shown["progress_at"] is not None
    lines = [
        r["line"]
        for r in sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s ORDER BY seq", [ident]
        )
    ]
    assert "INFO pgsched.task.steps: begin steps" in lines
    meta = json.loads(next(x for x in lines if x.startswith("meta "))[5:])
    row = sql.execute(
        "SELECT scheduled_at FROM pgsched.execution WHERE id = %s", [ident]
    ).fetchone()
    assert meta["id"] == ident and meta["attempt"] == 1 and meta["tenant"] == "default"
    assert meta["task"] == "steps" and meta["offset"] == 0
    assert meta["scheduled_at"] == row["scheduled_at"].isoformat()
    flag.write_text("go")
    assert App(dsn).wait(ident, timeout=30) == {"done": True}
    kept = finished(sql, ident)
    assert (kept["progress"], kept["progress_message"]) == (0.4, "step 2 of 5")


@pytest.mark.parametrize("mode", MODES)
def test_frequent_progress_is_coalesced(dsn, sql, setup, mode):
    worker, _ = setup
    worker(mode)
    ident = trigger(dsn, "chatter")
    seen: set = set()
    while (
        row := sql.execute(
            "SELECT progress_at FROM pgsched.execution_all WHERE id = %s AND finished_at IS NULL",
            [ident],
        ).fetchone()
    ) is not None or not seen:
        if row is not None and row["progress_at"] is not None:
            seen.add(row["progress_at"])
        time.sleep(0.01)
    calls = App(dsn).wait(ident, timeout=30)
    kept = finished(sql, ident)
    assert kept["progress"] == 1.0 and kept["progress_message"] == f"calls {calls}"
    assert calls > 1000  # reported thousands of times ...
    assert 1 <= len(seen) <= 12  # ... written at most ~5 times a second over 1.5 s


@pytest.mark.parametrize("mode", MODES)
def test_a_bad_progress_value_fails_naming_it(dsn, setup, mode):
    worker, _ = setup
    worker(mode)
    ident = trigger(dsn, "bad_progress")
    with pytest.raises(ExecutionFailed) as caught:
        App(dsn).wait(ident, timeout=30)
    assert caught.value.state == "dead"  # its one attempt failed
    assert "progress: 1.5 must be from 0 to 1" in caught.value.error


def _finish_to_return(dsn, sql, ident: int, waiter) -> tuple[object, float]:
    """Run ``waiter()`` (started before the execution ends); its answer and the seconds
    from the finish (committed, by the database's clock) to its return."""
    answer: list = []
    done = threading.Event()

    def run() -> None:
        try:
            answer.append(waiter())
        except BaseException as exc:
            answer.append(exc)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    returned = None
    while returned is None:  # the database's clock the moment the waiter returns
        if done.wait(0.001):
            returned = sql.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
    # the commit of the finish: its transaction's xmin commit timestamp is not kept by
    # default, so the finish instant the worker recorded stands for it (written earlier)
    end = finished(sql, ident)["finished_at"]
    return answer[0], (returned - end).total_seconds()


def test_wait_returns_within_100ms_of_the_finish(dsn, sql, setup):
    worker, _ = setup
    worker("process")
    app = App(dsn)
    ident = trigger(dsn, "sleepy")
    answer, lag = _finish_to_return(dsn, sql, ident, lambda: app.wait(ident, timeout=30))
    print(f"wait returned {lag * 1000:.1f} ms after the finish")
    assert answer == "slept"
    assert 0 <= lag < 0.1
    ident = trigger(dsn, "sleepy")
    answer, lag = _finish_to_return(
        dsn, sql, ident, lambda: asyncio.run(app.wait_async(ident, timeout=30))
    )
    print(f"wait_async returned {lag * 1000:.1f} ms after the finish")
    assert answer == "slept"
    assert 0 <= lag < 0.1


def test_wait_raises_the_error_and_times_out(dsn, setup):
    worker, _ = setup
    worker("process")
    app = App(dsn)
    ident = trigger(dsn, "boom")
    with pytest.raises(ExecutionFailed) as caught:
        app.wait(ident, timeout=30)
    assert caught.value.execution_id == ident and caught.value.state == "dead"
    assert "ValueError: no luck" in caught.value.error
    slow = json.loads(
        cli(dsn, "task", "trigger", "sleepy", "--params", '{"seconds": 30}', "--json").stdout
    )["execution_id"]
    began = time.monotonic()
    with pytest.raises(TimeoutError, match=f"execution {slow} did not end within 0.5s"):
        app.wait(slow, timeout=0.5)
    with pytest.raises(TimeoutError):
        asyncio.run(app.wait_async(slow, timeout=0.5))
    assert time.monotonic() - began < 5
    with pytest.raises(ExecutionFailed, match="ended cancelled"):
        cli(dsn, "execution", "cancel", str(slow))
        app.wait(slow, timeout=30)
