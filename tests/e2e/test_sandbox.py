"""Commands in a sandbox (issue 19, item 1), through real ``pgsched worker`` processes:
``--isolation sandbox`` (bubblewrap) against ``--isolation rlimits`` (the same user and
limits, no namespaces), which serves as each test's control: what the sandbox must hide is
shown to be there to find without it.

The tests run as root (CI does: ``bash .ci/run``), so commands run as ``nobody``; bwrap
(Debian package bubblewrap) is installed by tests/run.sh.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

import pytest

from pgsched.stores import executions, tasks

from ..factories import make_task
from ..helpers import alive, cli, finished, wait_for

pytestmark = pytest.mark.e2e

# The system's Python, which nobody may run (a pyenv's under /root is root's alone)
PY = "/usr/bin/python3"

WORKER = ("worker", "--poll-interval", "0.5", "--heartbeat-interval", "1", "--kill-grace", "1")


def _argv_task(db, name: str, argv: list[str], **fields) -> None:
    make_task(db, name, command=None, handler_kind="argv", argv=argv, **fields)


def _worker(start, level: str, *extra: str, env: dict | None = None):
    proc = start(*WORKER, "--all-tenants", "--isolation", level, *extra, env=env)
    wait_for(lambda: "isolation:" in proc.output, 30, what=lambda: proc.output)
    return proc


def _history(sql, ident: int, timeout: float = 30) -> dict:
    return finished(sql, ident, timeout)


def _logged(sql, ident: int, text: str, timeout: float = 30) -> None:
    wait_for(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.execution_log WHERE execution_id = %s AND line = %s",
            (ident, text),
        ).fetchone(),
        timeout,
        what=f"execution {ident} prints {text!r}",
    )


def _attempt_error(sql, ident: int) -> str:
    row = sql.execute(
        "SELECT error FROM pgsched.execution_attempt WHERE execution_id = %s", (ident,)
    ).fetchone()
    return row["error"]


def _processes_of(ident: int) -> list[int]:
    """Live processes (seen from the host, as root) whose environment names execution
    ``ident``: the command and what it started, inside its sandbox or not."""
    needle = f"\0PGSCHED_EXECUTION_ID={ident}\0".encode()
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in b"\0" + f.read() and alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


# Run by the spying task: every process it can see in /proc, and whether any of their
# environments or command lines holds the other tenant's marker (given as hex in params).
SPY = r"""
import json, os
needle = bytes.fromhex(json.loads(os.environ["PGSCHED_PARAMS"])["needle"])
pids = [p for p in os.listdir("/proc") if p.isdigit()]
seen = []
for pid in pids:
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as f:
                if needle in f.read():
                    seen.append(f"{pid}/{part}")
        except OSError:
            pass
print(json.dumps({"pids": len(pids), "seen": seen}))
"""


@pytest.mark.parametrize("level", ["sandbox", "rlimits"])
def test_a_command_of_one_tenant_sees_no_process_nor_environment_of_another(db, sql, start, level):
    marker = secrets.token_hex(12)
    make_task(db, "holder", tenant="a", command="echo up; sleep 30", env={"SECRET": marker})
    _argv_task(db, "spy", [PY, "-I", "-c", SPY], tenant="b")
    _worker(start, level, "--concurrency", "2")
    holder = tasks.trigger(db, "holder", tenant="a")
    _logged(sql, holder, "up")
    spy = tasks.trigger(db, "spy", tenant="b", params={"needle": marker.encode().hex()})
    result = _history(sql, spy)["result"]
    if level == "sandbox":
        # its own PID namespace: bwrap's init, the command (python), nothing else
        assert result["seen"] == [] and result["pids"] <= 3, result
    else:  # the control: the search finds the holder's secret where the sandbox hides it
        assert any(s.endswith("/environ") for s in result["seen"]), result
        assert result["pids"] > 10, result
    executions.cancel(db, holder, "a")


WRITES = r"""
import json, os, sys
out = {}
for path in sys.argv[1:]:
    try:
        with open(path, "w") as f:
            f.write("x")
        out[path] = "written"
    except OSError as exc:
        out[path] = exc.strerror
print(json.dumps(out))
"""


@pytest.mark.parametrize("level", ["sandbox", "rlimits"])
def test_a_command_writes_only_its_scratch_directory(db, sql, start, level):
    # writable by anyone (and reachable: pytest's tmp_path is root's alone): only a
    # read-only view keeps it clean
    open_dir = Path(tempfile.mkdtemp(prefix="pgsched-open-", dir="/var/tmp"))
    open_dir.chmod(0o777)
    private = f"/tmp/pgsched-private-{secrets.token_hex(6)}"
    repo = Path(__file__).resolve().parents[2]
    targets = [
        "/etc/pgsched-sandbox-test",
        str(repo / "pgsched-sandbox-test"),
        "/root/pgsched-sandbox-test",
        str(open_dir / "left"),
        "scratch-file",  # relative: its working directory, the scratch directory
        private,
    ]
    _argv_task(db, "writer", [PY, "-I", "-c", WRITES, *targets])
    _worker(start, level)
    ident = tasks.trigger(db, "writer")
    try:
        row = _history(sql, ident)
        left, on_host_tmp = (open_dir / "left").exists(), os.path.exists(private)
    finally:
        shutil.rmtree(open_dir)
        if os.path.exists(private):
            os.unlink(private)
    assert row["state"] == "succeeded", row
    result = row["result"]
    assert result["scratch-file"] == "written" and result[private] == "written", result
    for path in targets[:3]:
        assert result[path] != "written", result
        assert not os.path.exists(path)
    if level == "sandbox":  # the system read-only, /tmp its own: the host saw nothing
        assert not left and not on_host_tmp
        assert result[targets[0]] == result[targets[3]] == "Read-only file system", result
    else:
        assert left and on_host_tmp  # the control: without the sandbox both land
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("pgsched-scratch-*/scratch-file"))


CONNECT = r"""
import json, socket, sys
out = {}
for name, family, address in [
    ("tcp", socket.AF_INET, ("127.0.0.1", int(sys.argv[1]))),
    ("unix", socket.AF_UNIX, sys.argv[2]),  # a host server's socket in /run
]:
    try:
        with socket.socket(family) as s:
            s.settimeout(3)
            s.connect(address)
        out[name] = "connected"
    except OSError as exc:
        out[name] = f"refused: {exc}"
print(json.dumps(out))
"""


@pytest.mark.parametrize("allow", [False, True], ids=["no-network", "allow-network"])
def test_a_sandboxed_command_reaches_the_network_only_when_allowed(db, sql, start, allow):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    path = f"/run/pgsched-test-{secrets.token_hex(6)}.sock"
    local = socket.socket(socket.AF_UNIX)
    local.bind(path)
    os.chmod(path, 0o777)  # anyone may connect, as to PostgreSQL's own socket
    local.listen(8)
    try:
        _argv_task(db, "dial", [PY, "-I", "-c", CONNECT, str(port), path])
        _worker(start, "sandbox", *(["--allow-network"] if allow else []))
        result = _history(sql, tasks.trigger(db, "dial"))["result"]
    finally:
        listener.close()
        local.close()
        os.unlink(path)
    if allow:
        assert result == {"tcp": "connected", "unix": "connected"}, result
    else:
        assert result["tcp"].startswith("refused") and result["unix"].startswith("refused"), result


LIMITED = {
    "cpu": ("while :; do :; done", "killed: CPU time limit 1 s exceeded (SIGXCPU)"),
    "memory": (
        f"{PY} -I -c 'bytearray(400 * 1024 * 1024)'",
        "memory limit 200MB (address space, RLIMIT_AS) reached: 'MemoryError'",
    ),
    "nofile": (
        f"{PY} -I -c 'fs = [open(\"/dev/null\") for _ in range(100)]'",
        "open files limit 32 (RLIMIT_NOFILE) reached",
    ),
    "nproc": (
        f"{PY} -I -c 'import os, time\nfor _ in range(400):\n"
        "    if os.fork() == 0:\n        os.closerange(0, 3); time.sleep(3); os._exit(0)'",
        "process limit 200 (RLIMIT_NPROC) reached",
    ),
    "fsize": ("head -c 3000000 /dev/zero > big", "killed: file size limit 1MB exceeded (SIGXFSZ)"),
}


@pytest.mark.parametrize("level", ["sandbox", "rlimits"])
def test_each_resource_limit_kills_its_command_and_is_named_in_the_attempts_error(
    db, sql, start, level
):
    for name, (command, _) in LIMITED.items():
        make_task(db, f"over-{name}", command=command, timeout_seconds=30)
    make_task(db, "under", command=f"{PY} -I -c 'bytearray(50 * 1024 * 1024)'; echo fine")
    _worker(
        start,
        level,
        "--concurrency",
        "1",  # one at a time: the fork bomb's processes count against nobody's RLIMIT_NPROC
        *("--limit-cpu", "1s", "--limit-memory", "200MB", "--limit-nofile", "32"),
        *("--limit-nproc", "200", "--limit-fsize", "1MB"),
    )
    for name, (_, error) in LIMITED.items():
        ident = tasks.trigger(db, f"over-{name}")
        row = _history(sql, ident, timeout=60)
        assert row["state"] == "dead", (name, row)
        assert error in _attempt_error(sql, ident), (name, _attempt_error(sql, ident))
    ok = _history(sql, tasks.trigger(db, "under"))
    assert ok["state"] == "succeeded" and ok["result"] == "fine", ok


def test_timeout_cancel_and_the_workers_death_kill_the_whole_sandbox(db, sql, start):
    script = "echo up; sleep 300 & sleep 301"
    make_task(db, "slow", command=script, timeout_seconds=1)
    make_task(db, "long", command=script)
    worker = _worker(start, "sandbox", "--concurrency", "2")
    # timeout: SIGTERM to the group (bwrap and all inside), within its kill grace
    ident = tasks.trigger(db, "slow")
    _logged(sql, ident, "up")
    assert len(_processes_of(ident)) >= 3  # the shell and its two sleeps
    row = _history(sql, ident)
    assert row["state"] == "dead" and "timed out after 1s" in row["error"], row
    assert (row["finished_at"] - row["started_at"]).total_seconds() < 3.0
    assert _processes_of(ident) == []
    # cancel
    ident = tasks.trigger(db, "long")
    _logged(sql, ident, "up")
    asked = time.monotonic()
    assert executions.cancel(db, ident, "default") == "cancelling"
    assert _history(sql, ident)["state"] == "cancelled"
    wait_for(lambda: _processes_of(ident) == [], 2.0, what="the cancelled sandbox ends")
    assert time.monotonic() - asked < 3.0
    # the worker's death (SIGKILL): bwrap dies with it, and its PID namespace with bwrap
    ident = tasks.trigger(db, "long")
    _logged(sql, ident, "up")
    inside = _processes_of(ident)
    assert len(inside) >= 3
    worker.proc.send_signal(signal.SIGKILL)
    wait_for(lambda: not any(map(alive, inside)), 2.0, what="the sandbox dies with its worker")


def test_sandboxed_params_file_and_environment_are_the_commands_own(db, sql, start):
    big = {"blob": "x" * (200 * 1024)}  # over MAX_ENV_PARAMS: a file in the scratch directory
    _argv_task(
        db,
        "env",
        [
            PY,
            "-I",
            "-c",
            "import json, os; p = json.load(open(os.environ['PGSCHED_PARAMS_FILE'])); "
            "print(json.dumps({'n': len(p['blob']), 'env': sorted(os.environ)}))",
        ],
        env={"MINE": "1"},
    )
    _worker(start, "sandbox", env={"WORKER_ONLY": "leak"})
    row = _history(sql, tasks.trigger(db, "env", params=big))
    assert row["state"] == "succeeded", row
    assert row["result"]["n"] == 200 * 1024
    names = set(row["result"]["env"])
    assert "MINE" in names and "WORKER_ONLY" not in names and "PGSCHED_DSN" not in names
    assert names <= {
        *("PATH", "LANG", "TZ", "HOME", "PWD", "USER", "LOGNAME", "TMPDIR", "MINE"),
        *("PGSCHED_COMMAND_MARK", "PGSCHED_WORKER_TOKEN", "PGSCHED_PARAMS_FILE"),
        *("PGSCHED_EXECUTION_ID", "PGSCHED_TASK", "PGSCHED_ATTEMPT", "PGSCHED_SCHEDULED_AT"),
    } | {n for n in names if n.startswith("LC_")}, names


def test_the_worker_says_its_isolation_and_refuses_what_the_machine_cannot_give(
    dsn, start, tmp_path
):
    proc = _worker(start, "sandbox", "--limit-cpu", "60s", "--limit-memory", "1GB")
    assert "isolation: bubblewrap 0.8" in proc.output, proc.output
    assert "pid+mount+ipc+net namespaces, uid 65534 (nobody), no network" in proc.output
    assert "limits: cpu 60s, memory 1GB" in proc.output
    # no bwrap on the PATH: refused, with what to do
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("prlimit", "setpriv", "id"):
        (bare / tool).symlink_to(f"/usr/bin/{tool}")
    missing = start(*WORKER, "--isolation", "sandbox", env={"PATH": str(bare)})
    assert missing.proc.wait(30) != 0
    assert "isolation sandbox: bwrap(1) is missing: install bubblewrap" in missing.output
    # bwrap there but refused its namespaces (a container without them): its own words
    (bare / "bwrap").write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 0.8.0' && exit 0\n"
        "echo 'bwrap: No permissions to creating new namespace' >&2; exit 1\n"
    )
    (bare / "bwrap").chmod(0o755)
    refused = start(*WORKER, "--isolation", "sandbox", env={"PATH": f"{bare}:/bin"})
    assert refused.proc.wait(30) != 0
    assert "No permissions to creating new namespace" in refused.output
    assert "use a lower --isolation" in refused.output
    # never root
    root = start(*WORKER, "--isolation", "rlimits", "--run-as", "root")
    assert root.proc.wait(30) != 0
    assert "isolated commands never run as root" in root.output
    # limits without isolation: said, not ignored
    loose = start(*WORKER, "--limit-cpu", "1s")
    assert loose.proc.wait(30) != 0
    assert "need --isolation rlimits or sandbox" in loose.output


def test_a_tasks_own_limits_and_network_override_its_workers(db, sql, start, dsn):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    dial = [PY, "-I", "-c", CONNECT, str(port), "/nonexistent.sock"]
    # through the CLI, as a user gives them (migration 0032's columns)
    cli(dsn, "task", "create", "spin", "--command", "while :; do :; done", "--limit-cpu", "1s")
    cli(dsn, "task", "create", "dial-allowed", "--argv", json.dumps(dial), "--network", "allow")
    _argv_task(db, "dial-default", dial)
    _argv_task(db, "dial-denied", dial, network=False)
    _worker(start, "sandbox", "--limit-cpu", "30s", "--allow-network")  # the worker's defaults
    try:
        spin = _history(sql, tasks.trigger(db, "spin"))
        results = {
            name: _history(sql, tasks.trigger(db, name))["result"]["tcp"]
            for name in ("dial-allowed", "dial-default", "dial-denied")
        }
    finally:
        listener.close()
    # bwrap's 152 alone says SIGXCPU: the error says a command exiting 152 reads the same
    assert _attempt_error(sql, spin["id"]).startswith(
        "killed: CPU time limit 1 s exceeded (SIGXCPU) (bwrap's exit status 152"
    )
    assert results["dial-allowed"] == "connected" and results["dial-default"] == "connected"
    assert results["dial-denied"].startswith("refused"), results


def test_task_options_store_and_clear_a_tasks_sandbox_settings(dsn, sql):
    cli(
        dsn,
        *("task", "create", "boxed", "--command", "true", "--limit-cpu", "2m"),
        *("--limit-memory", "512MB", "--limit-nofile", "64", "--limit-nproc", "10"),
        *("--limit-fsize", "1GB", "--network", "allow"),
    )
    columns = (
        "limit_cpu_seconds, limit_memory_bytes, limit_nofile, limit_nproc, limit_fsize_bytes, "
        "network"
    )
    row = sql.execute(f"SELECT {columns} FROM pgsched.task WHERE name = 'boxed'").fetchone()
    assert row == {
        "limit_cpu_seconds": 120,
        "limit_memory_bytes": 512 * 1024**2,
        "limit_nofile": 64,
        "limit_nproc": 10,
        "limit_fsize_bytes": 1024**3,
        "network": True,
    }
    cli(dsn, "task", "update", "boxed", "--limit-cpu", "worker", "--network", "deny")
    row = sql.execute(f"SELECT {columns} FROM pgsched.task WHERE name = 'boxed'").fetchone()
    assert row["limit_cpu_seconds"] is None and row["network"] is False
    assert row["limit_nofile"] == 64  # what was not given stays
    bad = cli(dsn, "task", "update", "boxed", "--limit-memory", "lots", check=False)
    assert bad.returncode != 0 and "limit_memory_bytes" in bad.stderr and "lots" in bad.stderr
