"""Every crontab that Debian packages ship (../shared/data/crontabs) imports with no line
lost or misread. The expectations are computed independently of pgsched's parser: a
plain reading of crontab(5) here in the test for commands, stdin and environment, and
cronsim (an independent cron implementation) for the next five fire times."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from pgsched import importer
from pgsched.schedule import Schedule

from ..conftest import crontab_files

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

CRONTABS = crontab_files()
FROM = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
ENV_LINE = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*(.*?)\s*$")


def reference_entries(text: str) -> list[dict]:
    """crontab(5), read the plain way: blank and '#' lines skipped; NAME=value lines (one
    pair of surrounding quotes stripped) apply below; otherwise 5 time fields, the user,
    and the command, whose first unescaped % starts stdin ('%' -> newline, '\\%' -> '%')."""
    env: dict[str, str] = {"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}  # crontab(5)'s defaults
    entries = []
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        match = ENV_LINE.fullmatch(raw)
        if match:
            value = match.group(2)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[match.group(1)] = value
            continue
        head = re.match(r"\s*(?:\S+\s+){6}", raw)  # 5 time fields and the user
        assert head, raw
        fields = head.group().split()
        schedule, user, rest = " ".join(fields[:5]), fields[5], raw[head.end() :]
        pieces = re.split(r"(?<!\\)%", rest)
        unescape = lambda s: s.replace("\\%", "%")  # noqa: E731
        entries.append(
            {
                "schedule": schedule,
                "user": user,
                "command": unescape(pieces[0]),
                "stdin": "\n".join(unescape(p) for p in pieces[1:]) if len(pieces) > 1 else None,
                "env": dict(env),
            }
        )
    return entries


@pytest.mark.parametrize("path", CRONTABS, ids=[p.name for p in CRONTABS])
def test_every_shipped_crontab_imports_exactly(db, sql, path):
    assert CRONTABS, "the crontabs are missing"
    text = path.read_text()
    expected = reference_entries(text)
    report = importer.import_crontab(db, path, system=True)
    assert [line.action for line in report.lines] == ["created"] * len(expected), report.lines
    stored = sql.execute(
        "SELECT * FROM pgsched.task ORDER BY split_part(source, ':', 2)::int"
    ).fetchall()
    assert len(stored) == len(expected)
    for row, want in zip(stored, expected, strict=True):
        assert (
            row["schedule_expr"],
            row["run_as_user"],
            row["command"],
            row["stdin"],
            row["env"],
        ) == (want["schedule"], want["user"], want["command"], want["stdin"], want["env"])
        ours = Schedule(row["schedule_kind"], row["schedule_expr"], row["timezone"]).upcoming(
            FROM, 5
        )
        oracle = CronSim(want["schedule"], FROM.astimezone(ZoneInfo(row["timezone"])))
        assert ours == [next(oracle).astimezone(UTC) for _ in range(5)], row["schedule_expr"]
    # Re-importing changes nothing.
    again = importer.import_crontab(db, path, system=True)
    assert {line.action for line in again.lines} == {"unchanged"}
