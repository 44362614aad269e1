"""A task cannot find its worker's database login (issue 17, item 5): a real worker is
given a DSN whose password is a random marker, each way a login can be given
(``PGSCHED_DSN``, ``PGSCHED_DSN_FILE``, ``--dsn-file PATH``, ``--dsn-file -`` on standard
input, ``--dsn`` on the command line, ``PGPASSWORD``, ``PGPASSFILE``), and runs a command that
searches for the marker where a task could look: its own environment and descriptors, the
environment and command line of every process it may read (its worker and the worker's
guardian among them), the files its worker and the guardian hold open, and the files named
to it. The embedded test server trusts local connections, so the password is never used:
only the marker is searched for.

The search is shown able to find: a decoy process carries the marker in its environment and
command line, and the search must report it there. One test runs the worker as ``nobody``
(setpriv), whose commands then run as ``nobody`` too: a process of the same user that is not
root may not read a worker's /proc/PID/environ, mem or fd/ (it is not dumpable), and the
DSN file, root's own, handed in on standard input, is unreadable to it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from pgsched.login import CREDENTIAL_ENV
from pgsched.taskspec import TaskSpec

from ..helpers import Process, finished, trigger
from ..silent_proxy import SilentProxy

pytestmark = pytest.mark.e2e

WORKER = (
    "worker",
    "--poll-interval",
    "0.5",
    "--heartbeat-interval",
    "1",
    "--shutdown-timeout",
    "1",
)

# Run by the task (python -I -S -c): the marker comes as hex in its params, so that its own
# environment (PGSCHED_PARAMS) does not hold it; its last line (JSON) is its result.
SEARCH = r"""
import json, os, stat, sys
params = json.loads(os.environ["PGSCHED_PARAMS"])
needle = bytes.fromhex(params["needle"])
control = params["control"]
found, denied, seen_control = [], {}, []

def read(path, limit=1 << 20):
    with open(path, "rb") as f:
        return f.read(limit)

for name, value in os.environ.items():
    if needle in f"{name}={value}".encode():
        found.append(f"own environment: {name}")
credential_names = sorted(set(os.environ) & set(params["credential_names"]))
own_fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue  # the listing's own descriptor, closed by now
    if int(fd) > 2:
        own_fds[fd] = target

worker = params.get("worker") or os.getppid()
guardian = None
for pid in filter(str.isdigit, os.listdir("/proc")):
    for part in ("environ", "cmdline"):
        try:
            data = read(f"/proc/{pid}/{part}")
        except OSError as exc:
            if int(pid) == worker:
                denied[part] = type(exc).__name__
            continue
        args = data.split(b"\0")
        if part == "cmdline" and any(a.endswith(b"/guardian_main.py") for a in args):
            at = next(i for i, a in enumerate(args) if a.endswith(b"/guardian_main.py"))
            if args[at + 1 : at + 2] == [str(worker).encode()]:
                guardian = int(pid)
        if needle in data:
            if int(pid) == control:
                seen_control.append(part)
            else:
                try:
                    who = read(f"/proc/{pid}/cmdline", 200).replace(b"\0", b" ").decode()
                except OSError:
                    who = "?"
                found.append(f"/proc/{pid}/{part} ({who})")

open_files = {}
for pid in (worker, guardian):
    if pid is None:
        continue
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError as exc:
        denied[f"fd of {'worker' if pid == worker else 'guardian'}"] = type(exc).__name__
        continue
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            target = os.readlink(path)
            open_files[f"{pid}/{fd}"] = target
            if stat.S_ISREG(os.stat(path).st_mode) and needle in read(path, 16 << 20):
                found.append(f"{path} -> {target}")
        except OSError:
            continue
try:
    if needle in read(f"/proc/{worker}/mem", 0):
        found.append("worker memory")
except OSError as exc:
    denied["mem"] = type(exc).__name__

for path in params["files"]:
    try:
        if needle in read(path):
            found.append(f"file {path}")
    except OSError as exc:
        denied[f"file {path}"] = type(exc).__name__

print(json.dumps({
    "found": found, "denied": denied, "control": sorted(seen_control), "worker": worker,
    "guardian": guardian, "credential_names": credential_names, "own_fds": own_fds,
    "open_files": open_files, "uid": os.getuid(),
}))
"""


def _search_task(
    db, name: str, marker: str, control: int, files: list[str], python: str = sys.executable
) -> None:
    from pgsched.stores import tasks

    tasks.create(
        db,
        TaskSpec(
            name=name,
            handler_kind="argv",
            argv=[python, "-I", "-S", "-c", SEARCH],
            params={
                "needle": marker.encode().hex(),
                "control": control,
                "files": files,
                "credential_names": sorted(CREDENTIAL_ENV),
            },
            timeout_seconds=60,
        ),
    )


def _decoy(marker: str, as_nobody: bool = False) -> subprocess.Popen:
    """A process that carries ``marker`` in its environment and command line: what the
    search must find."""
    argv = [sys.executable, "-I", "-S", "-c", "import time; time.sleep(300)", marker]
    if as_nobody:
        argv = [*NOBODY, _python_for_nobody()[0], *argv[1:]]
    return subprocess.Popen(argv, env={"PATH": os.defpath, "DECOY": marker})


def _run_search(sql, dsn: str, task: str) -> dict:
    row = finished(sql, trigger(dsn, task), timeout=60)
    assert row["state"] == "succeeded", row
    return row["result"]


def _assert_hidden(result: dict, dsn_file: Path | None = None) -> None:
    assert result["control"] == ["cmdline", "environ"], result  # the search finds what is there
    assert result["guardian"] is not None, result  # and looked at the guardian too
    assert result["found"] == [], result
    assert result["credential_names"] == [], result
    for target in result["own_fds"].values():
        assert not target.startswith("socket:"), result  # no database connection inherited
    if dsn_file is not None:
        assert str(dsn_file) not in result["open_files"].values(), result
        assert str(dsn_file) not in result["own_fds"].values(), result


@pytest.fixture
def marker() -> str:
    return f"pw{secrets.token_hex(12)}"


@pytest.fixture
def decoy(marker: str):
    proc = _decoy(marker)
    yield proc
    proc.kill()
    proc.wait()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


WAYS = ["PGSCHED_DSN", "PGSCHED_DSN_FILE", "--dsn-file", "--dsn-file -", "--dsn", "PGPASSWORD"]


@pytest.mark.parametrize("way", [*WAYS, "PGPASSFILE"])
def test_a_command_finds_no_trace_of_the_login(
    way, dsn, db, sql, tmp_path, processes, marker, decoy
):
    with_password = make_conninfo(dsn, password=marker)
    dsn_file = _write(tmp_path / "worker.dsn", with_password + "\n")
    args: tuple[str, ...] = WORKER
    env: dict[str, str] = {}
    stdin = None
    if way == "PGSCHED_DSN":
        env["PGSCHED_DSN"] = with_password
    elif way == "PGSCHED_DSN_FILE":
        env = {"PGSCHED_DSN": "", "PGSCHED_DSN_FILE": str(dsn_file)}
    elif way == "--dsn-file":
        env, args = {"PGSCHED_DSN": ""}, ("--dsn-file", str(dsn_file), *WORKER)
    elif way == "--dsn-file -":
        env, args = {"PGSCHED_DSN": ""}, ("--dsn-file", "-", *WORKER)
        stdin = open(dsn_file, "rb")  # noqa: SIM115 (closed below, once the worker has it)
    elif way == "--dsn":
        env, args = {"PGSCHED_DSN": ""}, ("--dsn", with_password, *WORKER)
    elif way == "PGPASSWORD":
        env["PGPASSWORD"] = marker
    elif way == "PGPASSFILE":
        env["PGPASSFILE"] = str(_write(tmp_path / "pgpass", f"*:*:*:*:{marker}\n"))
    _search_task(db, "search", marker, decoy.pid, files=[])
    worker = Process(dsn, *args, log_dir=tmp_path, env=env, stdin=stdin)
    processes.append(worker)
    if stdin is not None:
        stdin.close()
    result = _run_search(sql, dsn, "search")
    assert result["worker"] == worker.proc.pid
    _assert_hidden(result, dsn_file)
    if way == "--dsn":
        assert "--dsn on the command line carried a password" in worker.output


# A Python task runs in a child process of its worker (--python-isolation process, whose
# environment is the worker's live one less the credentials) or inside the worker itself
# (thread); what it starts inherits that environment (plus the params the search reads).
# The search is told the worker's pid: the zygote's parent for a child, the task's own in a
# thread.
PYTHON_TASKS = textwrap.dedent("""
    import json, os, subprocess, sys
    from pgsched import App

    app = App()

    @app.task()
    def search(script, **params):
        with open("/proc/self/cmdline", "rb") as f:
            in_child = b"python_child" in f.read()
        params["worker"] = os.getpid()
        if in_child:  # forked by the worker's zygote, a child of the worker
            with open(f"/proc/{os.getppid()}/stat", "rb") as f:
                params["worker"] = int(f.read().rsplit(b")", 1)[1].split()[1])
        env = dict(os.environ, PGSCHED_PARAMS=json.dumps(params))
        out = subprocess.run(
            [sys.executable, "-I", "-S", "-c", script], env=env, capture_output=True, text=True,
            check=True,
        ).stdout
        return json.loads(out.splitlines()[-1])
""")


@pytest.mark.parametrize("isolation", ["process", "thread"])
@pytest.mark.parametrize("way", ["PGSCHED_DSN", "PGPASSWORD", "--dsn"])
def test_what_a_python_task_starts_inherits_no_login(
    way, isolation, dsn, db, sql, tmp_path, processes, marker, decoy
):
    from pgsched.stores import tasks

    (tmp_path / "credtasks.py").write_text(PYTHON_TASKS)
    with_password = make_conninfo(dsn, password=marker)
    args: tuple[str, ...] = (
        *WORKER,
        "--pythonpath",
        str(tmp_path),
        "--python-isolation",
        isolation,
    )
    env = {"PGSCHED_DSN": with_password}
    if way == "PGPASSWORD":
        env = {"PGPASSWORD": marker}
    elif way == "--dsn":
        env, args = {"PGSCHED_DSN": ""}, ("--dsn", with_password, *args)
    tasks.create(
        db,
        TaskSpec(
            name="search",
            handler_kind="python",
            python_target="credtasks:search",
            params={
                "script": SEARCH,
                "needle": marker.encode().hex(),
                "control": decoy.pid,
                "files": [],
                "credential_names": sorted(CREDENTIAL_ENV),
            },
        ),
    )
    worker = Process(dsn, *args, log_dir=tmp_path, env=env)
    processes.append(worker)
    result = _run_search(sql, dsn, "search")
    assert result["worker"] == worker.proc.pid
    _assert_hidden(result)


NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


def _python_for_nobody() -> tuple[str, dict[str, str]]:
    """An interpreter of this Python version that ``nobody`` can start from a process of its
    own, and the environment that gives it this venv's packages and pgsched.

    The venv's interpreter may link to one under a home only root may enter (pyenv under
    /root): setpriv still starts it, but nothing the worker then starts (its guardian, its
    commands) can. So the worker and its commands run on the system's interpreter of the same
    version, reading this venv's site-packages (compiled wheels fit: same minor version).
    Skips when this machine has none."""
    import site

    import pgsched

    want = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, os.path.realpath(sys.executable)]
    candidates += [f"{d}/python{want}" for d in ("/usr/bin", "/usr/local/bin")]
    check = f"import sys; assert '%d.%d' % sys.version_info[:2] == '{want}'"
    for python in candidates:
        run = subprocess.run(
            [*NOBODY, "/bin/sh", "-c", 'exec "$0" -I -S -c "$1"', python, check],
            capture_output=True,
        )
        if run.returncode == 0:
            root = str(Path(pgsched.__file__).resolve().parents[1])
            path = os.pathsep.join([root, *site.getsitepackages()])
            return python, {"PYTHONPATH": path}
    pytest.skip(f"no Python {want} that nobody may start from its own process: {candidates}")


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv(1)"
)
@pytest.mark.parametrize("way", ["--dsn-file -", "PGSCHED_DSN"])
def test_a_command_of_a_worker_run_as_another_user_reads_none_of_its_proc_entries(
    way, dsn, db, sql, tmp_path, processes, marker
):
    """The worker runs as nobody, so its commands do: not dumpable, the worker's environ,
    mem and fd/ are closed to them (root reads them whatever the dumpability). Given on
    standard input, the DSN file is root's and stays unreadable to them."""
    python, python_env = _python_for_nobody()
    proxy = SilentProxy(dsn)  # nobody may not enter the embedded server's data folder
    decoy = _decoy(marker, as_nobody=True)
    try:
        with_password = make_conninfo(proxy.dsn, password=marker)
        dsn_file = _write(tmp_path / "worker.dsn", with_password + "\n")  # root's, 0600
        _search_task(db, "search", marker, decoy.pid, files=[str(dsn_file)], python=python)
        if way == "PGSCHED_DSN":
            env, args, stdin = {"PGSCHED_DSN": with_password}, WORKER, None
        else:
            env, args = {"PGSCHED_DSN": ""}, ("--dsn-file", "-", *WORKER)
            stdin = open(dsn_file, "rb")  # noqa: SIM115 (closed below, once the worker has it)
        worker = Process(
            dsn,
            *args,
            log_dir=tmp_path,
            env={**env, **python_env},
            stdin=stdin,
            wrap=lambda a: [*NOBODY, python, *a[1:]],
        )
        processes.append(worker)
        if stdin is not None:
            stdin.close()
        result = _run_search(sql, dsn, "search")
        assert result["uid"] == 65534, result
        assert result["worker"] == worker.proc.pid
        _assert_hidden(result)
        assert result["denied"] == {
            "environ": "PermissionError",
            "mem": "PermissionError",
            "fd of worker": "PermissionError",
            f"file {dsn_file}": "PermissionError",
        }, result
    finally:
        decoy.kill()
        decoy.wait()
        proxy.close()
