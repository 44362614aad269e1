"""A '%' that looks meant as a date format is warned about (crontab(5): an unescaped '%'
ends the command and starts its standard input, so ``date +%Y`` runs ``date +``). The
line still imports as cron reads it; ``\\%`` and input after a '%' are not warned about.
Checked against the real crontabs too: none warns as shipped, and mdadm's (the one that
writes ``date +\\%d``) warns once its backslash is dropped."""

from __future__ import annotations

import pytest

from pgsched.crontab import CrontabWarning, parse_crontab

from ..conftest import crontab_file, crontab_files
from .test_crontab import is_system

ENDS = (
    "ends the command and starts its standard input (crontab(5)); "
    "if it is meant as a date format, write"
)


@pytest.mark.parametrize(
    ("line", "word", "fixed"),
    [
        (
            r"0 1 * * * tar czf /b/$(date +%Y-%m-%d).tgz /etc",
            "+%Y-%m-%d).tgz",
            r"+\%Y-\%m-\%d).tgz",
        ),
        (r"0 1 * * * date +%s > /tmp/stamp", "+%s", r"+\%s"),
        (r'0 1 * * * date "+%F %T" >> /var/log/x', '"+%F', r'"+\%F'),
        (r"0 1 * * * date '+%-d.%-m.' > /tmp/day", "'+%-d.%-m.'", r"'+\%-d.\%-m.'"),
        (r"0 1 * * * date +'%H:%M'", "+'%H:%M'", r"+'\%H:\%M'"),
        (
            r"0 1 * * * cp db.sql db-$(date -d yesterday +%Y%m%d).sql",
            "+%Y%m%d).sql",
            r"+\%Y\%m\%d).sql",
        ),
        (
            r"0 1 * * * echo run at %H:%M >> /tmp/log",
            "%H:%M",
            r"\%H:\%M",
        ),  # two conversions in a row
        (
            r"0 1 * * * mv log log.$(date +\%Y-%m)",
            r"+\%Y-%m)",
            r"+\%Y-\%m)",
        ),  # one escaped, one not
        (r"0 1 * * * logger $(date --iso-8601) %d", "%d", r"\%d"),  # the command runs date
    ],
)
def test_a_percent_meant_as_a_date_format_is_warned_with_the_line_and_the_fix(line, word, fixed):
    parsed = parse_crontab(f"# a comment\nPATH=/bin\n{line}\n")
    assert len(parsed.entries) == 1 and parsed.problems == []  # imported as cron reads it
    assert parsed.warnings == [CrontabWarning(3, line, f"line 3: the '%' in {word} {ENDS} {fixed}")]


@pytest.mark.parametrize(
    "line",
    [
        r"0 1 * * * tar czf /b/$(date +\%Y-\%m-\%d).tgz /etc",  # escaped, as crontab(5) says
        # stdin meant: no date around
        r"0 1 * * * mail -s report root %Hello,%the report is ready%",
        r"0 1 * * * cat > /tmp/out %first line%second line",
        r"0 1 * * * printf '%s\n' hello",  # printf's %s alone: no date format in sight
        r"0 1 * * * cp a /b/a.50%",
        r"0 1 * * * echo 100%",
        r"0 1 * * * date",
        r"0 1 * * * date +\%s",
        # an escaped backslash, then a '%' followed by d: only one conversion
        r"0 1 * * * echo \\%d",
    ],
)
def test_no_warning_for_an_escaped_percent_or_standard_input(line):
    parsed = parse_crontab(line)
    assert len(parsed.entries) == 1 and parsed.warnings == []


def test_no_shipped_crontab_warns_and_mdadm_warns_once_its_backslash_is_dropped():
    files = crontab_files()
    assert len(files) >= 9
    for path in files:
        assert parse_crontab(path.read_text(), system=is_system(path)).warnings == [], path.name
    path = crontab_file("mdadm.cron.d")
    text = path.read_text()
    assert text.count(r"+\%d") == 1
    parsed = parse_crontab(text.replace(r"+\%d", "+%d"), system=True)
    [warning] = parsed.warnings
    assert warning.line_no == 12 and warning.message == f"line 12: the '%' in +%d) {ENDS} +\\%d)"
