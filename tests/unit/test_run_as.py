"""Which user an isolated command runs as (pgsched.handlers.run_as): the options parsed,
the users looked up in this host's passwd, and the choice for a claimed row. The real
processes are tests/e2e/test_run_as.py's."""

from __future__ import annotations

import os
import pwd

import pytest

from pgsched.errors import ConfigError
from pgsched.handlers.isolation import Isolation
from pgsched.handlers.run_as import (
    RunAs,
    RunAsRefused,
    User,
    lookup,
    parse_allow_run_as,
    parse_tenant_run_as,
    resolve_run_as,
)

# users every Debian has (base-passwd): daemon (1), bin (2); nobody (65534)
DAEMON, BIN = pwd.getpwnam("daemon"), pwd.getpwnam("bin")


def test_tenant_run_as_is_tenant_equals_user_each_tenant_once():
    assert parse_tenant_run_as(["a=alice", " b = 1001:1001 "]) == (
        ("a", "alice"),
        ("b", "1001:1001"),
    )
    assert parse_tenant_run_as([]) == ()
    for value, said in [
        ("alice", "must be TENANT=USER"),
        ("=alice", "must be TENANT=USER"),
        ("a=", "must be TENANT=USER"),
        ("-a=alice", "its tenant '-a' must be 1-64 characters"),
        ("a b=alice", "its tenant 'a b' must be"),
    ]:
        with pytest.raises(ConfigError) as err:
            parse_tenant_run_as([value])
        assert f"--tenant-run-as {value!r}" in str(err.value) and said in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_tenant_run_as(["a=alice", "b=bob", "a=carol"])
    assert "--tenant-run-as 'a=carol': tenant 'a' is given twice" in str(err.value)
    assert "'a=alice'" in str(err.value)


def test_allow_run_as_takes_commas_and_repeats_each_user_once():
    assert parse_allow_run_as(["backup", "www-data, backup", "34"]) == ("backup", "www-data", "34")
    for value in ("a,,b", "a,", ""):
        with pytest.raises(ConfigError) as err:
            parse_allow_run_as([value])
        assert f"--allow-run-as {value!r} names an empty user" in str(err.value)


def test_users_are_looked_up_never_root_and_named_with_their_option():
    assert lookup("daemon", True) == User(DAEMON.pw_uid, DAEMON.pw_gid, "daemon")
    assert lookup(str(BIN.pw_uid), True) == User(BIN.pw_uid, BIN.pw_gid, "bin")
    assert lookup("2:5", True) == User(2, 5, "bin")
    for value, said in [
        ("root", "is root: isolated commands never run as root"),
        ("0", "is root"),
        ("daemon:0", "is root"),
        ("pgsched-no-such-user", "no user 'pgsched-no-such-user' on this host"),
        ("daemon:staff", "must be a number (uid:gid)"),
    ]:
        with pytest.raises(ConfigError) as err:
            lookup(value, True, "--tenant-run-as", f"a={value}")
        assert str(err.value).startswith(f"tenant_run_as: --tenant-run-as 'a={value}': ")
        assert said in str(err.value)
    if os.geteuid() != DAEMON.pw_uid:  # a worker that is not root keeps its own user
        with pytest.raises(ConfigError) as err:
            lookup("daemon", False, "--allow-run-as")
        assert "cannot run commands as another user" in str(err.value)
        assert "drop --allow-run-as" in str(err.value)


def test_resolve_run_as_refuses_root_and_unknown_users_by_option_and_value():
    for tenants, allowed, said in [
        (["a=root"], [], "tenant_run_as: --tenant-run-as 'a=root': 'root' is root"),
        (["a=ghost-user-x"], [], "--tenant-run-as 'a=ghost-user-x': no user"),
        ([], ["daemon,root"], "allow_run_as: --allow-run-as 'root': 'root' is root"),
        ([], ["ghost-user-x"], "--allow-run-as 'ghost-user-x': no user"),
        (["a=daemon", "a=bin"], [], "tenant 'a' is given twice"),
    ]:
        with pytest.raises(ConfigError) as err:
            resolve_run_as(tenants, allowed, True)
        assert said in str(err.value)


def test_a_commands_user_is_its_allowed_crontab_user_then_its_tenants_then_the_workers():
    run_as = resolve_run_as(["a=daemon"], [str(BIN.pw_uid)], True)
    default = User(65534, 65534, "nobody")
    daemon, bin_ = User(DAEMON.pw_uid, DAEMON.pw_gid, "daemon"), User(BIN.pw_uid, BIN.pw_gid, "bin")
    assert run_as.user_for({"tenant": "a"}, default) == daemon
    assert run_as.user_for({"tenant": "b"}, default) == default
    assert run_as.user_for({"tenant": "b", "run_as_user": None}, default) == default
    # allowed by uid: the line's name for that uid is allowed too
    assert run_as.user_for({"tenant": "a", "run_as_user": "bin"}, default) == bin_
    assert run_as.user_for({"tenant": "a", "run_as_user": str(BIN.pw_uid)}, default) == bin_
    for wanted, said in [
        ("daemon", "--allow-run-as daemon to allow it"),  # its tenant's user, yet not allowed
        ("www-data", "does not run commands as"),
        ("root", "which is root: isolated commands never run as root"),
        ("0", "which is root"),
    ]:
        with pytest.raises(RunAsRefused) as err:
            run_as.user_for({"tenant": "a", "task_name": "nightly", "run_as_user": wanted}, default)
        assert f"task 'nightly' names the crontab user {wanted!r}" in str(err.value)
        assert said in str(err.value)
    # an allowed user that is another tenant's is that tenant's alone
    shared = resolve_run_as(["a=daemon"], ["daemon"], True)
    assert shared.user_for({"tenant": "a", "run_as_user": "daemon"}, default) == daemon
    with pytest.raises(RunAsRefused) as err:
        shared.user_for({"tenant": "b", "task_name": "t", "run_as_user": "daemon"}, default)
    assert "which runs tenant 'a''s commands (--tenant-run-as)" in str(err.value)
    assert run_as.users() == [daemon, bin_]
    assert run_as.describe() == (
        f"; tenant a as uid {DAEMON.pw_uid} (daemon); crontab users allowed: uid {BIN.pw_uid} (bin)"
    )
    assert RunAs().describe() == "" and RunAs().users() == []


def test_isolation_for_task_runs_as_the_chosen_user_and_ignores_it_without_isolation():
    run_as = resolve_run_as(["a=daemon"], [], True)
    iso = Isolation(level="rlimits", uid=65534, gid=65534, user="nobody", run_as=run_as)
    mine = iso.for_task({"tenant": "a"})
    assert (mine.uid, mine.gid, mine.user) == (DAEMON.pw_uid, DAEMON.pw_gid, "daemon")
    assert mine.env("/tmp/s")["USER"] == "daemon"
    assert "setpriv" in mine.wrap(["id"], "/tmp/s") or not mine.privileged
    other = iso.for_task({"tenant": "b"})
    assert (other.uid, other.user) == (65534, "nobody")
    with pytest.raises(RunAsRefused):
        iso.for_task({"tenant": "b", "run_as_user": "www-data"})
    assert "tenant a as uid" in iso.describe()
    plain = Isolation(level="none", run_as=run_as)  # not isolating: the column is ignored
    assert plain.for_task({"tenant": "a", "run_as_user": "www-data"}) is plain


def test_a_tenants_user_is_its_own_not_anothers_nor_the_workers():
    """Attack 20: two tenants given one user, or a tenant given the worker's user (which
    every tenant without one runs as), shared a uid: each read the other's /proc environ."""
    nobody = User(65534, 65534, "nobody")
    daemon = User(DAEMON.pw_uid, DAEMON.pw_gid, "daemon")
    for tenants, default, said in [
        (["a=daemon", "b=daemon"], None, "'b=daemon': uid 1 (daemon) is tenant 'a''s already"),
        (["a=daemon", f"b={DAEMON.pw_uid}"], None, f"'b={DAEMON.pw_uid}': uid 1 (daemon) is"),
        (["a=nobody"], nobody, "'a=nobody': uid 65534 (nobody) is the worker's user"),
        (["a=bin", "b=daemon"], daemon, "'b=daemon': uid 1 (daemon) is the worker's user"),
    ]:
        with pytest.raises(ConfigError) as err:
            resolve_run_as(tenants, [], True, default)
        assert f"tenant_run_as: --tenant-run-as {said}" in str(err.value)
    assert resolve_run_as(["a=daemon", "b=bin"], [], True, nobody).users()
