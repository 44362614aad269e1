"""cron(8)'s daylight-saving rules, with every expected instant written out by hand.

Rules (docs/cron.md): a fixed-time job (neither minute nor hour starts with '*') whose
time is skipped runs once right after the jump, and runs once (first copy) when a time
repeats; a wildcard job follows the wall clock.
"""

from __future__ import annotations

import pytest

from pgsched import cron

from ..helpers import cron_fires as fires
from ..helpers import utc

# America/New_York 2026: 02:00 EST -> 03:00 EDT on Sun 8 March; 02:00 EDT -> 01:00 EST on Sun 1 November.
# Europe/London 2026: 01:00 GMT -> 02:00 BST on Sun 29 March; 02:00 BST -> 01:00 GMT on Sun 25 October.
# Australia/Lord_Howe: 02:00 -> 02:30 (+10:30 -> +11) on Sun 5 October 2025;
#                      02:00 -> 01:30 (+11 -> +10:30) on Sun 5 April 2026.
CASES = [
    # Europe/Berlin 2025: 03:00 CEST -> 02:00 CET on Sun 26 October (01:00Z). A per-second
    # job runs through the change second by second; '*/20 2' runs in both copies of 02:xx,
    # also when asked from inside the second copy
    (
        "* * * * * *",
        "Europe/Berlin",
        utc(2025, 10, 26, 0, 59, 58),
        [utc(2025, 10, 26, 0, 59, 59), utc(2025, 10, 26, 1, 0, 0), utc(2025, 10, 26, 1, 0, 1)],
    ),
    (
        "*/20 2 * * *",
        "Europe/Berlin",
        utc(2025, 10, 26, 0, 30),
        [
            utc(2025, 10, 26, 0, 40),
            utc(2025, 10, 26, 1, 0),
            utc(2025, 10, 26, 1, 20),
            utc(2025, 10, 26, 1, 40),
            utc(2025, 10, 27, 1, 0),
        ],
    ),
    (
        "*/20 2 * * *",
        "Europe/Berlin",
        utc(2025, 10, 26, 1, 10),
        [utc(2025, 10, 26, 1, 20), utc(2025, 10, 26, 1, 40), utc(2025, 10, 27, 1, 0)],
    ),
    # ... and on 30 March 2025 (02:00 CET -> 03:00 CEST at 01:00Z) skips the missing hour
    (
        "*/20 * * * *",
        "Europe/Berlin",
        utc(2025, 3, 30, 0, 30),
        [utc(2025, 3, 30, 0, 40), utc(2025, 3, 30, 1, 0), utc(2025, 3, 30, 1, 20)],
    ),
    # fixed time in the skipped interval: once, right after the jump
    (
        "30 2 * * *",
        "America/New_York",
        utc(2026, 3, 7, 0, 0),
        [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)],
    ),
    (
        "30 1 * * *",
        "Europe/London",
        utc(2026, 3, 28, 0, 0),
        [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)],
    ),
    (
        "15 2 * * *",
        "Australia/Lord_Howe",
        utc(2025, 10, 3, 12, 0),
        [utc(2025, 10, 3, 15, 45), utc(2025, 10, 4, 15, 30), utc(2025, 10, 5, 15, 15)],
    ),
    # fixed time in the repeated interval: once, at the first occurrence
    (
        "30 1 * * *",
        "America/New_York",
        utc(2026, 10, 31, 12, 0),
        [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)],
    ),
    (
        "30 1 * * *",
        "Europe/London",
        utc(2026, 10, 24, 12, 0),
        [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
    ),
    (
        "45 1 * * *",
        "Australia/Lord_Howe",
        utc(2026, 4, 3, 12, 0),  # 23:00 +11 on Friday 3 April
        [utc(2026, 4, 3, 14, 45), utc(2026, 4, 4, 14, 45), utc(2026, 4, 5, 15, 15)],
    ),
    # wildcard hour or minute: the wall clock, so both copies of a repeated hour ...
    (
        "*/30 1 * * *",
        "America/New_York",
        utc(2026, 10, 31, 12, 0),
        [
            utc(2026, 11, 1, 5, 0),
            utc(2026, 11, 1, 5, 30),
            utc(2026, 11, 1, 6, 0),
            utc(2026, 11, 1, 6, 30),
            utc(2026, 11, 2, 6, 0),
        ],
    ),
    (
        "*/20 1 * * *",
        "Australia/Lord_Howe",
        utc(2026, 4, 4, 12, 0),  # 01:30-02:00 repeats, at +11 then +10:30
        [
            utc(2026, 4, 4, 14, 0),
            utc(2026, 4, 4, 14, 20),
            utc(2026, 4, 4, 14, 40),
            utc(2026, 4, 4, 15, 10),
            utc(2026, 4, 5, 14, 30),
        ],
    ),
    (
        "15 * * * *",
        "Europe/London",
        utc(2026, 10, 24, 23, 0),
        [
            utc(2026, 10, 24, 23, 15),
            utc(2026, 10, 25, 0, 15),
            utc(2026, 10, 25, 1, 15),
            utc(2026, 10, 25, 2, 15),
        ],
    ),
    # ... and nothing in a skipped one
    (
        "*/30 2 * * *",
        "America/New_York",
        utc(2026, 3, 7, 12, 0),
        [utc(2026, 3, 9, 6, 0), utc(2026, 3, 9, 6, 30)],
    ),
    (
        "0 * * * *",
        "Europe/London",
        utc(2026, 3, 28, 23, 30),
        [utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 2, 0)],
    ),
    # an offset change outside DST: Asia/Pyongyang went from +08:30 to +09:00 at 23:30 on
    # 2018-05-04 (23:30-23:59 never happened). Fixed time runs right after the jump ...
    (
        "45 23 * * *",
        "Asia/Pyongyang",
        utc(2018, 5, 3, 12, 0),
        [utc(2018, 5, 3, 15, 15), utc(2018, 5, 4, 15, 0), utc(2018, 5, 5, 14, 45)],
    ),
    # ... a wildcard job runs only at the wall times that existed
    (
        "*/10 23 * * *",
        "Asia/Pyongyang",
        utc(2018, 5, 4, 14, 0),
        [
            utc(2018, 5, 4, 14, 30),
            utc(2018, 5, 4, 14, 40),
            utc(2018, 5, 4, 14, 50),
            utc(2018, 5, 5, 14, 0),
        ],
    ),
    # leap days
    (
        "0 12 29 2 *",
        "UTC",
        utc(2025, 1, 1, 0, 0),
        [utc(2028, 2, 29, 12, 0), utc(2032, 2, 29, 12, 0)],
    ),
]


@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"),
    CASES,
    ids=[f"{c[0]}@{c[1]}@{c[2]:%Y-%m-%d}" for c in CASES],
)
def test_dst_rules(expr, tz, after, expected):
    assert fires(expr, tz, after, len(expected)) == expected


SECONDS_CASES = [
    # a leading seconds field (Quartz/Spring style): 09:30 CET is 08:30Z
    (
        "*/15 30 9 * * *",
        "Europe/Berlin",
        utc(2026, 1, 1, 0, 0),
        [
            utc(2026, 1, 1, 8, 30, 0),
            utc(2026, 1, 1, 8, 30, 15),
            utc(2026, 1, 1, 8, 30, 30),
            utc(2026, 1, 1, 8, 30, 45),
            utc(2026, 1, 2, 8, 30, 0),
        ],
    ),
    ("5 0 12 * * *", "UTC", utc(2026, 1, 1, 12, 0, 5), [utc(2026, 1, 2, 12, 0, 5)]),
    # fixed second, minute and hour in the repeated hour: once (02:30:30 CEST = 00:30:30Z)
    (
        "30 30 2 * * *",
        "Europe/Berlin",
        utc(2025, 10, 25, 12, 0),
        [utc(2025, 10, 26, 0, 30, 30), utc(2025, 10, 27, 1, 30, 30)],
    ),
    # a wildcard second follows the wall clock through both copies
    (
        "*/30 30 2 * * *",
        "Europe/Berlin",
        utc(2025, 10, 25, 12, 0),
        [
            utc(2025, 10, 26, 0, 30, 0),
            utc(2025, 10, 26, 0, 30, 30),
            utc(2025, 10, 26, 1, 30, 0),
            utc(2025, 10, 26, 1, 30, 30),
        ],
    ),
]


@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"),
    SECONDS_CASES,
    ids=[f"{c[0]}@{c[1]}@{c[2]:%Y-%m-%d}" for c in SECONDS_CASES],
)
def test_seconds_field(expr, tz, after, expected):
    assert fires(expr, tz, after, len(expected)) == expected


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("61 * * * * *", "second 61 is out of range 0-59"),
        ("0 0 0 30 2 *", "day-of-month 30 never occurs in month 2"),
        ("* * * * * * *", "has 7 fields"),
    ],
)
def test_bad_six_field_expressions(expr, reason):
    with pytest.raises(cron.CronError, match=reason):
        cron.check(expr)
