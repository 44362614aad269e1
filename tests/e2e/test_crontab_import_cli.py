"""``pgsched import-crontab`` run for real on the real crontabs: a file with a refused
line imports nothing and exits 1, naming how many lines and each with its number and
reason; ``--allow-problems`` imports the rest and exits 0; a '%' that looks meant as a
date format is warned about with its line number and the ``\\%`` to write."""

from __future__ import annotations

import json

import pytest

from pgsched.crontab import parse_crontab

from ..conftest import crontab_file, crontab_files
from ..helpers import cli

pytestmark = pytest.mark.e2e


def task_count(sql) -> int:
    return sql.execute(
        "SELECT count(*) AS n FROM pgsched.task WHERE deleted_at IS NULL"
    ).fetchone()["n"]


def test_refused_lines_import_nothing_and_exit_1_unless_problems_are_allowed(dsn, sql, tmp_path):
    # Debian's /etc/crontab (4 entries) with two lines a user might add by mistake
    path = tmp_path / "crontab"
    path.write_text(
        crontab_file("debian-crontab").read_text()
        + "0 0 31 2 *\troot\techo never\n61 * * * *\troot\techo bad minute\n"
    )
    lines = path.read_text().split("\n")
    never, bad = lines.index("0 0 31 2 *\troot\techo never") + 1, len(lines) - 1
    refused = cli(dsn, "import-crontab", "--system", str(path), check=False)
    assert refused.returncode == 1, refused
    out = refused.stdout.splitlines()
    assert (
        f"skipped line {never}: day-of-month 31 never occurs in month 2 "
        "(February has at most 29 days)" in out
    )
    assert f"skipped line {bad}: minute 61 is out of range 0-59" in out
    assert out[-1] == "0 created, 0 unchanged, 4 would be created, 2 problem(s)"
    assert refused.stderr == (
        f"Error: import-crontab: 2 line(s) of {path} refused (listed above); nothing was "
        "imported: fix them, or give --allow-problems to import the other 4 entries\n"
    )
    assert task_count(sql) == 0

    as_json = cli(dsn, "import-crontab", "--system", str(path), "--json", check=False)
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert (report["problems"], report["written"]) == (2, False) and task_count(sql) == 0
    assert [line["line_no"] for line in report["lines"] if line["action"] == "problem"] == [
        never,
        bad,
    ]

    dry = cli(dsn, "import-crontab", "--system", "--dry-run", str(path), check=False)
    assert (
        dry.returncode == 1
        and "nothing was imported" not in dry.stderr
        and "2 line(s)" in dry.stderr
    )

    allowed = cli(dsn, "import-crontab", "--system", "--allow-problems", str(path))
    assert (
        allowed.stderr == ""
        and allowed.stdout.splitlines()[-1]
        == "4 created, 0 unchanged, 0 would be created, 2 problem(s)"
    )
    assert f"skipped line {bad}: minute 61 is out of range 0-59" in allowed.stdout
    assert task_count(sql) == 4
    again = json.loads(
        cli(dsn, "import-crontab", "--system", "--allow-problems", "--json", str(path)).stdout
    )
    assert (again["problems"], again["written"]) == (2, True) and task_count(sql) == 4


def test_every_real_crontab_imports_with_exit_0_and_no_warning(dsn, sql):
    files = crontab_files()
    assert len(files) >= 9
    entries = 0
    for path in files:
        proc = cli(dsn, "import-crontab", "--system", str(path), "--json")
        report = json.loads(proc.stdout)
        assert (report["problems"], report["warnings"], report["written"]) == (0, [], True), (
            path.name
        )
        entries += len(parse_crontab(path.read_text(), system=True).entries)
    assert task_count(sql) == entries >= 17


def test_a_percent_meant_as_a_date_format_warns_with_its_line_and_the_fix(dsn, sql, tmp_path):
    """mdadm's crontab escapes its '%' (date +\\%d); without the backslash cron would run
    'date +' and feed 'd) -le 7 ]...' to it: the import warns, and still imports the line
    as cron would read it."""
    path = tmp_path / "mdadm"
    path.write_text(crontab_file("mdadm.cron.d").read_text().replace(r"+\%d", "+%d"))
    proc = cli(dsn, "import-crontab", "--system", str(path))
    assert (
        "warning: line 12: the '%' in +%d) ends the command and starts its standard input "
        r"(crontab(5)); if it is meant as a date format, write +\%d)"
    ) in proc.stdout.splitlines()
    stdin, command = sql.execute("SELECT stdin, command FROM pgsched.task").fetchone().values()
    assert command.endswith("$(date +") and stdin.startswith("d) -le 7 ]")
    shipped = cli(dsn, "import-crontab", "--system", str(crontab_file("mdadm.cron.d")))
    assert "warning" not in shipped.stdout
