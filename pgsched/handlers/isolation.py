"""How a worker's commands are isolated from the host, each other and the worker (issue 19,
item 1; DESIGN "Trust boundaries"). No SQL here.

Three levels, chosen by ``pgsched worker --isolation`` (docs/security.md, "Sandbox"):

- ``none``: today's behaviour: a command runs as the worker's user, in the worker's view of
  the system, with the worker's environment less its credentials.
- ``rlimits``: resource limits (setrlimit(2) by prlimit(1), util-linux), an unprivileged user
  (setpriv(1): never root), only its own environment and a scratch working directory of its
  own; it still sees the host's processes, files and network.
- ``sandbox``: the same inside bubblewrap (bwrap(1), what Flatpak uses): its own PID, mount,
  IPC and (unless allowed) network namespaces, the system read-only, a private ``/tmp``
  (tmpfs), the scratch directory the one writable place of the host.

Tools are used, never reimplemented: the namespaces and mounts are bwrap's, the limits
prlimit's, the change of user setpriv's. :func:`resolve` probes them at the worker's start
and raises :class:`~pgsched.errors.ConfigError` when the machine cannot give what was asked
for: a worker never runs with less isolation than its configuration says.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from .rlimits import NO_LIMITS, Limits, task_limits
from .run_as import RunAs, User, default_user, resolve_run_as

LEVELS = ("none", "rlimits", "sandbox")


@dataclass(frozen=True)
class Isolation:
    """What a worker's commands run in, once :func:`resolve` has checked the machine gives
    it: ``level`` (:data:`LEVELS`), the ``uid``/``gid``/``user`` they run as (the worker's
    default; ``run_as``: its tenants' and allowed crontab users, :mod:`.run_as`), ``limits``,
    whether they may reach the ``network`` (sandbox only: the rlimits level shares the
    host's), and for the sandbox ``bwrap`` (its path) and ``bwrap_version``. ``privileged``:
    the worker is root, so bwrap makes the namespaces with its privileges and setpriv changes
    user; otherwise bwrap makes a user namespace and the command keeps the worker's user."""

    level: str = "none"
    uid: int = field(default_factory=os.geteuid)
    gid: int = field(default_factory=os.getegid)
    user: str = ""
    limits: Limits = field(default_factory=Limits)
    network: bool = True
    bwrap: str | None = None
    bwrap_version: str | None = None
    privileged: bool = False
    scratch_root: str | None = None
    run_as: RunAs = field(default_factory=RunAs)

    @property
    def isolated(self) -> bool:
        return self.level != "none"

    def describe(self) -> str:
        """For the worker's start line: ``bubblewrap 0.8.0, pid+mount+ipc+net namespaces,
        uid 65534 (nobody), limits: cpu 60s, memory 1GB``."""
        who = User(self.uid, self.gid, self.user).describe()
        if self.level == "none":
            return f"none (commands run as the worker's user, {who}; no limits)"
        limits = f"limits: {self.limits.describe()}"
        who += self.run_as.describe()
        if self.level == "rlimits":
            return f"rlimits (no namespaces), {who}, {limits}"
        spaces = "pid+mount+ipc" + ("" if self.network else "+net")
        if not self.privileged:
            spaces = "user+" + spaces
        net = "network allowed" if self.network else "no network"
        return f"bubblewrap {self.bwrap_version}, {spaces} namespaces, {who}, {net}, {limits}"

    def for_task(self, task: Mapping[str, Any]) -> Isolation:
        """This isolation with a task's own settings (a claimed row): the user its command
        runs as (:meth:`.run_as.RunAs.user_for`: its allowed ``run_as_user``, its tenant's,
        the worker's), its ``limit_*`` over the worker's (migration 0032), its ``network``
        (None: the worker's; the rlimits level shares the host's network whatever it says).
        Level none: unchanged, ``run_as_user`` ignored. Raises
        :class:`~.run_as.RunAsRefused` for a ``run_as_user`` the worker does not allow."""
        if not self.isolated:
            return self
        network = task.get("network")
        user = self.run_as.user_for(task, User(self.uid, self.gid, self.user))
        return replace(
            self,
            uid=user.uid,
            gid=user.gid,
            user=user.name,
            limits=task_limits(self.limits, task),
            network=self.network if network is None or self.level != "sandbox" else network,
        )

    def ignored(self, task: Mapping[str, Any]) -> str | None:
        """What of a task's own settings (a claimed row's ``limit_*`` and ``network``) this
        worker does not apply, said for the execution's log; None when it applies them all.
        Level none applies none of them; rlimits shares the host's network whatever the
        task says."""
        if not self.isolated:
            own = task_limits(NO_LIMITS, task)
            network = task.get("network")
            given = [own.describe()] if own.any() else []
            given += [f"network {'allow' if network else 'deny'}"] if network is not None else []
            if not given:
                return None
            return (
                f"this task's own {'; '.join(given)} not applied: this worker runs commands "
                "with --isolation none (as its user, unlimited); they apply on a worker with "
                "--isolation rlimits or sandbox"
            )
        if self.level == "rlimits" and task.get("network") is False:
            return (
                "this task's network deny not applied: --isolation rlimits shares the host's "
                "network; it applies on a worker with --isolation sandbox"
            )
        return None

    def wrap(self, argv: list[str], scratch: str) -> list[str]:
        """``argv`` as it is to be started: inside bwrap (sandbox), as the command's user
        (setpriv, when the worker is root) and under its limits (prlimit), in ``scratch``."""
        if not self.isolated:
            return argv
        inner = list(argv)
        if self.limits.any():
            inner = ["prlimit", *self.limits.prlimit_args(), "--", *inner]
        if self.privileged:  # never root: a fresh user, no groups, no way back up
            inner = [
                "setpriv",
                f"--reuid={self.uid}",
                f"--regid={self.gid}",
                "--clear-groups",
                "--no-new-privs",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
                *inner,
            ]
        if self.level == "rlimits":
            return inner
        assert self.bwrap is not None
        return [*self.bwrap_args(scratch), "--", *inner]

    def bwrap_args(self, scratch: str) -> list[str]:
        """bwrap's own arguments: the system read-only, a new /proc of its PID namespace, a
        minimal /dev, a tmpfs /tmp, ``scratch`` writable and its working directory; killed
        with the process that started it (--die-with-parent: PR_SET_PDEATHSIG)."""
        assert self.bwrap is not None
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--perms", "1777", "--tmpfs", "/tmp"]  # as the host's: sticky, for anyone
        parent = os.path.dirname(os.path.abspath(scratch))
        if parent not in ("/", "/tmp"):  # where the worker's TMPDIR puts every scratch
            # directory: empty here, else another command of the same user reads those of
            # the others beside its own (attack 19, tests/e2e/test_attack19_scratch.py)
            args += ["--tmpfs", parent]
        args += ["--bind", scratch, scratch, "--chdir", scratch]
        args += ["--unshare-pid", "--unshare-ipc", "--die-with-parent"]
        if not self.network:  # and /run's sockets (a server's, as PostgreSQL's 0777 one)
            args += ["--unshare-net", "--tmpfs", "/run"]
        if not self.privileged:
            args += ["--unshare-user", "--uid", str(self.uid), "--gid", str(self.gid)]
        return args

    def env(self, scratch: str) -> dict[str, str]:
        """The environment an isolated command starts from (its task's env and pgsched's
        own variables are added to it): none of the worker's but the search path and the
        locale; HOME is its scratch directory."""
        base = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TZ")}
        base |= {k: v for k, v in os.environ.items() if k.startswith("LC_")}
        base.setdefault("PATH", os.defpath)
        base |= {"HOME": scratch, "PWD": scratch}
        if self.user:
            base |= {"USER": self.user, "LOGNAME": self.user}
        if self.level == "sandbox":
            base["TMPDIR"] = "/tmp"
        return base

    @contextlib.contextmanager
    def scratch(self) -> Iterator[str]:
        """A fresh directory for one execution, its user's alone (mode 0700), removed with
        what the command left in it afterwards."""
        path = tempfile.mkdtemp(prefix="pgsched-scratch-", dir=self.scratch_root)
        try:
            if os.geteuid() == 0:
                os.chown(path, self.uid, self.gid)
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def give(self, fd: int) -> None:
        """Let the command's user read the open file ``fd`` (a params file the worker is
        writing). By its descriptor, never its path: the scratch directory is the command's
        user's, and another command of that user could swap the name for a symlink to
        ``/etc/shadow`` between the write and a chown by name."""
        if self.isolated and os.geteuid() == 0:
            os.fchown(fd, self.uid, self.gid)


def resolve(
    level: str,
    run_as: str | None = None,
    limits: Limits = NO_LIMITS,
    network: bool = False,
    scratch_root: str | None = None,
    tenant_run_as: Iterable[str] = (),
    allow_run_as: Iterable[str] = (),
) -> Isolation:
    """The isolation a worker's configuration asks for, once this machine is shown to give
    it: the tools are found and a trial command runs under exactly the wrapping commands
    will get, as each user commands may run as (``run_as``, ``tenant_run_as`` TENANT=USER
    values, ``allow_run_as`` USER[,USER] values: :mod:`.run_as`). Raises ConfigError saying
    what is missing (no bwrap, namespaces refused as in a container without them, no
    prlimit or setpriv, a user that cannot be, naming its option and value)."""
    tenant_run_as, allow_run_as = tuple(tenant_run_as), tuple(allow_run_as)
    if level not in LEVELS:
        raise ConfigError(f"isolation: {level!r} is none of {', '.join(LEVELS)}")
    if network and level != "sandbox":  # it would change nothing: say so, not ignore it
        raise ConfigError(
            f"isolation: --allow-network with --isolation {level} changes nothing: "
            + (
                "its commands share the host's network always (no network namespace)"
                if level == "rlimits"
                else "commands run unisolated, on the host's network"
            )
            + "; drop --allow-network, or use --isolation sandbox, whose commands get no "
            "network unless it is given"
        )
    if level == "none":
        if run_as is not None or tenant_run_as or allow_run_as or limits.any():
            raise ConfigError(
                "isolation: --run-as, --tenant-run-as, --allow-run-as and --limit-* need "
                "--isolation rlimits or sandbox (with none, commands run as the worker's "
                "user, unlimited)"
            )
        return Isolation(user=default_user(None, False).name)
    privileged = os.geteuid() == 0
    default = default_user(run_as, privileged)
    users = resolve_run_as(tenant_run_as, allow_run_as, privileged, default)
    for tool in ("prlimit", "setpriv"):
        if shutil.which(tool) is None:
            raise ConfigError(f"isolation {level}: {tool}(1) is missing: install util-linux")
    bwrap = version = None
    if level == "sandbox":
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise ConfigError(
                "isolation sandbox: bwrap(1) is missing: install bubblewrap (Debian package "
                "bubblewrap), or run with --isolation rlimits"
            )
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
        version = out.stdout.strip().removeprefix("bubblewrap ") or "unknown"
    iso = Isolation(
        level=level,
        uid=default.uid,
        gid=default.gid,
        user=default.name,
        limits=limits,
        network=network or level == "rlimits",  # rlimits: the host's, always
        bwrap=bwrap,
        bwrap_version=version,
        privileged=privileged,
        scratch_root=scratch_root,
        run_as=users,
    )
    _trial(iso)
    for user in users.users():  # each user a command may run as, tried once
        if user != default:
            _trial(replace(iso, uid=user.uid, gid=user.gid, user=user.name))
    return iso


def _trial(iso: Isolation) -> None:
    """Run ``id -u`` as commands will run; ConfigError with what the tools said if it fails
    or runs as another user than ``iso.uid``."""
    with iso.scratch() as scratch:
        try:
            out = subprocess.run(
                iso.wrap(["id", "-u"], scratch),
                capture_output=True,
                text=True,
                timeout=30,
                env=iso.env(scratch),
                cwd=scratch,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise ConfigError(
                f"isolation {iso.level}: cannot start its trial command: {exc}"
            ) from None
    said = (out.stderr.strip() or out.stdout.strip())[-300:]
    if out.returncode != 0:
        hint = (
            " (user namespaces refused: a container without them? kernel.unprivileged_userns_clone,"
            " or start the worker as root)"
            if iso.level == "sandbox"
            else ""
        )
        raise ConfigError(
            f"isolation {iso.level}: this machine cannot give it: its trial command exited with "
            f"{out.returncode}: {said!r}{hint}; use a lower --isolation"
        )
    if out.stdout.strip() != str(iso.uid):
        raise ConfigError(
            f"isolation {iso.level}: its trial command ran as uid {out.stdout.strip()!r}, "
            f"not {iso.uid}"
        )
