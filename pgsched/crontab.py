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
from dataclasses import dataclass, field

from . import cron

__all__ = ["Crontab", "CrontabEntry", "CrontabProblem", "CrontabWarning", "parse_crontab"]


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
    value, e.g. ``"line 7: minute 61 is out of range 0-59"``.
    """

    line_no: int
    raw: str
    reason: str


@dataclass(frozen=True)
class CrontabWarning:
    """An entry that is valid but probably not what was meant: ``message`` is one sentence
    starting ``"line N: "``, saying what cron will do and what to write instead."""

    line_no: int
    raw: str
    message: str


@dataclass(frozen=True)
class Crontab:
    """The result of :func:`parse_crontab`: entries, problems and warnings in file order."""

    entries: list[CrontabEntry]
    problems: list[CrontabProblem]
    warnings: list[CrontabWarning] = field(default_factory=list)


# crontab(5): "name = value"; blanks around '=' allowed, value may be quoted.
# crontab(5): cron runs a command with SHELL=/bin/sh and PATH=/usr/bin:/bin unless the
# file sets them (it also sets HOME and LOGNAME from the owner's passwd entry; pgsched runs
# commands as the worker's user and leaves those to the worker's environment).
DEFAULT_ENV = {"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}

# cronie separates fields with blanks (space or tab) only.
_TOKEN_RE = re.compile(r"[^ \t]+")


class _LineError(Exception):
    """Internal: the reason (without the "line N: " prefix) a line is bad."""


def parse_crontab(text: str, *, system: bool = False) -> Crontab:
    """Parse crontab ``text``; ``system=True`` for /etc/crontab and cron.d files.

    System crontabs carry a user column between the schedule and the command
    (crontab(5)).  Lines are split on ``\\n``; one trailing ``\\r`` is dropped.
    """
    entries: list[CrontabEntry] = []
    problems: list[CrontabProblem] = []
    warnings: list[CrontabWarning] = []
    env: dict[str, str] = {}
    for line_no, raw in enumerate(text.split("\n"), start=1):
        if raw.endswith("\r"):
            raw = raw[:-1]
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # crontab(5): blank lines and '#' comments are ignored
        setting = _env_line(raw)
        if setting is not None:  # cronie tries an environment setting before an entry
            env[setting[0]] = setting[1]
            continue
        try:
            # cronie entry.c: a leading '-' only asks cron not to syslog the run; pgsched
            # records every run anyway, so the entry is read without it. The schedule
            # must follow it directly.
            line = raw
            if raw.lstrip().startswith("-"):
                line = raw.replace("-", "", 1)
                if line[len(raw) - len(raw.lstrip()) :][:1] in (" ", "\t", ""):
                    raise _LineError("'-' (do not log) must be followed directly by the schedule")
            schedule, user, rest = _split_line(line, system)
            command, stdin = _split_percent(rest)
            if not command.strip():
                raise _LineError("the command before the first unescaped '%' is empty")
        except _LineError as exc:
            problems.append(CrontabProblem(line_no, raw, f"line {line_no}: {exc}"))
            continue
        warning = _percent_warning(rest)
        if warning:
            warnings.append(CrontabWarning(line_no, raw, f"line {line_no}: {warning}"))
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
    return Crontab(entries=entries, problems=problems, warnings=warnings)


def _env_line(raw: str) -> tuple[str, str] | None:
    """``(name, value)`` when ``raw`` is an environment setting as cronie's env.c reads
    one, else None (the line is then read as an entry).

    ``NAME = VALUE``, blanks allowed around the '='. The name is any text up to a blank or
    '=', or quoted. A quoted value ends at its closing quote and only blanks may follow;
    an unquoted value runs to the end of the line, trailing blanks dropped. An unclosed
    quote, or anything after a closing one, makes it no setting at all.
    """
    i, n = 0, len(raw)

    def blanks(j: int) -> int:
        while j < n and raw[j] in " \t":
            j += 1
        return j

    def word(j: int, stop: str) -> tuple[str, int, bool] | None:
        """A quoted or bare word from j: (text, next index, was quoted)."""
        if j < n and raw[j] in "'\"":
            end = raw.find(raw[j], j + 1)
            if end < 0 or (stop == "=" and "=" in raw[j + 1 : end]):
                return None
            return raw[j + 1 : end], end + 1, True
        k = j
        while k < n and (stop == "" or raw[k] not in " \t="):
            k += 1
        return raw[j:k], k, False

    i = blanks(i)
    got = word(i, "=")
    if got is None or not got[0]:
        return None
    name, i, _ = got
    i = blanks(i)
    if i >= n or raw[i] != "=":
        return None
    i = blanks(i + 1)
    if i < n and raw[i] in "'\"":
        got = word(i, "")
        if got is None:
            return None  # an unclosed quote
        value, i, _ = got
        if blanks(i) != n:
            return None  # something after the closing quote
        return name, value
    return name, raw[i:].rstrip(" \t")


def _split_line(raw: str, system: bool) -> tuple[str, str | None, str]:
    """Return (schedule, user, command text as written) or raise _LineError."""
    tokens = list(_TOKEN_RE.finditer(raw))
    first = tokens[0].group()
    if first.startswith("@"):
        nickname = first.lower()
        if nickname == "@reboot":
            raise _LineError("'@reboot' is not supported (pgsched has no boot event)")
        if nickname not in cron.NICKNAMES:
            raise _LineError(
                f"unknown schedule nickname '{first}' (expected one of {', '.join(cron.NICKNAMES)})"
            )
        schedule, used = nickname, 1
    else:
        if len(tokens) < 5:
            found = " ".join(t.group() for t in tokens)
            raise _LineError(
                f"expected 5 time fields and a command, found {len(tokens)} field(s): '{found}'"
            )
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
    return schedule, user, raw[tokens[used].start() :]


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
    end = _command_end(rest)
    command: list[str] = []
    escaped = False
    for ch in rest if end is None else rest[:end]:
        if escaped:
            if ch == "%":
                command[-1] = "%"
            else:
                command.append(ch)
            escaped = False
        else:
            command.append(ch)
            escaped = ch == "\\"
    return "".join(command), None if end is None else _stdin_text(rest[end + 1 :])


def _command_end(rest: str) -> int | None:
    """The index of the first unescaped '%' of the command text ``rest`` (the one that ends
    the command: see :func:`_split_percent`), or None."""
    escaped = False
    for i, ch in enumerate(rest):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "%":
            return i
    return None


# A strftime conversion as date(1) takes it (GNU flags -, _, 0, ^, #), e.g. %Y, %-d, %F.
_STRFTIME = r"%[-_0^#]?[aAbBcCdDeFgGhHIjklmMnNpPrRsStTuUVwWxXyYzZ]"


def _percent_warning(rest: str) -> str | None:
    """Why the '%' that ends the command text ``rest`` looks meant as a date format, or
    None. crontab(5): an unescaped '%' ends the command and starts its standard input, so
    ``date +%Y-%m-%d`` runs ``date +`` with ``Y-``, ``m-``, ``d`` as input lines: almost
    always a mistake. It looks meant as a date format when it starts a strftime
    conversion and either follows a ``+`` (date's format argument, quoted or not), or
    the command names ``date``, or a second conversion follows (``%H:%M``, ``%Y%m%d``).
    A lone ``%s`` of printf, or input after a '%' (``mail root %hello``), does not warn."""
    end = _command_end(rest)
    if end is None or not re.match(_STRFTIME, rest[end:]):
        return None
    before, after = rest[:end], rest[end:]
    if not (
        before.rstrip("'\"").endswith("+")
        or re.search(r"\bdate\b", before)
        or re.match(_STRFTIME + r"[-_:./ T,]?\\?" + _STRFTIME, after)
    ):
        return None
    start = max(before.rfind(" "), before.rfind("\t")) + 1
    stop = min([i for i in (rest.find(" ", end), rest.find("\t", end)) if i >= 0] or [len(rest)])
    word = rest[start:stop]
    fixed = re.sub(r"(?<!\\)%", r"\\%", word)
    return (
        f"the '%' in {word} ends the command and starts its standard input (crontab(5)); "
        f"if it is meant as a date format, write {fixed}"
    )


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
