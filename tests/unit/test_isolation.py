"""The sandbox's pure parts: limits parsed from the worker's options, the argv a command is
wrapped in, and the limit an attempt's error names (pgsched.handlers.isolation, .rlimits,
.limit_kills). The real sandbox is tests/e2e/test_sandbox.py's."""

from __future__ import annotations

import signal

import pytest

from pgsched.errors import ConfigError, ValidationError
from pgsched.handlers.isolation import Isolation, resolve
from pgsched.handlers.limit_kills import ending, limit_error
from pgsched.handlers.rlimits import Limits, human_size


def test_limits_parse_units_and_refuse_bad_values_naming_the_field():
    limits = Limits.parse(cpu="2m", memory="1GB", nofile="64", nproc="100", fsize="512k")
    assert limits == Limits(cpu=120, memory=1024**3, nofile=64, nproc=100, fsize=512 * 1024)
    assert limits.prlimit_args() == [
        "--cpu=120:121",
        f"--as={1024**3}:{1024**3}",
        "--nofile=64:64",
        "--nproc=100:100",
        f"--fsize={512 * 1024}:{512 * 1024}",
    ]
    assert Limits.parse(memory="unlimited") == Limits()
    assert not Limits().any() and Limits(fsize=1).any()
    for field, kwargs in [
        ("limit_cpu", {"cpu": "1.5s"}),
        ("limit_memory", {"memory": "lots"}),
        ("limit_nofile", {"nofile": "0"}),
        ("limit_fsize", {"fsize": "3 parsecs"}),
    ]:
        with pytest.raises(ValidationError) as err:
            Limits.parse(**kwargs)
        assert err.value.field == field and field in str(err.value)
    assert human_size(3 * 1024**2) == "3MB" and human_size(1000) == "1000B"


def test_the_sandbox_argv_is_bwrap_then_the_user_then_the_limits_then_the_command():
    iso = Isolation(
        level="sandbox",
        uid=65534,
        gid=65534,
        user="nobody",
        limits=Limits(cpu=1),
        network=False,
        bwrap="/usr/bin/bwrap",
        bwrap_version="0.8.0",
        privileged=True,
    )
    argv = iso.wrap(["echo", "hi"], "/tmp/s")
    assert argv[0] == "/usr/bin/bwrap"
    for option in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--unshare-ipc"):
        assert option in argv
    assert argv[argv.index("--ro-bind") : argv.index("--ro-bind") + 3] == ["--ro-bind", "/", "/"]
    assert argv[argv.index("--bind") : argv.index("--bind") + 3] == ["--bind", "/tmp/s", "/tmp/s"]
    inner = argv[argv.index("--") + 1 :]
    assert inner[:3] == ["setpriv", "--reuid=65534", "--regid=65534"]
    assert inner[inner.index("prlimit") :] == ["prlimit", "--cpu=1:2", "--", "echo", "hi"]
    allowed = Isolation(**{**iso.__dict__, "network": True, "privileged": False})
    argv = allowed.wrap(["true"], "/tmp/s")
    assert "--unshare-net" not in argv and "setpriv" not in argv and "--unshare-user" in argv
    assert "user+pid+mount+ipc namespaces" in allowed.describe()
    assert Isolation().wrap(["true"], "/tmp/s") == ["true"]
    rlimits = Isolation(level="rlimits", uid=65534, gid=65534, privileged=True)
    assert rlimits.wrap(["true"], "/tmp/s")[0] == "setpriv"


def test_an_isolated_command_starts_from_an_environment_of_its_own(monkeypatch):
    monkeypatch.setenv("WORKER_SECRET", "x")
    monkeypatch.setenv("LC_TIME", "C")
    env = Isolation(level="sandbox", user="nobody").env("/tmp/s")
    assert "WORKER_SECRET" not in env
    assert env["HOME"] == "/tmp/s" and env["TMPDIR"] == "/tmp" and env["LC_TIME"] == "C"
    assert env["USER"] == "nobody" and "PATH" in env


@pytest.mark.parametrize(
    "code, sig",
    [(-24, signal.SIGXCPU), (152, signal.SIGXCPU), (153, signal.SIGXFSZ), (1, None), (200, None)],
)
def test_the_signal_of_an_exit_status_bwrap_reports(code, sig):
    assert ending(code, [], Limits(), bwrap=True).signal == sig


def test_the_limit_named_is_the_one_shown_to_have_ended_the_command():
    limits = Limits(cpu=2, memory=200 * 1024**2, nofile=32, nproc=50, fsize=1024**2)
    assert limit_error(signal.SIGXCPU, [], limits) == (
        "killed: CPU time limit 2 s exceeded (SIGXCPU)"
    )
    assert limit_error(signal.SIGXFSZ, [], limits) == (
        "killed: file size limit 1MB exceeded (SIGXFSZ)"
    )
    assert "memory limit 200MB (address space, RLIMIT_AS)" in limit_error(
        None, ["Traceback", "MemoryError"], limits
    )
    assert "open files limit 32 (RLIMIT_NOFILE)" in limit_error(
        None, ["OSError: [Errno 24] Too many open files: 'x'"], limits
    )
    assert "process limit 50 (RLIMIT_NPROC)" in limit_error(None, ["sh: 1: Cannot fork"], limits)
    # a limit not set is never named; a failure that names none is left to the exit status
    assert limit_error(signal.SIGXCPU, [], Limits()) is None
    assert limit_error(None, ["MemoryError"], Limits(cpu=2)) is None
    assert limit_error(None, ["no such file"], limits) is None


def test_resolve_refuses_what_it_cannot_give():
    with pytest.raises(ConfigError, match="is none of"):
        resolve("chroot")
    with pytest.raises(ConfigError, match="need --isolation rlimits or sandbox"):
        resolve("none", limits=Limits(cpu=1))
    with pytest.raises(ConfigError, match="never run as root"):
        resolve("rlimits", run_as="0")
    with pytest.raises(ConfigError, match="no user 'no-such-user-here'"):
        resolve("rlimits", run_as="no-such-user-here")


def test_a_tasks_own_settings_override_the_workers_when_it_isolates():
    from pgsched.limits import check_sandbox_fields
    from pgsched.taskspec import TaskSpec

    worker = Isolation(level="sandbox", limits=Limits(cpu=60, nofile=1024), network=False)
    task = {"limit_cpu_seconds": 2, "limit_nofile": None, "network": True}
    own = worker.for_task(task)
    assert own.limits == Limits(cpu=2, nofile=1024) and own.network is True
    assert worker.for_task({"network": None}).network is False
    rlimits = Isolation(level="rlimits", network=True)
    assert rlimits.for_task({"network": False}).network is True  # it shares the host's anyway
    assert Isolation().for_task(task) == Isolation()  # level none: nothing changes
    check_sandbox_fields(TaskSpec(name="t", command="true", limit_cpu_seconds=5, network=False))
    for field, value in [
        ("limit_cpu_seconds", 0),
        ("limit_memory_bytes", True),
        ("limit_nproc", 2**31),
        ("network", "yes"),
    ]:
        with pytest.raises(ValidationError) as err:
            TaskSpec(name="t", command="true", **{field: value}).validate()
        assert err.value.field == field
