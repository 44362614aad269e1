"""Which user a command runs as (issue 19, item 1: "a configured uid per tenant or per
worker; crontab imports' user column honoured against an allow-list; never as root"),
through real ``pgsched worker`` processes: ``--tenant-run-as TENANT=USER`` and
``--allow-run-as USER`` (pgsched/handlers/run_as.py).

We are root (CI is): the module makes two system users of its own, and removes them after.
tests/e2e/test_sandbox.py's rlimits test is the control of the first test: with one user
for every tenant, one tenant's command reads the other's environment.
"""

from __future__ import annotations

import os
import pwd
import secrets
import subprocess
from collections.abc import Iterator

import pytest

from pgsched.stores import executions, tasks

from ..factories import make_task
from ..helpers import cli, finished, log_line, wait_for

pytestmark = pytest.mark.e2e

PY = "/usr/bin/python3"  # the system's, which any user may run
WORKER = ("worker", "--poll-interval", "0.5", "--heartbeat-interval", "1", "--kill-grace", "1")
USERS = ("pgsched-run-a", "pgsched-run-b")


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, int]]:
    """Two unprivileged users (name → uid), made here when missing and removed after."""
    made = []
    for name in USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                check=True,
            )
            made.append(name)
    yield {name: pwd.getpwnam(name).pw_uid for name in USERS}
    for name in made:
        subprocess.run(["userdel", name], check=False)


def _worker(start, *extra: str):
    proc = start(*WORKER, "--all-tenants", "--isolation", "rlimits", *extra)
    wait_for(lambda: "isolation:" in proc.output, 30, what=lambda: proc.output)
    return proc


# Its own uid, and for each other process whose environment holds the marker (found as
# root by the test and given in params), whether it could read that environment.
SPY = r"""
import json, os
p = json.loads(os.environ["PGSCHED_PARAMS"])
tried = {}
for pid in p["pids"]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            tried[pid] = "read: " + str(bytes.fromhex(p["needle"]) in f.read())
    except OSError as exc:
        tried[pid] = exc.strerror
print(json.dumps({"uid": os.getuid(), "tried": tried}))
"""


def _holding(marker: str) -> list[int]:
    """The processes (seen as root) whose environment holds ``marker``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_each_tenants_command_runs_as_its_own_user_and_cannot_read_the_others(
    db, sql, start, users
):
    a, b = USERS
    marker = secrets.token_hex(12)
    make_task(db, "holder", tenant="a", command="echo uid=$(id -u); sleep 30", env={"S": marker})
    make_task(db, "spy", tenant="b", command=None, handler_kind="argv", argv=[PY, "-I", "-c", SPY])
    make_task(db, "whoami", tenant="c", command="id -u")  # no user of its own: --run-as's
    proc = _worker(
        start, "--concurrency", "2", "--tenant-run-as", f"a={a}", "--tenant-run-as", f"b={b}"
    )
    assert f"tenant a as uid {users[a]} ({a}); tenant b as uid {users[b]} ({b})" in proc.output
    holder = tasks.trigger(db, "holder", tenant="a")
    assert log_line(sql, holder, "uid=") == f"uid={users[a]}"
    pids = _holding(marker)
    assert pids  # the holder's shell and its sleep, as root sees them
    spy = tasks.trigger(
        db, "spy", tenant="b", params={"needle": marker.encode().hex(), "pids": pids}
    )
    result = finished(sql, spy)["result"]
    assert result["uid"] == users[b], result
    assert set(result["tried"].values()) == {"Permission denied"}, result
    other = finished(sql, tasks.trigger(db, "whoami", tenant="c"))
    assert other["result"] == pwd.getpwnam("nobody").pw_uid, other
    executions.cancel(db, holder, "a")


def test_a_crontab_user_runs_as_itself_only_when_allowed_and_never_as_another(
    dsn, db, sql, start, users, tmp_path
):
    a, b = USERS
    crontab = tmp_path / "crontab"
    crontab.write_text(f"0 0 1 1 * {a} id -u\n0 0 1 1 * {b} id -u\n0 0 1 1 * root id -u\n")
    cli(dsn, "import-crontab", "--system", str(crontab))
    names = {
        r["run_as_user"]: r["name"]
        for r in sql.execute("SELECT name, run_as_user FROM pgsched.task").fetchall()
    }
    sql.execute("UPDATE pgsched.task SET max_attempts = 3")  # refused: not retried all the same
    make_task(db, "plain", command="id -u")  # no crontab user: its tenant's
    proc = _worker(start, "--allow-run-as", a, "--tenant-run-as", f"default={b}")
    assert f"crontab users allowed: uid {users[a]} ({a})" in proc.output
    # the task's allowed user over its tenant's
    allowed = finished(sql, tasks.trigger(db, names[a]))
    assert allowed["state"] == "succeeded" and allowed["result"] == users[a], allowed
    plain = finished(sql, tasks.trigger(db, "plain"))
    assert plain["result"] == users[b], plain
    for user, said in [
        (b, f"--allow-run-as {b} to allow it"),  # the tenant's user, yet not the line's to take
        ("root", "which is root: isolated commands never run as root"),
    ]:
        ident = tasks.trigger(db, names[user])
        row = finished(sql, ident)
        assert row["state"] == "dead", row
        assert f"names the crontab user {user!r}" in row["error"] and said in row["error"], row
        attempts = sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_attempt WHERE execution_id = %s",
            (ident,),
        ).fetchone()
        assert attempts["n"] == 1
        assert not sql.execute(
            "SELECT 1 FROM pgsched.execution_log WHERE execution_id = %s AND line ~ '^[0-9]+$'",
            (ident,),
        ).fetchone()  # its command never ran, as anyone


def test_a_worker_without_isolation_ignores_the_crontab_user(dsn, db, sql, start, users):
    make_task(db, "cron-line", command="id -u", run_as_user=USERS[0])
    proc = start(*WORKER)
    wait_for(lambda: "isolation:" in proc.output, 30, what=lambda: proc.output)
    row = finished(sql, tasks.trigger(db, "cron-line"))
    assert row["state"] == "succeeded" and row["result"] == 0, row  # the worker's: root


def test_the_worker_refuses_bad_users_naming_the_option_and_the_value(dsn, users):
    a, b = USERS
    iso = ("--isolation", "rlimits")
    for args, said in [
        ((*iso, "--tenant-run-as", a), f"--tenant-run-as {a!r} must be TENANT=USER"),
        ((*iso, "--tenant-run-as", "x y=" + a), "its tenant 'x y' must be"),
        ((*iso, "--tenant-run-as", "a=root"), "--tenant-run-as 'a=root': 'root' is root"),
        ((*iso, "--tenant-run-as", "a=pgsched-ghost"), "no user 'pgsched-ghost' on this host"),
        (
            (*iso, "--tenant-run-as", f"a={a}", "--tenant-run-as", f"a={b}"),
            f"--tenant-run-as 'a={b}': tenant 'a' is given twice",
        ),
        (
            (*iso, "--tenant-run-as", f"a={a}", "--tenant-run-as", f"b={a}"),
            f"--tenant-run-as 'b={a}': uid {users[a]} ({a}) is tenant 'a''s already",
        ),
        ((*iso, "--run-as", a, "--tenant-run-as", f"b={a}"), "is the worker's user"),
        ((*iso, "--allow-run-as", f"{a},root"), "--allow-run-as 'root': 'root' is root"),
        ((*iso, "--allow-run-as", f"{a},"), "names an empty user"),
        (("--tenant-run-as", f"a={a}"), "need --isolation rlimits or sandbox"),
        (("--allow-run-as", a), "need --isolation rlimits or sandbox"),
        (
            (*iso, "--tenant", "a", "--tenant-run-as", f"b={b}"),
            "--tenant-run-as names tenant 'b', which this worker does not serve",
        ),
    ]:
        out = cli(dsn, *WORKER, *args, check=False, timeout=60)
        assert out.returncode != 0, (args, out)
        assert said in out.stderr, (args, out.stderr)
    help_text = cli(None, "worker", "--help").stdout
    assert "--tenant-run-as TENANT=USER" in help_text and "--allow-run-as" in help_text
