"""Parse crontab text into importable entries and human-readable problems.

This module owns the *pure* translation of a crontab file (crontab(5) as
cronie / Vixie cron define it) into :class:`CrontabEntry` and
:class:`CrontabProblem` values.  It touches no database, runs nothing and
never switches user; pgsched decides elsewhere what to do with the result.

Every non-blank, non-comment line ends up as exactly one of: an environment
line (folded into the ``env`` of the entries below it), an entry, or a
problem.  No line is silently dropped.

Deliberate differences from cronie, each noted where it is implemented:
``@reboot`` is reported as a problem (pgsched has no boot event); nicknames
are matched case-insensitively; a reversed range (``5-1``) is an error here
even where croniter would accept it; the ``-`` "don't log" line prefix is
accepted and has no effect (every run is recorded); a last line without a
trailing newline is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import cron

__all__ = ["CrontabEntry", "CrontabProblem", "Crontab", "parse_crontab"]


@dataclass(frozen=True)
class CrontabEntry:
    """One schedulable crontab line.

    - ``line_no``: 1-based line number in the file.
    - ``schedule``: the 5 time fields joined by single spaces
      (``"5-55/10 * * * *"``) or the nickname lowercased as written
      (``"@daily"``, ``"@midnight"``, ``"@annually"`` - not rewritten).
    - ``user``: the user column of a system crontab (``system=True``), else
      None.  Stored only; pgsched never switches to it.
    - ``command``: the text before the first unescaped ``%``, with ``\\%``
      turned into ``%`` (crontab(5), cronie do_command.c).
    - ``stdin``: the text after the first unescaped ``%`` with further
      unescaped ``%`` turned into ``\\n`` and ``\\%`` into ``%``; None when the
      line had no unescaped ``%``.  cronie appends a final newline when it
      writes this text to the job; pgsched stores it *without* one.
    - ``env``: every ``NAME=value`` line above this one, in file order (a later
      line overrides an earlier one); a fresh dict per entry.
    - ``timezone``: the latest ``CRON_TZ=`` value above (also in ``env``).
    - ``mailto``: the latest ``MAILTO=`` value above (also in ``env``).
    - ``raw``: the original line without its line terminator.
    """

    line_no: int
    schedule: str
    user: str | None
    command: str
    stdin: str | None
    env: dict[str, str]
    timezone: str | None
    mailto: str | None
    raw: str


@dataclass(frozen=True)
class CrontabProblem:
    """A line that is neither blank, comment, environment line nor valid entry.

    ``reason`` is one sentence starting ``"line N: "`` naming the bad field and
    value, e.g. ``"line 7: minute field '61' is out of range 0-59"``.
    """

    line_no: int
    raw: str
    reason: str


@dataclass(frozen=True)
class Crontab:
    """The result of :func:`parse_crontab`: entries and problems in file order."""

    entries: list[CrontabEntry]
    problems: list[CrontabProblem]


# crontab(5): "name = value"; blanks around '=' allowed, value may be quoted.
# crontab(5): cron runs a command with SHELL=/bin/sh and PATH=/usr/bin:/bin unless the
# file sets them (it also sets HOME and LOGNAME from the owner's passwd entry; pgsched runs
# commands as the worker's user and leaves those to the worker's environment).
DEFAULT_ENV = {"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}

_ENV_RE = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=(.*)")
# cronie separates fields with blanks (space or tab) only.
_TOKEN_RE = re.compile(r"[^ \t]+")
# cronie do_command.c: a '%' directly after a backslash is literal.




class _LineError(Exception):
    """Internal: the reason (without the "line N: " prefix) a line is bad."""


def parse_crontab(text: str, *, system: bool = False) -> Crontab:
    """Parse crontab ``text``; ``system=True`` for /etc/crontab and cron.d files.

    System crontabs carry a user column between the schedule and the command
    (crontab(5)).  Lines are split on ``\\n``; one trailing ``\\r`` is dropped.
    """
    entries: list[CrontabEntry] = []
    problems: list[CrontabProblem] = []
    env: dict[str, str] = {}
    for line_no, raw in enumerate(text.split("\n"), start=1):
        if raw.endswith("\r"):
            raw = raw[:-1]
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # crontab(5): blank lines and '#' comments are ignored
        env_match = _ENV_RE.fullmatch(raw)
        if env_match:  # cronie tries an environment setting before an entry
            env[env_match.group(1)] = _env_value(env_match.group(2))
            continue
        try:
            # cronie entry.c: a leading '-' only asks cron not to syslog the run; pgsched
            # records every run anyway, so the entry is read without it.
            line = raw.replace("-", "", 1) if raw.lstrip().startswith("-") else raw
            schedule, user, rest = _split_line(line, system)
            command, stdin = _split_percent(rest)
            if not command.strip():
                raise _LineError("the command before the first unescaped '%' is empty")
        except _LineError as exc:
            problems.append(CrontabProblem(line_no, raw, f"line {line_no}: {exc}"))
            continue
        entries.append(
            CrontabEntry(
                line_no=line_no,
                schedule=schedule,
                user=user,
                command=command,
                stdin=stdin,
                env=dict(env),
                timezone=env.get("CRON_TZ"),
                mailto=env.get("MAILTO"),
                raw=raw,
            )
        )
    return Crontab(entries=entries, problems=problems)


def _env_value(value: str) -> str:
    """crontab(5): strip blanks; strip one pair of matching quotes if present."""
    value = value.strip(" \t")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _split_line(raw: str, system: bool) -> tuple[str, str | None, str]:
    """Return (schedule, user, command text as written) or raise _LineError."""
    tokens = list(_TOKEN_RE.finditer(raw))
    first = tokens[0].group()
    if first.startswith("@"):
        nickname = first.lower()
        if nickname == "@reboot":
            raise _LineError("'@reboot' is not supported (pgsched has no boot event)")
        if nickname not in cron.NICKNAMES:
            raise _LineError(f"unknown schedule nickname '{first}' (expected one of {', '.join(cron.NICKNAMES)})")
        schedule, used = nickname, 1
    else:
        if len(tokens) < 5:
            found = " ".join(t.group() for t in tokens)
            raise _LineError(f"expected 5 time fields and a command, found {len(tokens)} field(s): '{found}'")
        schedule, used = " ".join(t.group() for t in tokens[:5]), 5
        try:
            cron.check(schedule)
        except cron.CronError as exc:
            raise _LineError(str(exc)) from None
    after = "user" if system else "command"
    if len(tokens) > used and tokens[used].group().startswith("*"):
        # cronie entry.c rejects a '*' here ("catch a common typo").
        raise _LineError(f"{after} '{tokens[used].group()}' starts with '*' (a sixth time field?)")
    user = None
    if system:
        if len(tokens) == used:
            raise _LineError(f"missing the user column and the command after '{schedule}'")
        user, used = tokens[used].group(), used + 1
        if len(tokens) == used:
            raise _LineError(f"missing the command after user '{user}'")
    if len(tokens) == used:
        raise _LineError(f"missing the command after '{schedule}'")
    # The command is the rest of the line exactly as written (cronie entry.c).
    return schedule, user, raw[tokens[used].start():]


def _split_percent(rest: str) -> tuple[str, str | None]:
    """Split the command text at the first unescaped '%' (crontab(5)), reading backslashes
    as cronie's do_command.c does, one character at a time:

    - in the command, a backslash escapes the character after it; an escaped '%' is kept
      without its backslash, any other escaped character (a second backslash too) is kept
      with it. So ``\\%`` is a literal '%', but ``\\\\%`` is an escaped backslash
      followed by the '%' that ends the command.
    - in the standard input, an unescaped '%' is a newline, ``\\%`` is '%', and a
      backslash before anything else is kept.

    Unlike cronie, no final newline is appended to stdin (the worker adds it).
    """
    command: list[str] = []
    escaped = False
    for i, ch in enumerate(rest):
        if escaped:
            if ch == "%":
                command[-1] = "%"
            else:
                command.append(ch)
            escaped = False
        elif ch == "\\":
            command.append(ch)
            escaped = True
        elif ch == "%":
            return "".join(command), _stdin_text(rest[i + 1:])
        else:
            command.append(ch)
    return "".join(command), None


def _stdin_text(text: str) -> str:
    """The standard-input part after the first unescaped '%' (see _split_percent)."""
    out: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            if ch != "%":
                out.append("\\")
        elif ch == "%":
            ch = "\n"
        escaped = ch == "\\"
        if not escaped:
            out.append(ch)
    if escaped:
        out.append("\\")
    return "".join(out)
