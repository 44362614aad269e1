"""Unit tests for pgsched.crontab (pure crontab(5) parsing, no database)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pgsched.crontab import Crontab, CrontabEntry, CrontabProblem, parse_crontab

from ..conftest import crontab_file, crontab_files

DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin"
ENV_LINE = re.compile(r"[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t]*=")


def is_system(path: Path) -> bool:
    return path.name.endswith(".cron.d") or path.name == "debian-crontab"


def parse_file(name: str) -> Crontab:
    path = crontab_file(name)
    return parse_crontab(path.read_text(encoding="utf-8"), system=is_system(path))


def one_entry(text: str, *, system: bool = False) -> CrontabEntry:
    result = parse_crontab(text, system=system)
    assert result.problems == []
    assert len(result.entries) == 1
    return result.entries[0]


def one_problem(text: str, *, system: bool = False) -> CrontabProblem:
    result = parse_crontab(text, system=system)
    assert result.entries == []
    assert len(result.problems) == 1
    return result.problems[0]


# --- the shared real-world crontabs ------------------------------------------------


def test_no_line_is_lost_in_any_shared_crontab():
    # Must FAIL (not skip) when the crontabs are missing.
    files = crontab_files()
    assert files, "no crontab fixtures (tests/data/crontabs)"
    for path in files:
        text = path.read_text(encoding="utf-8")
        result = parse_crontab(text, system=is_system(path))
        entry_lines = [e.line_no for e in result.entries]
        problem_lines = [p.line_no for p in result.problems]
        assert not set(entry_lines) & set(problem_lines), path.name
        assert len(set(entry_lines)) == len(entry_lines), path.name
        for line_no, line in enumerate(text.split("\n"), start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                assert line_no not in entry_lines + problem_lines, (path.name, line_no)
                continue
            counted = (
                (line_no in entry_lines) + (line_no in problem_lines) + bool(ENV_LINE.match(line))
            )
            assert counted == 1, f"{path.name}:{line_no} {line!r} counted {counted} times"
        for entry in result.entries:
            assert entry.raw == text.split("\n")[entry.line_no - 1]
        # These are packaged, working crontabs: all of them must import cleanly.
        assert result.problems == [], path.name
        assert result.entries, path.name


def test_expected_entry_counts_of_shared_crontabs():
    expected = {
        "anacron.cron.d": 1,
        "certbot.cron.d": 1,
        "debian-crontab": 4,
        "mailman3.cron.d": 2,
        "mdadm.cron.d": 1,
        "munin.cron.d": 4,
        "php-common.cron.d": 1,
        "sa-exim.cron.d": 1,
        "sysstat.cron.d": 2,
    }
    assert {name: len(parse_file(name).entries) for name in expected} == expected


def test_debian_crontab():
    result = parse_file("debian-crontab")
    assert result.problems == []
    env = {"SHELL": "/bin/sh", "PATH": DEBIAN_PATH}
    expected = [
        (18, "17 * * * *", "cd / && run-parts --report /etc/cron.hourly"),
        (
            19,
            "25 6 * * *",
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }",
        ),
        (
            20,
            "47 6 * * 7",
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }",
        ),
        (
            21,
            "52 6 1 * *",
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }",
        ),
    ]
    assert [(e.line_no, e.schedule, e.command) for e in result.entries] == expected
    for entry in result.entries:
        assert entry.user == "root"
        assert entry.stdin is None
        assert entry.env == env
        assert list(entry.env) == ["SHELL", "PATH"]
        assert entry.timezone is None and entry.mailto is None
    assert result.entries[0].raw == "17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly"


def test_sysstat_cron_d():
    result = parse_file("sysstat.cron.d")
    assert result.problems == []
    env = {"PATH": "/usr/lib/sysstat:/usr/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}
    assert [(e.line_no, e.schedule, e.user, e.command, e.env) for e in result.entries] == [
        (6, "5-55/10 * * * *", "root", "command -v debian-sa1 > /dev/null && debian-sa1 1 1", env),
        (9, "59 23 * * *", "root", "command -v debian-sa1 > /dev/null && debian-sa1 60 2", env),
    ]


def test_mdadm_cron_d_escaped_percent():
    (entry,) = parse_file("mdadm.cron.d").entries
    assert entry.line_no == 12
    assert entry.schedule == "57 0 * * 0"
    assert entry.user == "root"
    assert entry.command == (
        "if [ -x /usr/share/mdadm/checkarray ] && [ $(date +%d) -le 7 ]; "
        "then /usr/share/mdadm/checkarray --cron --all --idle --quiet; fi"
    )
    assert entry.stdin is None
    assert entry.env == {}
    assert "+\\%d" in entry.raw


def test_munin_cron_d_mailto_and_long_commands():
    result = parse_file("munin.cron.d")
    assert result.problems == []
    html = (
        r"htmldir=$({ cat /etc/munin/munin.conf /etc/munin/munin-conf.d/* 2>/dev/null || true; }"
        r" | sed -nE 's/^\s*htmldir\s+(\S.*)$/\1/p' | tail -1); htmldir=${htmldir:-/var/cache/munin/www};"
        r' if [ -d "$htmldir" ]; then find "$htmldir/" -type f -name "*.html" -mtime +30 -delete;'
        r' find "$htmldir/" -mindepth 1 -type d -empty -delete; fi'
    )
    cgi = (
        r"cgitmpdir=$({ cat /etc/munin/munin.conf /etc/munin/munin-conf.d/* 2>/dev/null || true; }"
        r" | sed -nE 's/^\s*cgitmpdir\s+(\S.*)$/\1/p' | tail -1); cgitmpdir=${cgitmpdir:-/var/lib/munin/cgi-tmp};"
        r' if [ -d "$cgitmpdir" ]; then find "$cgitmpdir/" -type f -mtime +1 -delete;'
        r' find "$cgitmpdir/" -mindepth 1 -type d -empty -delete; fi'
    )
    limits = (
        "if [ -x /usr/share/munin/munin-limits ]; then /usr/share/munin/munin-limits"
        " --force --contact nagios --contact old-nagios; fi"
    )
    assert [(e.line_no, e.schedule, e.user, e.command) for e in result.entries] == [
        (7, "*/5 * * * *", "munin", "if [ -x /usr/bin/munin-cron ]; then /usr/bin/munin-cron; fi"),
        (8, "14 10 * * *", "munin", limits),
        (11, "27 03 * * *", "munin", html),
        (12, "32 03 * * *", "www-data", cgi),
    ]
    for entry in result.entries:
        assert entry.mailto == "root"
        assert entry.env == {"MAILTO": "root"}
        assert entry.stdin is None


def test_certbot_backslash_not_before_percent_is_kept():
    (entry,) = parse_file("certbot.cron.d").entries
    assert entry.schedule == "0 */12 * * *"
    assert entry.command.startswith("test -x /usr/bin/certbot -a \\! -d /run/systemd/system && ")


# --- environment lines -------------------------------------------------------------


def test_env_values_quoting_and_spacing():
    text = "\n".join(
        [
            'A="hello world"',
            "B = 'x  y'",
            "C =  spaced value  ",
            'D=""',
            "PATH=/usr/bin:/bin",
            "* * * * * env",
        ]
    )
    entry = one_entry(text)
    assert entry.env == {
        "A": "hello world",
        "B": "x  y",
        "C": "spaced value",
        "D": "",
        "PATH": "/usr/bin:/bin",
    }
    assert entry.line_no == 6


def test_env_applies_only_below_and_later_overrides_earlier():
    text = "* * * * * first\nX=1\nY=2\n* * * * * second\nX=3\n* * * * * third\n"
    first, second, third = parse_crontab(text).entries
    assert first.env == {}
    assert second.env == {"X": "1", "Y": "2"}
    assert third.env == {"X": "3", "Y": "2"}
    assert list(third.env) == ["X", "Y"]
    assert second.env is not third.env


def test_cron_tz_and_mailto():
    text = 'CRON_TZ=Europe/Paris\nMAILTO=ops@example.com\n0 3 * * * backup\nCRON_TZ=UTC\nMAILTO=""\n0 4 * * * other\n'
    first, second = parse_crontab(text).entries
    assert (first.timezone, first.mailto) == ("Europe/Paris", "ops@example.com")
    assert first.env == {"CRON_TZ": "Europe/Paris", "MAILTO": "ops@example.com"}
    assert (second.timezone, second.mailto) == ("UTC", "")
    assert second.env["CRON_TZ"] == "UTC"


# --- commands, %, whitespace -------------------------------------------------------


def test_percent_starts_stdin_and_further_percents_are_newlines():
    entry = one_entry("0 9 * * 1 mail -s hi root%line1%line2\n")
    assert entry.command == "mail -s hi root"
    assert entry.stdin == "line1\nline2"  # no trailing newline added (documented)


def test_escaped_percent_in_command_and_stdin():
    entry = one_entry("0 0 * * * date +\\%d > /tmp/x%50\\% done%%\n")
    assert entry.command == "date +%d > /tmp/x"
    assert entry.stdin == "50% done\n\n"


def test_trailing_percent_gives_empty_stdin_and_no_percent_gives_none():
    assert one_entry("* * * * * cat%").stdin == ""
    assert one_entry("* * * * * cat").stdin is None


def test_backslashes_before_percent_pair_up_like_cronie():
    # cronie do_command.c: a backslash escapes the next character; only an escaped '%'
    # loses its backslash. An even run of backslashes leaves the '%' unescaped.
    entry = one_entry("* * * * * echo a\\\\%b")  # echo a\\%b
    assert (entry.command, entry.stdin) == ("echo a\\\\", "b")
    entry = one_entry("* * * * * echo a\\\\\\%b")  # echo a\\\%b: odd, so escaped
    assert (entry.command, entry.stdin) == ("echo a\\\\%b", None)
    entry = one_entry("* * * * * cat%x\\\\y%z\\%w")  # stdin x\\y%z\%w
    assert (entry.command, entry.stdin) == ("cat", "x\\\\y\nz%w")


def test_empty_command_before_percent_is_a_problem():
    problem = one_problem("* * * * * %only stdin")
    assert problem.reason == "line 1: the command before the first unescaped '%' is empty"


def test_command_whitespace_preserved_and_crlf_stripped():
    text = "0 1 * * *\t  echo  a\t\tb  \r\n  5 2 * * * x\r\n"
    first, second = parse_crontab(text).entries
    assert first.command == "echo  a\t\tb  "
    assert first.raw == "0 1 * * *\t  echo  a\t\tb  "
    assert (second.schedule, second.command, second.line_no) == ("5 2 * * *", "x", 2)


def test_user_crontab_sixth_token_is_part_of_command():
    entry = one_entry("0 5 * * * root echo hi")
    assert entry.user is None
    assert entry.command == "root echo hi"


def test_system_crontab_user_column():
    entry = one_entry("0 5 * * *  nobody   echo  hi", system=True)
    assert (entry.user, entry.command) == ("nobody", "echo  hi")


# --- nicknames ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "schedule"),
    [
        ("@daily", "@daily"),
        ("@DAILY", "@daily"),
        ("@midnight", "@midnight"),
        ("@Annually", "@annually"),
        ("@yearly", "@yearly"),
        ("@monthly", "@monthly"),
        ("@weekly", "@weekly"),
        ("@hourly", "@hourly"),
    ],
)
def test_nicknames(written, schedule):
    entry = one_entry(f"{written} run-it --now")
    assert (entry.schedule, entry.command) == (schedule, "run-it --now")


def test_nickname_with_user_in_system_crontab():
    entry = one_entry("@weekly root cleanup", system=True)
    assert (entry.schedule, entry.user, entry.command) == ("@weekly", "root", "cleanup")


def test_reboot_is_unsupported():
    problem = one_problem("@reboot /usr/bin/start-thing")
    assert problem.reason == "line 1: '@reboot' is not supported (pgsched has no boot event)"
    assert problem.raw == "@reboot /usr/bin/start-thing"


def test_unknown_nickname():
    assert one_problem("@fortnightly x").reason.startswith(
        "line 1: unknown schedule nickname '@fortnightly'"
    )


# --- time field validation ---------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("61 * * * * x", "minute 61 is out of range 0-59"),
        ("1,61 * * * * x", "minute 61 is out of range 0-59 (in 1,61)"),
        ("* 24 * * * x", "hour 24 is out of range 0-23"),
        ("* * 0 * * x", "day-of-month 0 is out of range 1-31"),
        ("* * * 13 * x", "month 13 is out of range 1-12"),
        ("* * * * 8 x", "day-of-week 8 is out of range 0-7"),
        ("5-1 * * * * x", "minute 5-1 is a reversed range (5 > 1)"),
        ("* * * * fri-sun x", "day-of-week fri-sun is a reversed range (5 > 0)"),
        ("*/0 * * * * x", "minute */0 has step 0 (the step must be at least 1)"),
        ("1-10/0 * * * * x", "minute 1-10/0 has step 0 (the step must be at least 1)"),
        (
            "5/10 * * * * x",
            "minute 5/10 puts a step on a single value (a step needs '*' or a range)",
        ),
        (
            "* * * jan/2 * x",
            "month jan/2 puts a step on a single value (a step needs '*' or a range)",
        ),
        ("*/x * * * * x", "minute */x has step 'x', which is not a number"),
        ("*/jan * * * * x", "minute */jan has step 'jan', which is not a number"),
        ("jan * * * * x", "minute jan is not a number"),
        ("* * * foo * x", "month foo is not a number or a name (jan..dec)"),
        ("* * * * monday x", "day-of-week monday is not a number or a name (sun..sat)"),
        ("1,,2 * * * * x", "minute 1,,2 has an empty list element (two commas, or one at an end)"),
        ("1- * * * * x", "minute 1- has a range with a missing end"),
        ("? * * * * x", "minute ? is not a number"),
    ],
)
def test_bad_time_fields(line, reason):
    problem = one_problem(f"# header\n{line}\n")
    assert problem.line_no == 2
    assert problem.reason == f"line 2: {reason}"
    assert problem.raw == line


@pytest.mark.parametrize(
    ("line", "schedule"),
    [
        ("0,15,30,45 0-23/2 1-31 * * x", "0,15,30,45 0-23/2 1-31 * *"),
        ("* * * jan-mar,DEC mon-fri x", "* * * jan-mar,DEC mon-fri"),
        ("0 0 * * 7 x", "0 0 * * 7"),
        ("0 0 * * sun-7 x", "0 0 * * sun-7"),
        ("*/7 * * Feb Sat x", "*/7 * * Feb Sat"),
        ("0 0 1-31/40 * * x", "0 0 1-31/40 * *"),
        ("59 23 31 12 0 x", "59 23 31 12 0"),
    ],
)
def test_good_time_fields(line, schedule):
    assert one_entry(line).schedule == schedule


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("0 0 30 2 * x", "day-of-month 30 never occurs in month 2 (February has at most 29 days)"),
        (
            "0 0 31 4,6,9,11 * x",
            (
                "day-of-month 31 never occurs in months 4,6,9,11 (April, June, "
                "September and November have 30 days)"
            ),
        ),
        (
            "0 0 31 feb-apr/2 * x",
            (
                "day-of-month 31 never occurs in months feb-apr/2 (February has at "
                "most 29 days; April has 30 days)"
            ),
        ),
    ],
)
def test_a_date_that_never_comes_is_a_problem(line, reason):
    assert one_problem(line).reason == f"line 1: {reason}"


# --- structural problems -----------------------------------------------------------


def test_wrong_field_count():
    problem = one_problem("\n\nhello world\n")
    assert problem.line_no == 3
    assert (
        problem.reason
        == "line 3: expected 5 time fields and a command, found 2 field(s): 'hello world'"
    )


def test_missing_command_user_crontab():
    assert one_problem("0 5 * * *").reason == "line 1: missing the command after '0 5 * * *'"
    assert one_problem("@daily   ").reason == "line 1: missing the command after '@daily'"


def test_missing_user_system_crontab():
    problem = one_problem("0 5 * * *\t", system=True)
    assert problem.reason == "line 1: missing the user column and the command after '0 5 * * *'"


def test_missing_command_after_user_system_crontab():
    problem = one_problem("0 5 * * * root", system=True)
    assert problem.reason == "line 1: missing the command after user 'root'"


def test_star_after_time_fields_is_a_typo_like_cronie():
    assert (
        one_problem("* * * * * * cmd").reason
        == "line 1: command '*' starts with '*' (a sixth time field?)"
    )
    assert one_problem("* * * * * * root cmd", system=True).reason == (
        "line 1: user '*' starts with '*' (a sixth time field?)"
    )


def test_mixed_file_keeps_every_line():
    text = "\n".join(
        [
            "# comment",  # 1
            "   ",  # 2
            "SHELL=/bin/bash",  # 3
            "61 * * * * bad",  # 4
            "@reboot x",  # 5
            "  # indented comment",  # 6
            "*/5 * * * * good",  # 7
            "not a cron line",  # 8
        ]
    )
    result = parse_crontab(text)
    assert [e.line_no for e in result.entries] == [7]
    assert [p.line_no for p in result.problems] == [4, 5, 8]
    assert result.entries[0].env == {"SHELL": "/bin/bash"}
    assert all(p.reason.startswith(f"line {p.line_no}: ") for p in result.problems)


def test_empty_text():
    assert parse_crontab("") == Crontab(entries=[], problems=[])


def test_results_are_frozen():
    entry = one_entry("* * * * * x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.command = "y"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        one_problem("@reboot x").reason = "z"  # type: ignore[misc]


def test_the_dont_log_prefix_is_accepted_and_ignored():
    # cronie: "-" before the first field only turns off syslog for that job.
    entry = one_entry("-*/5 * * * * echo quiet")
    assert (entry.schedule, entry.command) == ("*/5 * * * *", "echo quiet")
    assert one_entry("-5 * * * * x").schedule == "5 * * * *"
    assert "minute -5" in one_problem("--5 * * * * x").reason


@pytest.mark.parametrize(
    ("line", "setting"),
    [
        ("FOO=bar", ("FOO", "bar")),
        ("  FOO = bar baz  ", ("FOO", "bar baz")),
        ('FOO="a b"', ("FOO", "a b")),
        ("X='y'  ", ("X", "y")),
        ("FOO-BAR=1", ("FOO-BAR", "1")),  # cronie's env.c takes any name up to a blank or '='
        ('"QUOTED NAME"=v', ("QUOTED NAME", "v")),
        ("EMPTY=", ("EMPTY", "")),
        ('MAILTO=""', ("MAILTO", "")),
    ],
)
def test_environment_lines_as_cronie_reads_them(line, setting):
    parsed = parse_crontab(f"{line}\n* * * * * true\n")
    assert parsed.problems == [] and list(parsed.entries[0].env.items()) == [setting]


@pytest.mark.parametrize("line", ['HALF="unterminated', 'TRAIL="x" junk', "SINGLE='it''s'"])
def test_malformed_quotes_make_no_environment_line(line):
    # cronie: an unclosed quote, or text after the closing one, is no setting; the line is
    # then read as an entry, and it is not one either
    parsed = parse_crontab(f"{line}\n")
    assert parsed.entries == [] and len(parsed.problems) == 1


def test_dont_log_dash_must_touch_the_schedule():
    assert parse_crontab("-0 9 * * * true\n").entries[0].schedule == "0 9 * * *"
    [problem] = parse_crontab("- 0 9 * * * true\n").problems
    assert "'-' (do not log) must be followed directly by the schedule" in problem.reason
