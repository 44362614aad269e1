"""Unit tests for pgsched.schedule (pure: cron, interval and once schedules, no database).

Every expected instant below is worked out by hand, not computed with the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from pgsched.errors import ValidationError
from pgsched.schedule import Schedule, parse_interval, parse_once, validate_cron, zone


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def cron(expr: str, tz: str = "UTC") -> Schedule:
    return Schedule.parse("cron", expr, tz)


# --- cron ------------------------------------------------------------------------------


def test_cron_in_utc_next_after_is_strictly_after():
    every_5 = cron("*/5 * * * *")
    assert every_5.next_after(utc(2025, 1, 15, 10, 2, 17)) == utc(2025, 1, 15, 10, 5)
    assert every_5.next_after(utc(2025, 1, 15, 10, 5)) == utc(2025, 1, 15, 10, 10)
    assert every_5.next_after(utc(2025, 1, 15, 23, 58)) == utc(2025, 1, 16, 0, 0)


def test_cron_result_is_utc_even_when_asked_with_another_offset():
    after = datetime(2025, 1, 15, 12, 2, tzinfo=timezone(timedelta(hours=2)))  # 10:02Z
    nxt = cron("*/5 * * * *").next_after(after)
    assert nxt == utc(2025, 1, 15, 10, 5)
    assert nxt.utcoffset() == timedelta(0)


def test_cron_in_berlin_winter_and_summer():
    nine = cron("0 9 * * *", "Europe/Berlin")
    assert nine.next_after(utc(2025, 1, 15, 0, 0)) == utc(2025, 1, 15, 8, 0)  # CET, UTC+1
    assert nine.next_after(utc(2025, 7, 15, 0, 0)) == utc(2025, 7, 15, 7, 0)  # CEST, UTC+2
    # 08:30Z in winter is 09:30 Berlin: today's fire has passed, tomorrow's is next.
    assert nine.next_after(utc(2025, 1, 15, 8, 30)) == utc(2025, 1, 16, 8, 0)


def test_cron_across_the_spring_dst_change_keeps_local_time():
    # Europe/Berlin moves to summer time on 2025-03-30 at 02:00 local.
    nine = cron("0 9 * * *", "Europe/Berlin")
    assert nine.upcoming(utc(2025, 3, 28, 12, 0), 3) == [
        utc(2025, 3, 29, 8, 0),
        utc(2025, 3, 30, 7, 0),
        utc(2025, 3, 31, 7, 0),
    ]


def test_cron_in_the_skipped_hour_runs_when_the_clock_jumps():
    # 02:30 does not exist in Berlin on 2025-03-30 (02:00 CET -> 03:00 CEST); like cron(8),
    # the job runs at the jump, 03:00 CEST = 01:00Z, and at 02:30 CEST (00:30Z) the next day.
    job = cron("30 2 * * *", "Europe/Berlin")
    assert job.upcoming(utc(2025, 3, 29, 12, 0), 2) == [
        utc(2025, 3, 30, 1, 0),
        utc(2025, 3, 31, 0, 30),
    ]


def test_hourly_cron_fires_every_real_hour_across_the_autumn_dst_change():
    # Berlin repeats 02:00-03:00 on 2025-10-26 (00:00Z CEST, then 01:00Z CET): a job with a
    # wildcard hour runs in both, as cron(8) runs wildcard jobs.
    hourly = cron("0 * * * *", "Europe/Berlin")
    assert hourly.upcoming(utc(2025, 10, 25, 23, 0), 3) == [
        utc(2025, 10, 26, 0, 0),
        utc(2025, 10, 26, 1, 0),
        utc(2025, 10, 26, 2, 0),
    ]


def test_fixed_time_cron_fires_once_on_the_autumn_dst_change():
    # 02:30 happens twice in Berlin on 2025-10-26: 00:30Z (CEST) and 01:30Z (CET).
    job = cron("30 2 * * *", "Europe/Berlin")
    assert job.upcoming(utc(2025, 10, 25, 12, 0), 2) == [
        utc(2025, 10, 26, 0, 30),
        utc(2025, 10, 27, 1, 30),  # 02:30 CET
    ]
    # Asked from inside either copy of the repeated hour, the next fire is the next day's.
    assert job.next_after(utc(2025, 10, 26, 0, 40)) == utc(2025, 10, 27, 1, 30)
    assert job.next_after(utc(2025, 10, 26, 1, 15)) == utc(2025, 10, 27, 1, 30)
    assert cron("@daily", "Europe/Berlin").upcoming(utc(2025, 10, 25, 12, 0), 2) == [
        utc(2025, 10, 25, 22, 0),
        utc(2025, 10, 26, 23, 0),
    ]


def test_wildcard_minute_cron_runs_in_both_copies_of_the_repeated_hour():
    # cron(8): a job with a wildcard minute or hour is not fixed-time; it runs in both copies.
    job = cron("*/30 2 * * *", "Europe/Berlin")
    assert job.upcoming(utc(2025, 10, 25, 12, 0), 5) == [
        utc(2025, 10, 26, 0, 0),  # 02:00 CEST
        utc(2025, 10, 26, 0, 30),  # 02:30 CEST
        utc(2025, 10, 26, 1, 0),  # 02:00 CET
        utc(2025, 10, 26, 1, 30),  # 02:30 CET
        utc(2025, 10, 27, 1, 0),  # 02:00 CET the next day
    ]


def test_cron_in_new_york():
    # 2025-01-15 is EST (UTC-5): midnight local is 05:00Z.
    assert cron("0 0 * * *", "America/New_York").next_after(utc(2025, 1, 15, 4, 0)) == utc(
        2025, 1, 15, 5, 0
    )


@pytest.mark.parametrize(
    ("nickname", "after", "expected"),
    [
        ("@hourly", utc(2025, 1, 15, 10, 20), utc(2025, 1, 15, 11, 0)),
        ("@daily", utc(2025, 1, 15, 10, 20), utc(2025, 1, 16, 0, 0)),
        ("@midnight", utc(2025, 1, 15, 10, 20), utc(2025, 1, 16, 0, 0)),
        ("@annually", utc(2025, 1, 15, 10, 20), utc(2026, 1, 1, 0, 0)),
        ("@yearly", utc(2025, 1, 15, 10, 20), utc(2026, 1, 1, 0, 0)),
        ("@monthly", utc(2025, 1, 15, 10, 20), utc(2025, 2, 1, 0, 0)),
        ("@weekly", utc(2025, 1, 15, 10, 20), utc(2025, 1, 19, 0, 0)),  # 2025-01-19 is a Sunday
    ],
)
def test_cron_nicknames(nickname, after, expected):
    assert cron(nickname).next_after(after) == expected


def test_nickname_in_a_zone():
    # @daily in Berlin: local midnight, 23:00Z the day before in winter.
    assert cron("@daily", "Europe/Berlin").next_after(utc(2025, 1, 15, 12, 0)) == utc(
        2025, 1, 15, 23, 0
    )


def test_validate_cron_normalises():
    assert validate_cron("  0   9 *  * *  ") == "0 9 * * *"
    assert validate_cron("@HOURLY") == "@hourly"
    assert cron("0\t9 * * *").expr == "0 9 * * *"


@pytest.mark.parametrize(("expr", "count"), [("* * * *", 4), ("0 9 * * * * 2025", 7), ("0", 1)])
def test_validate_cron_wrong_field_count_names_the_value(expr, count):
    with pytest.raises(ValidationError) as info:
        validate_cron(expr)
    assert info.value.field == "schedule"
    assert info.value.value == expr
    assert repr(expr) in str(info.value)
    assert f"has {count} fields" in str(info.value)


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("61 * * * *", "minute 61 is out of range 0-59"),
        ("* 25 * * *", "hour 25 is out of range 0-23"),
        ("* * 32 * *", "day-of-month 32 is out of range 1-31"),
        ("* * * 13 *", "month 13 is out of range 1-12"),
        ("a b c d e", "minute a is not a number"),
        ("*/0 * * * *", "minute */0 has step 0"),
        ("5-1 * * * *", "minute 5-1 is a reversed range (5 > 1)"),
        ("0 0 30 2 *", "day-of-month 30 never occurs in month 2"),
    ],
)
def test_validate_cron_bad_expression_names_the_value(expr, reason):
    with pytest.raises(ValidationError, match="not a usable cron expression") as info:
        validate_cron(expr)
    assert repr(expr) in str(info.value) and reason in str(info.value)


def test_validate_cron_unknown_nickname():
    with pytest.raises(ValidationError, match="@fortnightly") as info:
        validate_cron("@fortnightly")
    assert "@hourly" in str(info.value)  # the message lists what is allowed


# --- interval --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1d", 86400.0),
        ("1.5", 1.5),
        (" 2H ", 7200.0),
        ("1d2h3m4s", 93784.0),
        ("1h 30m", 5400.0),
    ],
)
def test_parse_interval(text, seconds):
    assert parse_interval(text) == seconds


@pytest.mark.parametrize(
    "text", ["0", "-5", "abc", "5x", "", "0s", "5m5x", "m5", "nan", "inf", "1h-30m"]
)
def test_parse_interval_rejects_and_names_the_value(text):
    with pytest.raises(ValidationError) as info:
        parse_interval(text)
    assert info.value.field == "schedule"
    assert info.value.value == text
    assert repr(text) in str(info.value)


def test_interval_schedule_parse_rejects_a_bad_interval():
    with pytest.raises(ValidationError, match="'5x'"):
        Schedule.parse("interval", "5x")


def anchored(step: str, anchor: datetime) -> Schedule:
    return Schedule.parse("interval", step, "UTC", anchor)


def test_interval_next_after_is_anchor_plus_k_steps_strictly_after():
    every_minute = anchored("60", utc(2025, 1, 15, 10, 0, 0))
    late = datetime(2025, 1, 15, 10, 5, 30, 500000, tzinfo=UTC)
    assert every_minute.next_after(late) == utc(2025, 1, 15, 10, 6, 0)
    assert every_minute.next_after(utc(2025, 1, 15, 10, 6, 0)) == utc(2025, 1, 15, 10, 7, 0)
    assert every_minute.next_after(utc(2025, 1, 15, 10, 0, 0)) == utc(2025, 1, 15, 10, 1, 0)


def test_interval_before_its_anchor_fires_at_the_anchor():
    every_minute = anchored("1m", utc(2025, 1, 15, 10, 0, 0))
    assert every_minute.next_after(utc(2025, 1, 15, 9, 0, 0)) == utc(2025, 1, 15, 10, 0, 0)


def test_interval_does_not_drift_when_asked_late_again_and_again():
    every_90s = anchored("90s", utc(2025, 1, 15, 10, 0, 0))
    t = utc(2025, 1, 15, 10, 0, 0)
    fires = []
    for lateness in (0.7, 13.0, 89.9, 0.001):
        t = every_90s.next_after(t)
        fires.append(t)
        t = t + timedelta(seconds=lateness)  # asked late: the next fire must not move
    assert fires == [
        utc(2025, 1, 15, 10, 1, 30),
        utc(2025, 1, 15, 10, 3, 0),
        utc(2025, 1, 15, 10, 4, 30),
        utc(2025, 1, 15, 10, 6, 0),
    ]


def test_interval_far_from_its_anchor_lands_exactly_on_a_multiple():
    every_7s = anchored("7", utc(2025, 1, 1, 0, 0, 0))
    # 2025-01-01 -> 2025-07-01 is 181 days = 15,638,400 s = 2,234,057 * 7 + 1; the next
    # multiple is 2,234,058 * 7 = 15,638,406 s after the anchor: 2025-07-01T00:00:06Z.
    assert every_7s.next_after(utc(2025, 7, 1, 0, 0, 0)) == utc(2025, 7, 1, 0, 0, 6)


def test_interval_with_a_zone_is_still_anchored_in_absolute_time():
    every_day = Schedule.parse("interval", "1d", "Europe/Berlin", utc(2025, 3, 29, 12, 0))
    # An interval is absolute: 86400 s, also across the DST change.
    assert every_day.next_after(utc(2025, 3, 29, 12, 0)) == utc(2025, 3, 30, 12, 0)


# --- once ------------------------------------------------------------------------------


def test_once_naive_timestamp_is_read_in_the_task_zone():
    winter = Schedule.parse("once", "2026-12-01T09:00:00", "Europe/Berlin")
    assert winter.next_after(utc(2026, 1, 1)) == utc(2026, 12, 1, 8, 0)
    summer = Schedule.parse("once", "2026-07-01 09:00", "Europe/Berlin")
    assert summer.next_after(utc(2026, 1, 1)) == utc(2026, 7, 1, 7, 0)
    assert parse_once("2026-12-01T09:00:00", "UTC") == utc(2026, 12, 1, 9, 0)


def test_a_one_shot_at_a_local_time_the_clocks_skip_is_refused_and_one_shown_twice_is_its_first():
    """Europe/Berlin, 2027: the clocks jump from 02:00 to 03:00 on 28 March and fall back
    from 03:00 to 02:00 on 31 October (PEP 495 would quietly move 02:30 to 03:30)."""
    with pytest.raises(
        ValidationError, match=r"schedule: '2027-03-28T02:30:00' does not exist in Europe/Berlin"
    ):
        parse_once("2027-03-28T02:30:00", "Europe/Berlin")
    assert parse_once("2027-03-28T03:30:00", "Europe/Berlin") == utc(2027, 3, 28, 1, 30)
    assert parse_once("2027-10-31T02:30:00", "Europe/Berlin") == utc(
        2027, 10, 31, 0, 30
    )  # the first 02:30
    assert parse_once("2027-03-28T02:30:00+01:00", "Europe/Berlin") == utc(
        2027, 3, 28, 1, 30
    )  # an offset: as given


@pytest.mark.parametrize("name", ["localtime", "posixrules", "Factory", "right/Europe/Berlin"])
def test_zone_names_that_are_no_locations_civil_time_are_refused(name):
    with pytest.raises(ValidationError, match=r"timezone: .* is not a location's time zone"):
        zone(name)
    with pytest.raises(ValidationError, match="timezone"):
        Schedule.parse("cron", "0 9 * * *", name)


def test_once_with_an_offset_ignores_the_task_zone():
    once = Schedule.parse("once", "2026-12-01T09:00:00+05:00", "Europe/Berlin")
    assert once.next_after(utc(2026, 1, 1)) == utc(2026, 12, 1, 4, 0)
    assert Schedule.parse("once", "2026-12-01T09:00:00Z", "Asia/Tokyo").first_fire(
        utc(2026, 1, 1)
    ) == utc(2026, 12, 1, 9, 0)


def test_once_in_the_past_never_fires_again():
    once = Schedule.parse("once", "2026-12-01T09:00:00Z")
    assert once.next_after(utc(2026, 12, 1, 9, 0)) is None  # strictly after
    assert once.next_after(utc(2027, 1, 1)) is None
    assert once.upcoming(utc(2026, 1, 1), 5) == [utc(2026, 12, 1, 9, 0)]


def test_once_first_fire_is_its_instant_even_when_past():
    once = Schedule.parse("once", "2026-12-01T09:00:00Z")
    assert once.first_fire(utc(2027, 6, 1)) == utc(2026, 12, 1, 9, 0)
    assert once.first_fire(utc(2026, 1, 1)) == utc(2026, 12, 1, 9, 0)


def test_first_fire_of_other_kinds_is_after_now():
    assert cron("0 * * * *").first_fire(utc(2025, 1, 15, 10, 0)) == utc(2025, 1, 15, 11, 0)
    assert anchored("10m", utc(2025, 1, 15, 10, 0)).first_fire(utc(2025, 1, 15, 10, 10)) == utc(
        2025, 1, 15, 10, 20
    )


@pytest.mark.parametrize("text", ["tomorrow", "2026-13-01T00:00:00", "12/01/2026"])
def test_once_rejects_a_non_iso_timestamp(text):
    with pytest.raises(ValidationError, match="ISO 8601") as info:
        Schedule.parse("once", text)
    assert repr(text) in str(info.value)


# --- none, kinds, zones --------------------------------------------------------------------


def test_none_never_fires():
    none = Schedule.parse("none", None)
    assert none.expr is None
    assert none.next_after(utc(2025, 1, 1)) is None
    assert none.first_fire(utc(2025, 1, 1)) is None
    assert none.upcoming(utc(2025, 1, 1), 3) == []


def test_unknown_kind_and_missing_expression():
    with pytest.raises(ValidationError, match="schedule_kind: 'weekly'"):
        Schedule.parse("weekly", "x")
    for kind in ("cron", "interval", "once"):
        with pytest.raises(ValidationError, match=f"required for a {kind} schedule"):
            Schedule.parse(kind, "  ")
        with pytest.raises(ValidationError, match=f"required for a {kind} schedule"):
            Schedule.parse(kind, None)


@pytest.mark.parametrize("tz", ["Mars/Olympus_Mons", "Europe/Berlinn", "", "../etc/passwd"])
def test_unknown_time_zone_is_an_error_naming_it(tz):
    with pytest.raises(ValidationError) as info:
        Schedule.parse("cron", "0 9 * * *", tz)
    assert info.value.field == "timezone"
    assert info.value.value == tz
    with pytest.raises(ValidationError, match="IANA"):
        zone(tz)


def test_upcoming_lists_n_fires_in_order():
    assert cron("30 */6 * * *").upcoming(utc(2025, 1, 15, 7, 0), 4) == [
        utc(2025, 1, 15, 12, 30),
        utc(2025, 1, 15, 18, 30),
        utc(2025, 1, 16, 0, 30),
        utc(2025, 1, 16, 6, 30),
    ]
    assert anchored("1h30m", utc(2025, 1, 15, 0, 0)).upcoming(utc(2025, 1, 15, 2, 0), 3) == [
        utc(2025, 1, 15, 3, 0),
        utc(2025, 1, 15, 4, 30),
        utc(2025, 1, 15, 6, 0),
    ]
    assert cron("0 9 * * *").upcoming(utc(2025, 1, 15), 0) == []


def test_interval_with_a_fraction_is_strictly_after_at_exact_multiples():
    step = anchored("1.1", utc(2025, 1, 15, 10, 0, 0))
    # 3.3 / 1.1 is 2.9999999999999996 in floating point: the rounding must not return 10:00:03.3.
    at = datetime(2025, 1, 15, 10, 0, 3, 300000, tzinfo=UTC)
    assert step.next_after(at) == datetime(2025, 1, 15, 10, 0, 4, 400000, tzinfo=UTC)


@pytest.mark.parametrize("text", ["0.5", "1e-300", "1e308", "99999999999d", "inf", "nan"])
def test_intervals_outside_one_second_to_ten_years_are_refused(text):
    with pytest.raises(ValidationError, match="must be an interval from 1 second to 3650 days"):
        parse_interval(text)


# --- the day-of-month / day-of-week rule (crontab(5), Vixie cron and cronie) --------------


def test_both_day_fields_restricted_means_either_matches():
    # 13th of the month OR a Friday, from Mon 2026-02-02.
    job = cron("0 12 13 * 5")
    assert job.upcoming(utc(2026, 2, 2, 0, 0), 4) == [
        utc(2026, 2, 6, 12, 0),  # Friday 6th
        utc(2026, 2, 13, 12, 0),  # Friday 13th (both)
        utc(2026, 2, 20, 12, 0),  # Friday 20th
        utc(2026, 2, 27, 12, 0),  # Friday 27th
    ]
    assert cron("0 12 13 * 5").next_after(utc(2026, 3, 7, 0, 0)) == utc(
        2026, 3, 13, 12, 0
    )  # Friday again
    assert cron("0 12 10 * 5").next_after(utc(2026, 3, 7, 0, 0)) == utc(
        2026, 3, 10, 12, 0
    )  # Tuesday 10th


def test_a_day_field_starting_with_a_star_counts_as_unrestricted():
    # '*/2' day-of-month with Monday: odd days that are Mondays (both must match).
    job = cron("0 0 */2 * 1")
    assert job.upcoming(utc(2025, 1, 1, 0, 0), 4) == [
        utc(2025, 1, 13, 0, 0),
        utc(2025, 1, 27, 0, 0),
        utc(2025, 2, 3, 0, 0),
        utc(2025, 2, 17, 0, 0),
    ]
    # and the other way round: the 1st of the month when it falls on an even weekday number
    job = cron("0 0 1 * */2")  # Sun, Tue, Thu, Sat
    assert job.upcoming(utc(2025, 1, 1, 0, 0), 4) == [
        utc(2025, 2, 1, 0, 0),  # Saturday
        utc(2025, 3, 1, 0, 0),  # Saturday
        utc(2025, 4, 1, 0, 0),  # Tuesday
        utc(2025, 5, 1, 0, 0),  # Thursday
    ]


def test_wildcard_jobs_do_not_run_in_a_skipped_hour_but_fixed_time_jobs_run_after_the_jump():
    # Europe/Berlin springs forward on 2025-03-30 at 02:00 CET to 03:00 CEST: 02:xx never exists.
    assert cron("*/20 2 * * *", "Europe/Berlin").upcoming(utc(2025, 3, 29, 12, 0), 2) == [
        utc(2025, 3, 31, 0, 0),
        utc(2025, 3, 31, 0, 20),  # 02:00 and 02:20 CEST the next day
    ]
    assert cron("30 2 * * *", "Europe/Berlin").upcoming(utc(2025, 3, 29, 12, 0), 2) == [
        utc(2025, 3, 30, 1, 0),  # right after the jump: 03:00 CEST
        utc(2025, 3, 31, 0, 30),  # 02:30 CEST
    ]


def test_a_plan_anchors_an_interval_at_now_and_keeps_a_paused_one_shot():
    now = datetime(2026, 3, 1, 12, 0, 0, 750_000, tzinfo=UTC)
    every = Schedule.parse("interval", "90s")
    assert every.plan(now) == (
        now.replace(microsecond=0),
        now.replace(microsecond=0) + timedelta(seconds=90),
    )
    assert every.plan(now, enabled=False) == (
        now.replace(microsecond=0),
        None,
    )  # planned when it resumes
    once = Schedule.parse("once", "2026-02-01T00:00:00Z")
    instant = datetime(2026, 2, 1, tzinfo=UTC)
    assert once.plan(now, enabled=False) == (None, instant)  # its instant, even past and paused
    assert once.plan(now, fired_through=instant) == (None, None)  # it already ran
    assert Schedule.parse("cron", "0 * * * *").plan(now).anchor is None
