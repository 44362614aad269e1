"""Attack 19 on the pipe protocol between a worker and its Python handlers' children, and on
resource limits (issue 19), on real workers. A handler writes a forged message, garbage,
or closes its reply pipe; the secure outcome: its attempt fails (forged or not, nothing
else), the child is replaced, the worker keeps running the next calls. A sandboxed command
tries to raise its own limits back; the kernel refuses (hard limits, no privilege)."""

from __future__ import annotations

import textwrap

import pytest

from pgsched.stores import tasks

from ..helpers import cli, finished, trigger
from .test_sandbox import PY, _argv_task, _history, _worker

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import os, stat
    from pgsched import App

    app = App()

    def _reply_pipes():
        for fd in map(int, os.listdir("/proc/self/fd")):
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                yield fd

    @app.task()
    def garbage():
        for fd in _reply_pipes():
            try:
                os.write(fd, b"not json\\n")
            except OSError:
                pass  # the read end of its calls
        return "after garbage"

    @app.task()
    def forged():
        for fd in _reply_pipes():
            try:
                os.write(fd, b'{"error": 5}\\n{"lock": 7}\\n{"lock": ["__init__", [1]]}\\n')
            except OSError:
                pass
        return "after forgery"

    @app.task()
    def closed():
        for fd in _reply_pipes():
            os.close(fd)
        return "after close"

    @app.task()
    def quick():
        return "quick"
""")


@pytest.mark.parametrize("name", ["garbage", "forged", "closed"])
def test_attack19_a_handler_that_hijacks_its_pipes_fails_only_its_attempt(
    dsn, sql, start, tmp_path, name
):
    (tmp_path / "pipetasks.py").write_text(MODULE)
    for task in (name, "quick"):
        cli(dsn, "task", "create", task, "--python", f"pipetasks:{task}", "--timeout", "10")
    worker = start("worker", "--concurrency", "1", "--poll-interval", "0.2",
                   "--pythonpath", str(tmp_path))  # fmt: skip
    row = finished(sql, trigger(dsn, name), timeout=40)
    assert row["state"] == "dead", row
    assert row["error"], row
    for _ in range(3):  # the next calls run in a sound child
        row = finished(sql, trigger(dsn, "quick"), timeout=40)
        assert row["state"] == "succeeded" and row["result"] == "quick", row
    assert worker.proc.poll() is None


RAISE = r"""
import json, resource
out = {}
for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_FSIZE"):
    which = getattr(resource, name)
    soft, hard = resource.getrlimit(which)
    try:
        resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        out[name] = "raised"
    except (ValueError, OSError) as exc:
        out[name] = f"refused: {exc}"
print(json.dumps(out))
"""


@pytest.mark.parametrize("level", ["sandbox", "rlimits"])
def test_attack19_a_command_cannot_raise_its_limits_back(db, sql, start, level):
    _argv_task(db, "raise", [PY, "-I", "-c", RAISE])
    limits = ("--limit-cpu", "30s", "--limit-memory", "1GB", "--limit-nofile", "64",
              "--limit-nproc", "500", "--limit-fsize", "10MB")  # fmt: skip
    _worker(start, level, *limits)
    row = _history(sql, tasks.trigger(db, "raise"))
    assert row["state"] == "succeeded", row
    assert all(v.startswith("refused") for v in row["result"].values()), row["result"]
