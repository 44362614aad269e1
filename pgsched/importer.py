"""Import a crontab file as tasks: each entry becomes a shell task (crontab(5): the
command runs with ``SHELL``, default ``/bin/sh``, ``PATH``, default ``/usr/bin:/bin``,
and the environment lines above it),
each other line is reported with its number and reason. Re-importing the same file
changes nothing: a task's name is the file name plus a hash of what the line means.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .crontab import DEFAULT_ENV, CrontabEntry, parse_crontab
from .db import Database
from .errors import PgschedError
from .stores import tasks
from .taskspec import TaskSpec


@dataclass
class ImportLine:
    """What became of one line: ``action`` is created, unchanged, would_create or problem."""

    line_no: int
    action: str
    task: str | None = None
    schedule: str | None = None
    command: str | None = None
    reason: str | None = None
    user: str | None = None
    stdin: str | None = None
    timezone: str | None = None
    env: dict[str, str] | None = None

    @classmethod
    def for_task(cls, entry: CrontabEntry, spec: TaskSpec, action: str) -> ImportLine:
        return cls(
            entry.line_no,
            action,
            spec.name,
            spec.schedule,
            spec.command,
            user=entry.user,
            stdin=entry.stdin,
            timezone=spec.timezone,
            env=spec.env,
        )


@dataclass
class ImportReport:
    """What an import did. ``written``: whether the tasks were created (False for a dry
    run, and when lines were refused and problems were not allowed: nothing is written).
    ``warnings``: (line number, message) of entries imported as written that are probably
    not what was meant (a '%' that looks meant as a date format)."""

    lines: list[ImportLine] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # with replace: tasks of lines now gone
    warnings: list[tuple[int, str]] = field(default_factory=list)
    written: bool = False

    def count(self, action: str) -> int:
        return sum(1 for line in self.lines if line.action == action)


def task_name(source: str, entry: CrontabEntry, tz: str = "UTC") -> str:
    """A stable name for ``entry``: the file's name and 8 hex digits of its meaning
    (schedule, user, command, stdin, environment, and zone: its CRON_TZ, else ``tz``)."""
    zone = entry.timezone or (None if tz == "UTC" else tz)  # None: UTC, as names always had
    meaning = json.dumps(
        [entry.schedule, entry.user, entry.command, entry.stdin, entry.env, zone], sort_keys=True
    )
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(source).name).strip("-.") or "crontab"
    return f"{stem[:150]}-{hashlib.sha256(meaning.encode()).hexdigest()[:8]}"


def local_zone() -> str:
    """This machine's IANA time zone, the one cron(8) here reads entries without CRON_TZ
    in: ``TZ`` if it names a zone, else the target of /etc/localtime, else
    /etc/timezone, else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.path.realpath("/etc/localtime")
        if "/zoneinfo/" in target:
            candidates.append(target.split("/zoneinfo/", 1)[1])
    except OSError:
        pass
    try:
        candidates.append(Path("/etc/timezone").read_text().strip())
    except OSError:
        pass
    for name in candidates:
        if name and ("/" in name or name == "UTC"):
            try:
                zoneinfo.ZoneInfo(name)
                return "UTC" if name in ("Etc/UTC", "Etc/Universal", "Universal", "Zulu") else name
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                continue
    return "UTC"


def spec_for(source: str, entry: CrontabEntry, tenant: str, tz: str = "UTC") -> TaskSpec:
    """The task a crontab entry becomes: cron's default SHELL and PATH, overridden by the
    file's environment lines; read in its CRON_TZ, else in ``tz``."""
    return TaskSpec(
        name=task_name(source, entry, tz),
        handler_kind="shell",
        command=entry.command,
        schedule_kind="cron",
        schedule=entry.schedule,
        timezone=entry.timezone or tz,
        env={**DEFAULT_ENV, **entry.env},
        stdin=entry.stdin,
        run_as_user=entry.user,
        tenant=tenant,
        description=entry.command[:200],
        source=f"{Path(source).name}:{entry.line_no}",
    )


def _is_user(word: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(word)
    except (KeyError, UnicodeEncodeError, ValueError):
        return False
    return True


def import_crontab(
    db: Database | None,
    path: str | Path,
    *,
    system: bool = False,
    tenant: str = "default",
    dry_run: bool = False,
    text: str | None = None,
    tz: str | None = None,
    replace: bool = False,
    allow_problems: bool = False,
) -> ImportReport:
    """Import the crontab at ``path`` (or ``text``, named by ``path``). With ``dry_run`` (or
    no ``db``) nothing is written. All tasks of one file are created in one transaction.
    A line that cannot become a task is a problem; when there is one, nothing is written
    unless ``allow_problems`` (as crontab(1) installs no table with errors in it), and
    the report says what would have been (``would_create``, ``written`` False).

    Entries without ``CRON_TZ`` are read in ``tz`` (default: this machine's zone, as cron
    here would). Tasks imported earlier from a file of the same name that no longer match
    a line are listed in a note; with ``replace`` they are deleted (as ``crontab FILE``
    replaces a whole table), in the same transaction.

    Raises ValidationError if an entry cannot become a task (e.g. an unknown CRON_TZ), so a
    file is imported whole or not at all.
    """
    zone_given = tz is not None
    tz = tz or local_zone()
    source = str(path)
    if text is None:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise PgschedError(f"file: cannot read {source!r}: {exc.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PgschedError(
                f"file: {source!r} is not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})"
            ) from None
    parsed = parse_crontab(text, system=system)
    report = ImportReport()
    specs = []
    for entry in parsed.entries:
        spec = spec_for(source, entry, tenant, tz)
        try:
            spec.validate()
        except PgschedError as exc:
            report.lines.append(
                ImportLine(entry.line_no, "problem", reason=f"line {entry.line_no}: {exc}")
            )
            continue
        specs.append((entry, spec))
    for problem in parsed.problems:
        report.lines.append(ImportLine(problem.line_no, "problem", reason=problem.reason))
    report.warnings = [(w.line_no, w.message) for w in parsed.warnings]
    if report.count("problem") and not allow_problems:
        dry_run = True
    if (
        not system
        and parsed.entries
        and all(_is_user(e.command.split(None, 1)[0]) for e in parsed.entries if e.command.split())
    ):
        report.notes.append(
            "every command starts with a user name (e.g. "
            f"{parsed.entries[0].command.split()[0]!r}): if this is a system crontab "
            "(/etc/crontab, /etc/cron.d/*), import it with --system"
        )
    mailto = {e.mailto for e in parsed.entries if e.mailto}
    if mailto:
        report.notes.append(
            f"MAILTO={', '.join(sorted(mailto))} is kept in the tasks' environment but "
            "pgsched sends no mail: output is stored in the execution log instead"
        )
    if any(e.timezone is None for e in parsed.entries):
        report.notes.append(
            f"entries without CRON_TZ are read in {tz}"
            + (
                ""
                if zone_given
                else " (this machine's zone, as cron here would); --tz to choose another"
            )
        )
    prefix = re.sub(r"([\\%_])", r"\\\1", Path(source).name) + ":%"
    if db is None or dry_run:
        for entry, spec in specs:
            exists = (
                db is not None and db.one("task_get", name=spec.name, tenant=tenant) is not None
            )
            report.lines.append(
                ImportLine.for_task(entry, spec, "unchanged" if exists else "would_create")
            )
        stale = (
            [
                r["name"]
                for r in db.many("task_by_source", tenant=tenant, prefix=prefix)
                if r["name"] not in {spec.name for _, spec in specs}
            ]
            if db is not None
            else []
        )
        if stale:
            report.notes.append(
                f"{len(stale)} task(s) from an earlier import of {Path(source).name} match no line "
                f"now: {', '.join(stale)}; "
                + (
                    "--replace would delete them"
                    if replace
                    else "they would stay (--replace deletes them)"
                )
            )
    else:
        report.written = True
        with db.transaction() as tx:
            for entry, spec in specs:
                row = tasks.create(tx, spec, if_absent=True)
                report.lines.append(
                    ImportLine.for_task(entry, spec, "created" if row else "unchanged")
                )
            wanted = {spec.name for _, spec in specs}
            stale = [
                r
                for r in tx.many("task_by_source", tenant=tenant, prefix=prefix)
                if r["name"] not in wanted
            ]
            if stale and replace:
                for r in stale:
                    tx.one("task_soft_delete", name=r["name"], tenant=tenant)
                    tx.exec("task_drop_pending", id=r["id"])
                report.deleted = [r["name"] for r in stale]
            elif stale:
                report.notes.append(
                    f"{len(stale)} task(s) from an earlier import of {Path(source).name} match "
                    f"no line now and still run: {', '.join(r['name'] for r in stale)} "
                    "(import with --replace to delete them)"
                )
    report.lines.sort(key=lambda line: line.line_no)
    return report


def as_json(report: ImportReport) -> dict[str, Any]:
    return {
        "lines": [line.__dict__ for line in report.lines],
        "notes": report.notes,
        "deleted": report.deleted,
        "warnings": [{"line_no": n, "message": m} for n, m in report.warnings],
        "problems": report.count("problem"),
        "written": report.written,
    }
