"""Every refusal of a cron expression names the field, the value and why, in the field's
terms (issue 14): ``minute 60 is out of range 0-59``, ``day-of-month 31 never occurs in
month 2``. Written out by hand over many expressions, then checked as properties over
random ones: a refusal always starts with the field and quotes a value found in it, and
an expression is refused as never firing exactly when a calendar says so."""

from __future__ import annotations

import calendar
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgsched import cron

FEB = "February has at most 29 days"
THIRTY = "April, June, September and November have 30 days"
BOTH = "(a day field that starts with '*' makes a day match both, crontab(5))"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        # days that no selected month has
        ("0 0 31 2 *", f"day-of-month 31 never occurs in month 2 ({FEB})"),
        ("0 0 30 2 *", f"day-of-month 30 never occurs in month 2 ({FEB})"),
        ("0 0 30,31 2 *", f"day-of-month 30,31 never occurs in month 2 ({FEB})"),
        ("0 0 30-31 feb *", f"day-of-month 30-31 never occurs in month feb ({FEB})"),
        ("0 0 31 4,6,9,11 *", f"day-of-month 31 never occurs in months 4,6,9,11 ({THIRTY})"),
        (
            "0 0 31 apr,jun,sep,nov *",
            f"day-of-month 31 never occurs in months apr,jun,sep,nov ({THIRTY})",
        ),
        ("0 0 31 2,4 *", f"day-of-month 31 never occurs in months 2,4 ({FEB}; April has 30 days)"),
        (
            "0 0 31 2-4/2 *",
            f"day-of-month 31 never occurs in months 2-4/2 ({FEB}; April has 30 days)",
        ),
        (
            "0 0 31 4-6/2 *",
            "day-of-month 31 never occurs in months 4-6/2 (April and June have 30 days)",
        ),
        ("0 0 30-31/2 2 *", f"day-of-month 30-31/2 never occurs in month 2 ({FEB})"),
        (
            "0 0 31 2 1-5",
            None,
        ),  # both day fields restricted: either matches, so weekdays of February fire
        (
            "0 0 31 2 */2",
            f"day-of-month 31 never occurs in month 2 ({FEB})",
        ),  # '*/2': both must match
        (
            "0 0 0 31 2 *",
            f"day-of-month 31 never occurs in month 2 ({FEB})",
        ),  # with a leading second
        ("0 0 31 2 ?", f"day-of-month 31 never occurs in month 2 ({FEB})"),
        # Quartz's day items
        ("0 0 30W 2 *", f"day-of-month 30W never occurs in month 2 ({FEB})"),
        ("0 0 31W 4 *", "day-of-month 31W never occurs in month 4 (April has 30 days)"),
        (
            "0 0 L-29 2 *",
            (
                f"day-of-month L-29 never occurs in month 2 ({FEB}, and L-n is n days before the last "
                "day)"
            ),
        ),
        (
            "0 0 L-30 4,6 *",
            (
                "day-of-month L-30 never occurs in months 4,6 (April and June have 30 days, and "
                "L-n is n days before the last day)"
            ),
        ),
        ("0 0 30W,31 2 *", f"day-of-month 30W,31 never occurs in month 2 ({FEB})"),
        ("0 0 15W * */6", f"day-of-week */6 never falls on day-of-month 15W {BOTH}"),
        ("0 0 LW * */6", f"day-of-week */6 never falls on day-of-month LW {BOTH}"),
        ("0 0 1W,LW 3 */6", f"day-of-week */6 never falls on day-of-month 1W,LW in month 3 {BOTH}"),
        ("0 0 */31 * 1#2", f"day-of-week 1#2 never falls on day-of-month */31 {BOTH}"),
        ("0 0 */31 1 5L", f"day-of-week 5L never falls on day-of-month */31 in month 1 {BOTH}"),
        # ... and the ones that do fire
        ("0 0 29 2 *", None),
        ("0 0 L-28 2 *", None),
        ("0 0 29W 2 *", None),
        ("0 0 L 2 *", None),
        ("0 0 31 */2 *", None),
        ("0 0 * 2 1#5", None),
        ("0 0 15W * */5", None),
        ("0 0 LW * 1-5", None),
        # out of range, in every field
        ("60 * * * *", "minute 60 is out of range 0-59"),
        ("* 24 * * *", "hour 24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month 0 is out of range 1-31"),
        ("* * 32 * *", "day-of-month 32 is out of range 1-31"),
        ("* * * 0 *", "month 0 is out of range 1-12"),
        ("* * * 13 *", "month 13 is out of range 1-12"),
        ("* * * * 8", "day-of-week 8 is out of range 0-7"),
        ("60 * * * * *", "second 60 is out of range 0-59"),
        ("0 60 * * * *", "minute 60 is out of range 0-59"),
        # a bad part of a field: the part, then the field
        ("0,60 * * * *", "minute 60 is out of range 0-59 (in 0,60)"),
        ("* 1-24 * * *", "hour 24 is out of range 0-23 (in 1-24)"),
        ("* 25-3 * * *", "hour 25 is out of range 0-23 (in 25-3)"),
        ("* * 1,15,32 * *", "day-of-month 32 is out of range 1-31 (in 1,15,32)"),
        ("* * * jan,13 *", "month 13 is out of range 1-12 (in jan,13)"),
        ("* * * * mon,9", "day-of-week 9 is out of range 0-7 (in mon,9)"),
        ("* * * * 9#2", "day-of-week 9 is out of range 0-7 (in 9#2)"),
        ("* * * * 1,9L", "day-of-week 9 is out of range 0-7 (in 1,9L)"),
        ("* * * * mon-xyz", "day-of-week xyz is not a number or a name (sun..sat) (in mon-xyz)"),
        # malformed
        ("5-1 * * * *", "minute 5-1 is a reversed range (5 > 1)"),
        ("* * * dec-jan *", "month dec-jan is a reversed range (12 > 1)"),
        ("*/0 * * * *", "minute */0 has step 0 (the step must be at least 1)"),
        ("* */x * * *", "hour */x has step 'x', which is not a number"),
        ("5/10 * * * *", "minute 5/10 puts a step on a single value (a step needs '*' or a range)"),
        ("-5 * * * *", "minute -5 has a range with a missing start"),
        ("5- * * * *", "minute 5- has a range with a missing end"),
        ("1,,2 * * * *", "minute 1,,2 has an empty list element (two commas, or one at an end)"),
        ("1, * * * *", "minute 1, has an empty list element (two commas, or one at an end)"),
        ("x * * * *", "minute x is not a number"),
        ("* * * foo *", "month foo is not a number or a name (jan..dec)"),
        (
            "* * * * L",
            (
                "day-of-week L is ambiguous ('L' alone is Saturday in Quartz); write 'sat', or "
                "e.g. '5L' for the last Friday of the month"
            ),
        ),
        (
            "* * L-31 * *",
            "day-of-month L-31 has offset 31, out of range 1-30 (L-n: n days before the last day)",
        ),
        (
            "* * 32W * *",
            "day-of-month 32W has day 32, out of range 1-31 (dW: the weekday nearest day d)",
        ),
        (
            "* * * * 5#6",
            (
                "day-of-week 5#6 has occurrence 6, out of range 1-5 (w#k: the k-th weekday w of the "
                "month)"
            ),
        ),
        ("* * 5L * *", "day-of-month 5L is not a number"),
        ("* * * * 15W", "day-of-week 15W is not a number or a name (sun..sat)"),
    ],
)
def test_each_refusal_names_the_field_the_value_and_why(expr, message):
    if message is None:
        assert cron.check(expr)
        return
    with pytest.raises(cron.CronError) as caught:
        cron.check(expr)
    assert str(caught.value) == message


# --- properties over random expressions ---------------------------------------------------

NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
TOKEN = st.text(alphabet="0123456789*/-,LW#?xmonjan", min_size=1, max_size=6)


@settings(
    max_examples=1500, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(fields=st.lists(TOKEN, min_size=5, max_size=5))
def test_every_refusal_starts_with_a_field_and_names_a_value_written_in_it(fields):
    """Whatever the fields hold: accepted, or refused by a message that starts with one of
    the fields and then a value that is (part of) what that field says."""
    try:
        cron.check(" ".join(fields))
    except cron.CronError as exc:
        message = str(exc)
    else:
        return
    field = next(
        (n for n in sorted(NAMES, key=len, reverse=True) if message.startswith(n + " ")), None
    )
    assert field is not None, message
    value = message[len(field) + 1 :].split(" ", 1)[0]
    text = fields[NAMES.index(field)]
    assert value and (value in text or (text == "?" and value == "*")), (
        message,
        fields,
    )  # '?' reads as '*'
    assert (
        "is not a valid cron expression" not in message
    )  # croniter's verdict never reaches a user


# Plain day-of-month and month fields (day-of-week '*'): refused as never firing exactly when
# no selected month has one of the selected days in a leap year.
DAYS = st.one_of(
    st.integers(1, 31).map(str),
    st.tuples(st.integers(25, 31), st.integers(0, 6)).map(
        lambda t: f"{t[0]}-{min(31, t[0] + t[1])}"
    ),
    st.lists(st.integers(27, 31), min_size=1, max_size=3, unique=True).map(
        lambda v: ",".join(map(str, v))
    ),
)
MONTHS = st.one_of(
    st.integers(1, 12).map(str),
    st.lists(st.sampled_from([2, 4, 6, 9, 11]), min_size=1, max_size=3, unique=True).map(
        lambda v: ",".join(map(str, v))
    ),
    st.sampled_from(["feb", "apr-jun/2", "*", "*/2", "2-4"]),
)


def _selected(text: str, low: int, high: int) -> set[int]:
    names = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
    out: set[int] = set()
    for item in text.split(","):
        base, _, step = item.partition("/")
        lo, _, hi = base.partition("-")
        hi = hi or lo
        start, end = (
            (low, high) if base == "*" else (names.get(lo) or int(lo), names.get(hi) or int(hi))
        )
        out.update(range(start, end + 1, int(step or 1)))
    return out


@settings(max_examples=600, derandomize=True, deadline=None)
@given(dom=DAYS, month=MONTHS)
def test_a_date_is_refused_exactly_when_no_selected_month_has_it(dom, month):
    days, months = _selected(dom, 1, 31), _selected(month, 1, 12)
    possible = any(d <= calendar.monthrange(2024, m)[1] for d in days for m in months)
    try:
        cron.check(f"0 0 {dom} {month} *")
    except cron.CronError as exc:
        assert not possible
        assert re.fullmatch(
            rf"day-of-month {re.escape(dom)} never occurs in months? {re.escape(month)} \(.+\)",
            str(exc),
        ), str(exc)
    else:
        assert possible
