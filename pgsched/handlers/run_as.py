"""Which user an isolated command runs as (issue 19, item 1: "each command runs as an
unprivileged user, a configured uid per tenant or per worker; crontab imports' user column
honoured against an allow-list; never as root"). No SQL here; the users are looked up in
the host's passwd database (pwd, as getent does).

The user of a command is, first that applies (:meth:`RunAs.user_for`):

1. its task's ``run_as_user`` (the user column of a system crontab, ``pgsched
   import-crontab --system``) when the worker allows it (``--allow-run-as USER,...``); a
   task that names a user the worker does not allow, or root, is refused: it never runs as
   someone else;
2. the user of its tenant (``--tenant-run-as TENANT=USER``);
3. the worker's ``--run-as``, or its default (nobody for a root worker, else its own user).

A worker that does not isolate its commands (``--isolation none``) runs them all as itself
and ignores ``run_as_user``, as before (docs/security.md, "Sandbox").
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, PgschedError, ValidationError

# The user a root worker's isolated commands run as when no --run-as is given.
NOBODY = "nobody"


class RunAsRefused(PgschedError):
    """A task names a user (its crontab's) that this worker may not run its commands as:
    its attempt fails for good, with this message."""


@dataclass(frozen=True)
class User:
    """A user commands run as: ``uid``, ``gid``, ``name`` (empty: none in passwd)."""

    uid: int
    gid: int
    name: str = ""

    def describe(self) -> str:
        return f"uid {self.uid} ({self.name})" if self.name else f"uid {self.uid}"


def lookup(value: str, privileged: bool, option: str = "--run-as", given: str = "") -> User:
    """The user ``value`` names (a user name, a uid, or ``uid:gid``). Raises ConfigError
    naming ``option`` and what was ``given`` (``value`` when empty) for root, an unknown
    user, or another user than the worker's when the worker is not root (it may not change
    user)."""
    field = option.lstrip("-").replace("-", "_")
    where = f"{field}: {option} {given or value!r}"
    text, _, gid_text = value.partition(":")
    if text.isdigit():
        uid = int(text)
        entry = _entry(uid)
        gid = entry.pw_gid if entry else uid
        name = entry.pw_name if entry else ""
    else:
        try:
            entry = pwd.getpwnam(text)
        except KeyError:
            raise ConfigError(f"{where}: no user {text!r} on this host (getent passwd)") from None
        uid, gid, name = entry.pw_uid, entry.pw_gid, entry.pw_name
    if gid_text:
        if not gid_text.isdigit():
            raise ConfigError(f"{where}: the group of {value!r} must be a number (uid:gid)")
        gid = int(gid_text)
    if uid == 0 or gid == 0:
        raise ConfigError(f"{where}: {value!r} is root: isolated commands never run as root")
    if not privileged and uid != os.geteuid():
        raise ConfigError(
            f"{where}: a worker that is not root (uid {os.geteuid()}) cannot run commands "
            f"as another user; start it as root or drop {option}"
        )
    return User(uid, gid, name)


def default_user(run_as: str | None, privileged: bool) -> User:
    """The worker's user for commands: ``--run-as``, else nobody for a root worker, else
    the worker's own user. Raises what :func:`lookup` raises."""
    if run_as is not None:
        return lookup(run_as, privileged)
    if privileged:
        return lookup(NOBODY, privileged)
    entry = _entry(os.geteuid())
    return User(os.geteuid(), os.getegid(), entry.pw_name if entry else "")


def parse_tenant_run_as(values: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``--tenant-run-as TENANT=USER`` values as (tenant, user) pairs, in order. Raises
    ConfigError naming the option and the value when one is not ``TENANT=USER``, its tenant
    is no tenant name (taskspec.check_name), or a tenant is given twice."""
    from ..taskspec import check_name

    pairs: dict[str, tuple[str, str]] = {}
    for value in values:
        tenant, sep, user = (part.strip() for part in value.partition("="))
        where = f"tenant_run_as: --tenant-run-as {value!r}"
        if not sep or not tenant or not user:
            raise ConfigError(f"{where} must be TENANT=USER (USER: a name, uid or uid:gid)")
        try:
            check_name("tenant", tenant)
        except ValidationError as exc:
            raise ConfigError(f"{where}: its tenant {tenant!r} {exc.reason}") from None
        if tenant in pairs:
            raise ConfigError(
                f"{where}: tenant {tenant!r} is given twice (also --tenant-run-as "
                f"{pairs[tenant][1]!r}); give each tenant one user"
            )
        pairs[tenant] = (user, value)
    return tuple((tenant, user) for tenant, (user, _) in pairs.items())


def parse_allow_run_as(values: Iterable[str]) -> tuple[str, ...]:
    """``--allow-run-as USER[,USER...]`` values (repeatable) as one list of users, each
    once, in order. Raises ConfigError naming the option and the value for an empty name
    (``a,,b``, a trailing comma)."""
    users: list[str] = []
    for value in values:
        for user in (part.strip() for part in value.split(",")):
            if not user:
                raise ConfigError(
                    f"allow_run_as: --allow-run-as {value!r} names an empty user: give "
                    "user names separated by commas"
                )
            if user not in users:
                users.append(user)
    return tuple(users)


@dataclass(frozen=True)
class RunAs:
    """The users of a worker's commands beyond its default one: ``tenants``' (tenant,
    user) pairs and the ``allowed`` crontab users (the task's ``run_as_user`` as written,
    and the name it resolves to, each with its user). Built by :func:`resolve_run_as`."""

    tenants: tuple[tuple[str, User], ...] = ()
    allowed: tuple[tuple[str, User], ...] = ()

    def user_for(self, task: Mapping[str, Any], default: User) -> User:
        """The user a claimed row's command runs as (this module's docstring); raises
        RunAsRefused when its task names a ``run_as_user`` that is not allowed."""
        wanted, tenant = task.get("run_as_user"), task.get("tenant")
        if wanted:
            for name, user in self.allowed:
                if name == wanted:
                    return self._not_anothers(task, wanted, user)
            raise RunAsRefused(_refusal(task, wanted))
        for name, user in self.tenants:
            if name == tenant:
                return user
        return default

    def _not_anothers(self, task: Mapping[str, Any], wanted: str, user: User) -> User:
        """``user``, unless it is another tenant's (``--tenant-run-as``): any tenant served
        may import a crontab line naming any user, and must not get into another's."""
        for tenant, theirs in self.tenants:
            if theirs.uid == user.uid and tenant != task.get("tenant"):
                raise RunAsRefused(
                    f"task {_name(task)!r} of tenant {task.get('tenant')!r} names the crontab "
                    f"user {wanted!r}, which runs tenant {tenant!r}'s commands "
                    "(--tenant-run-as): a tenant's task never runs as another tenant's user"
                )
        return user

    def users(self) -> list[User]:
        """Every user named here, each once (the worker tries each at its start)."""
        seen: list[User] = []
        for _, user in (*self.tenants, *self.allowed):
            if user not in seen:
                seen.append(user)
        return seen

    def describe(self) -> str:
        """For the worker's start line: ``; tenant a as uid 1001 (alice); crontab users
        allowed: uid 34 (backup)``, or nothing."""
        out = "".join(f"; tenant {t} as {u.describe()}" for t, u in self.tenants)
        if self.allowed:
            users = dict.fromkeys(u for _, u in self.allowed)
            out += "; crontab users allowed: " + ", ".join(u.describe() for u in users)
        return out


def _name(task: Mapping[str, Any]) -> str:
    return str(task.get("task_name") or task.get("name") or "?")


def _refusal(task: Mapping[str, Any], wanted: str) -> str:
    name = _name(task)
    text, _, _ = wanted.partition(":")
    entry = _entry(int(text)) if text.isdigit() else _named(text)
    if (entry is not None and entry.pw_uid == 0) or text == "0":
        return (
            f"task {name!r} names the crontab user {wanted!r}, which is root: isolated "
            "commands never run as root (--allow-run-as cannot allow it); name another user "
            "on its crontab line and import it again"
        )
    return (
        f"task {name!r} names the crontab user {wanted!r}, which this worker does not run "
        f"commands as: start the worker with --allow-run-as {wanted} to allow it (its "
        "commands are never run as another user instead)"
    )


def resolve_run_as(
    tenant_run_as: Iterable[str],
    allow_run_as: Iterable[str],
    privileged: bool,
    default: User | None = None,
) -> RunAs:
    """The users ``--tenant-run-as`` and ``--allow-run-as`` name, each looked up as
    :func:`lookup` does. Raises ConfigError naming the option and the value, also for a
    tenant's user that is another tenant's or ``default`` (the worker's user, that every
    tenant without one of its own runs as): the tenants would share a uid, and each could
    read and signal the other's commands (attack 20)."""
    tenants: list[tuple[str, User]] = []
    for tenant, name in parse_tenant_run_as(tenant_run_as):
        user = lookup(name, privileged, "--tenant-run-as", f"{tenant}={name}")
        where = f"tenant_run_as: --tenant-run-as {tenant + '=' + name!r}"
        for other, theirs in tenants:
            if theirs.uid == user.uid:
                raise ConfigError(
                    f"{where}: {user.describe()} is tenant {other!r}'s already: give each "
                    "tenant a user of its own, or its commands read and signal the other's"
                )
        if default is not None and default.uid == user.uid:
            raise ConfigError(
                f"{where}: {user.describe()} is the worker's user for commands (--run-as, "
                "nobody for a root worker), which every tenant without a --tenant-run-as "
                "runs as: give the tenant a user of its own"
            )
        tenants.append((tenant, user))
    allowed: list[tuple[str, User]] = []
    for name in parse_allow_run_as(allow_run_as):
        user = lookup(name, privileged, "--allow-run-as")
        allowed.append((name, user))
        if user.name and user.name != name:  # --allow-run-as 34 allows the line's "backup"
            allowed.append((user.name, user))
    return RunAs(tuple(tenants), tuple(allowed))


def _entry(uid: int) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        return None


def _named(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None
