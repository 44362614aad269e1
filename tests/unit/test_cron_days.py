"""Quartz's day extensions (L, L-n, W, LW, wL, w#k) and the day-field rule, with every
expected instant written out by hand from a calendar (docs/cron.md)."""

from __future__ import annotations

import pytest

from pgsched import cron

from ..helpers import cron_fires as fires
from ..helpers import utc

# 2026: 1 January is a Thursday; 31 January, 28 February, 15 August and 1 August are
# Saturdays; 1 February, 15 February, 1 March, 15 March and 31 May are Sundays.
CASES = [
    # L: the last day of the month, leap days included
    (
        "0 9 L * *",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 31, 9), utc(2026, 2, 28, 9), utc(2026, 3, 31, 9)],
    ),
    ("0 9 L 2 *", "UTC", utc(2027, 3, 1), [utc(2028, 2, 29, 9), utc(2029, 2, 28, 9)]),
    # L-n: n days before the last day
    (
        "0 9 L-2 * *",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 29, 9), utc(2026, 2, 26, 9), utc(2026, 3, 29, 9)],
    ),
    # LW: the last weekday (Monday-Friday) of the month
    (
        "0 9 LW * *",
        "UTC",
        utc(2026, 1, 1),
        [
            utc(2026, 1, 30, 9),
            utc(2026, 2, 27, 9),
            utc(2026, 3, 31, 9),
            utc(2026, 4, 30, 9),
            utc(2026, 5, 29, 9),
        ],
    ),
    # dW: the weekday nearest day d, never leaving the month
    (
        "0 9 15W * *",
        "UTC",
        utc(2026, 2, 1),
        [utc(2026, 2, 16, 9), utc(2026, 3, 16, 9), utc(2026, 4, 15, 9)],
    ),
    ("0 9 15W 8 *", "UTC", utc(2026, 1, 1), [utc(2026, 8, 14, 9)]),  # Saturday -> the Friday before
    (
        "0 9 1W * *",
        "UTC",
        utc(2026, 1, 15),
        [utc(2026, 2, 2, 9), utc(2026, 3, 2, 9), utc(2026, 4, 1, 9)],
    ),
    (
        "0 9 1W 8 *",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 8, 3, 9)],
    ),  # Saturday the 1st -> Monday the 3rd
    (
        "0 9 31W * *",
        "UTC",
        utc(2026, 5, 1),  # Sunday the 31st -> Friday the 29th; June has no 31st
        [utc(2026, 5, 29, 9), utc(2026, 7, 31, 9), utc(2026, 8, 31, 9)],
    ),
    # wL: the last weekday w of the month; w#k: its k-th
    (
        "0 9 * * 5L",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 30, 9), utc(2026, 2, 27, 9), utc(2026, 3, 27, 9)],
    ),
    ("0 9 * * friL", "UTC", utc(2026, 1, 1), [utc(2026, 1, 30, 9)]),
    (
        "0 9 * * fri#3",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 16, 9), utc(2026, 2, 20, 9), utc(2026, 3, 20, 9)],
    ),
    (
        "0 9 * * 1#5",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 3, 30, 9), utc(2026, 6, 29, 9), utc(2026, 8, 31, 9)],
    ),
    (
        "0 9 * * 7#1",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 4, 9), utc(2026, 2, 1, 9)],
    ),  # 7 is Sunday too
    # lists mix plain values and extensions
    (
        "0 9 1,L * *",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 1, 9), utc(2026, 1, 31, 9), utc(2026, 2, 1, 9)],
    ),
    (
        "0 9 * * 1#1,5L",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 5, 9), utc(2026, 1, 30, 9), utc(2026, 2, 2, 9)],
    ),
    # the day rule: both fields restricted -> either matches ...
    (
        "0 9 L * 5#3",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 16, 9), utc(2026, 1, 31, 9), utc(2026, 2, 20, 9), utc(2026, 2, 28, 9)],
    ),
    (
        "0 12 13 * 5",
        "UTC",
        utc(2026, 2, 1),
        [
            utc(2026, 2, 6, 12),
            utc(2026, 2, 13, 12),
            utc(2026, 2, 20, 12),
            utc(2026, 2, 27, 12),
            utc(2026, 3, 6, 12),
            utc(2026, 3, 13, 12),
        ],
    ),
    # ... a field starting with '*' counts as unrestricted -> both must match
    ("0 9 */2 * 1L", "UTC", utc(2026, 1, 1), [utc(2026, 2, 23, 9), utc(2026, 4, 27, 9)]),
    (
        "0 0 */2 * 1",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 5, 0), utc(2026, 1, 19, 0), utc(2026, 2, 9, 0)],
    ),
    # seconds
    (
        "30 0 9 L * *",
        "UTC",
        utc(2026, 1, 1),
        [utc(2026, 1, 31, 9, 0, 30), utc(2026, 2, 28, 9, 0, 30)],
    ),
    # with DST: the 2nd Sunday of March is New York's spring-forward day, the 1st Sunday of
    # November its fall-back day; Lord Howe springs forward on the 1st Sunday of October
    (
        "30 2 * 3 0#2",
        "America/New_York",
        utc(2026, 1, 1),
        [utc(2026, 3, 8, 7, 0), utc(2027, 3, 14, 7, 0)],
    ),
    (
        "30 1 * 11 0#1",
        "America/New_York",
        utc(2026, 1, 1),
        [utc(2026, 11, 1, 5, 30), utc(2027, 11, 7, 5, 30)],
    ),
    (
        "*/30 1 * 11 sun#1",
        "America/New_York",
        utc(2026, 1, 1),
        [
            utc(2026, 11, 1, 5, 0),
            utc(2026, 11, 1, 5, 30),
            utc(2026, 11, 1, 6, 0),
            utc(2026, 11, 1, 6, 30),
        ],
    ),
    (
        "0 1 L 10 *",
        "Europe/London",
        utc(2026, 1, 1),
        [utc(2026, 10, 31, 1, 0)],
    ),  # GMT again by the 31st
    ("15 2 * 10 0#1", "Australia/Lord_Howe", utc(2025, 9, 1), [utc(2025, 10, 4, 15, 30)]),
    # Pacific/Apia skipped Friday 30 December 2011 (-10:00 -> +14:00): Saturday the 31st is
    # both the month's last day and its last Saturday
    (
        "0 0 L * *",
        "Pacific/Apia",
        utc(2011, 12, 29, 8, 0),
        [utc(2011, 12, 30, 10, 0), utc(2012, 1, 30, 10, 0)],
    ),
    (
        "0 0 * * 6L",
        "Pacific/Apia",
        utc(2011, 12, 29, 8, 0),
        [utc(2011, 12, 30, 10, 0), utc(2012, 1, 27, 10, 0)],
    ),
    # sparse expressions decades apart (the Gregorian calendar's 400-year cycle bounds the search)
    (
        "0 0 * 2 1#5",
        "UTC",
        utc(2026, 1, 1),
        [utc(2044, 2, 29), utc(2072, 2, 29)],
    ),  # Feb 29 on a Monday
    (
        "0 0 29 2 */7",
        "UTC",
        utc(2026, 1, 1),
        [utc(2032, 2, 29), utc(2060, 2, 29), utc(2088, 2, 29)],
    ),
    (
        "0 0 25 12 */7",
        "UTC",
        utc(2050, 1, 1),
        [utc(2050, 12, 25), utc(2061, 12, 25)],
    ),  # Christmas on a Sunday
    # Quartz's '?' in a day field is '*'
    ("0 0 9 ? * 1", "UTC", utc(2026, 1, 1), [utc(2026, 1, 5, 9), utc(2026, 1, 12, 9)]),
    # America/Santiago skips midnight (00:00 -> 01:00) on Sunday 6 September 2026
    (
        "0 0 * * 0#1",
        "America/Santiago",
        utc(2026, 8, 1),
        [utc(2026, 8, 2, 4, 0), utc(2026, 9, 6, 4, 0), utc(2026, 10, 4, 3, 0)],
    ),
]


@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"), CASES, ids=[f"{c[0]} {c[1]}" for c in CASES]
)
def test_day_extensions(expr, tz, after, expected):
    assert fires(cron.check(expr), tz, after, len(expected)) == expected


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 9 * * L", "day-of-week L is ambiguous"),
        ("0 9 L-0 * *", "day-of-month L-0 has offset 0, out of range 1-30"),
        ("0 9 L-31 * *", "day-of-month L-31 has offset 31"),
        ("0 9 32W * *", "day-of-month 32W has day 32, out of range 1-31"),
        ("0 9 0W * *", "day-of-month 0W has day 0"),
        ("0 9 * * 5#0", "day-of-week 5#0 has occurrence 0, out of range 1-5"),
        ("0 9 * * 5#6", "day-of-week 5#6 has occurrence 6"),
        ("0 9 * * 8L", "day-of-week 8 is out of range 0-7 (in 8L)"),
        ("0 9 * * xyz#2", "day-of-week xyz is not a number or a name (sun..sat) (in xyz#2)"),
        ("0 9 L/2 * *", "day-of-month L/2 puts a step on a single value"),
        ("0 9 1-LW * *", "day-of-month LW is not a number (in 1-LW)"),
        ("0 9 15W,L * 5#3/2", "day-of-week 5#3/2"),
        ("0 9 5L * *", "day-of-month 5L is not a number"),
        ("0 9 * * 15W", "day-of-week 15W is not a number or a name"),
        ("L 9 * * *", "minute L is not a number"),
        ("0 9 30W 2 *", "day-of-month 30W never occurs in month 2 (February has at most 29 days)"),
        (
            "0 9 L-29 2 *",
            (
                "day-of-month L-29 never occurs in month 2 (February has at most 29 days, "
                "and L-n is n days before the last day)"
            ),
        ),
    ],
)
def test_bad_day_extensions_name_the_field_and_value(expr, message):
    with pytest.raises(cron.CronError) as caught:
        cron.check(expr)
    assert message in str(caught.value)


def test_no_fire_before_the_year_9999_ends_is_none_not_an_error():
    for expr in ("0 0 1 1 *", "0 0 29 2 *", "0 0 * * 1#5", "0 0 L * *"):
        assert cron.next_after(expr, "UTC", utc(9999, 12, 31, 12)) is None
    assert cron.next_after("0 0 1 1 *", "UTC", utc(9999, 6, 1)) is None


def test_extensions_are_case_insensitive():
    for expr in ("0 9 l * *", "0 9 lw * *", "0 9 15w * *", "0 9 * * FRI#3", "0 9 * * 5l"):
        assert cron.next_after(expr, "UTC", utc(2026, 1, 1)) is not None
