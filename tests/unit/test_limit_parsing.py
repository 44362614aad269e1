"""How the faces write a limit, a rate and a size (pgsched/limits.py), and the limits a
task may have (TaskSpec, issue 18): what is taken, and what is refused naming the field
and the value."""

from __future__ import annotations

import pytest

from pgsched import limits
from pgsched.errors import ValidationError
from pgsched.taskspec import TaskSpec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("60/1m", (60, 60.0)),
        ("10/30s", (10, 30.0)),
        ("1000/1h", (1000, 3600.0)),
        ("5/m", (5, 60.0)),
        ("3/90", (3, 90.0)),
        (" 2 / 1d ", (2, 86400.0)),
        ("1/1h30m", (1, 5400.0)),
        ("5/0.5s", (5, 0.5)),  # periods below a second: the database takes them from 1 ms
        ("1/0.001", (1, 0.001)),
        ("1/366d", (1, 366 * 86400.0)),
        ("none", None),
        ("NONE", None),
    ],
)
def test_a_rate_is_n_per_period(text, expected):
    assert limits.parse_rate("rate_limit", text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("60", "rate_limit: '60' must be N/PERIOD like '60/1m'"),
        ("60/", "rate_limit: '60/' must be N/PERIOD"),
        ("/1m", "rate_limit: '/1m' must be N/PERIOD"),
        ("x/1m", "rate_limit: 'x/1m' must be N/PERIOD"),
        ("0/1m", "rate_limit: '0/1m' must start with a number of starts from 1"),
        ("-3/1m", "rate_limit: '-3/1m' must start with a number of starts from 1"),
        ("5/0s", f"rate_limit: '5/0s' must have a period {limits.RATE_PERIOD_RANGE}"),
        ("5/0.0009", "rate_limit: '5/0.0009' must have a period from 0.001 seconds (1 ms) to"),
        ("5/fortnight", "rate_limit: '5/fortnight' must have a period of seconds or units"),
        ("5/400d", "rate_limit: '5/400d' must have a period from 0.001 seconds (1 ms) to 366"),
        ("5/366d1s", "rate_limit: '5/366d1s' must have a period from 0.001 seconds (1 ms) to"),
    ],
)
def test_a_bad_rate_is_refused_naming_field_and_value(text, message):
    with pytest.raises(ValidationError) as raised:
        limits.parse_rate("rate_limit", text)
    assert str(raised.value).startswith(message)


def test_a_count_is_an_integer_in_range_or_none():
    assert limits.parse_count("max_running", "4") == 4
    assert limits.parse_count("max_running", "none") is None
    assert limits.parse_count("max_running", "0", 0) == 0
    for bad in ("0", "-1", "four", "1.5", "", str(2**31)):
        with pytest.raises(ValidationError, match=f"max_running: {bad!r} must be an integer"):
            limits.parse_count("max_running", bad)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("100GB", 100 * 10**9),
        ("100 gb", 100 * 10**9),
        ("512MiB", 512 * 2**20),
        ("1.5GiB", 3 * 2**29),
        ("1000000", 10**6),
        ("0", 0),
        ("2kB", 2000),
        ("none", None),
    ],
)
def test_a_size_takes_decimal_and_binary_units(text, size):
    assert limits.parse_bytes("max_log_bytes", text) == size


@pytest.mark.parametrize("text", ["100 parsecs", "GB", "-1GB", "1e9", "100GBs", "99999999TB"])
def test_a_bad_size_is_refused(text):
    with pytest.raises(ValidationError, match=f"max_log_bytes: {text!r}"):
        limits.parse_bytes("max_log_bytes", text)


def test_rates_and_sizes_are_written_back_as_people_write_them():
    assert limits.format_rate(60, 60.0) == "60/1m"
    assert limits.format_rate(10, 30.0) == "10/30s"
    assert limits.format_rate(2, 7200.0) == "2/2h"
    assert limits.format_rate(1, 86400.0) == "1/1d"
    assert limits.format_rate(1, 1.5) == "1/1.5s"
    assert limits.format_rate(None, None) is None
    assert limits.format_bytes(100 * 10**9) == "100GB"
    assert limits.format_bytes(1234) == "1234"
    assert limits.format_bytes(None) is None
    for text in ("60/1m", "7/90s", "3/2h"):
        n, period = limits.parse_rate("r", text)  # type: ignore[misc]
        assert limits.parse_rate("r", limits.format_rate(n, period) or "") == (n, period)


def test_a_task_takes_its_limits():
    TaskSpec(
        name="import",
        command="true",
        max_running=2,
        rate_limit=60,
        rate_period_seconds=60.0,
        concurrency_key="customer:{customer_id}",
        key_max_running=1,
        key_rate_limit=5,
        key_rate_period_seconds=1,
    ).validate()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_running": 0}, "max_running: 0 must be an integer from 1"),
        ({"max_running": True}, "max_running: True must be an integer"),
        ({"rate_limit": 5}, "rate_limit: 5 and rate_period_seconds go together"),
        ({"rate_period_seconds": 5.0}, "rate_limit: None and rate_period_seconds go together"),
        ({"rate_limit": 5, "rate_period_seconds": 0}, "rate_period_seconds: 0 must be"),
        ({"key_max_running": 1}, "key_max_running: 1 needs a concurrency_key"),
        ({"key_rate_limit": 1, "key_rate_period_seconds": 1}, "key_rate_limit: 1 needs a"),
        ({"concurrency_key": ""}, "concurrency_key: '' must be a template of 1 to 200"),
        ({"concurrency_key": "k" * 201}, "concurrency_key: 'kkk"),
    ],
)
def test_a_tasks_bad_limits_are_refused_naming_the_field(fields, message):
    with pytest.raises(ValidationError) as raised:
        TaskSpec(name="t", command="true", **fields).validate()
    assert str(raised.value).startswith(message)


def test_every_face_states_the_rate_periods_bounds_alike():
    """The pure parser, a task's limits and the store say one range: the database's
    (queue_set_limits_v1, migration 0024: from 0.001 to 31622400 seconds)."""
    from pgsched.stores import limits as store

    assert limits.RATE_PERIOD_RANGE == "from 0.001 seconds (1 ms) to 366 days (31622400 seconds)"
    assert (limits.MIN_RATE_PERIOD_SECONDS, limits.MAX_RATE_PERIOD_SECONDS) == (0.001, 31622400)
    said = []
    for refuse in (
        lambda: limits.parse_rate("rate_limit", "1/400d"),
        lambda: TaskSpec(
            name="t", command="true", rate_limit=1, rate_period_seconds=400 * 86400.0
        ).validate(),
        lambda: store.queue_set_limits(
            None,  # type: ignore[arg-type]  # refused before any database is used
            "default",
            "q",
            rate_limit=1,
            rate_period_seconds=400 * 86400.0,
        ),
    ):
        with pytest.raises(ValidationError) as raised:
            refuse()
        said.append(str(raised.value))
    assert all(limits.RATE_PERIOD_RANGE in s for s in said), said


@pytest.mark.parametrize(
    ("field", "text", "value"),
    [
        ("max_running", "50", 50),
        ("max_running", "0", 0),
        ("max_starts_per_hour", "none", None),
        ("max_compute_minutes_per_month", str(2**40), 2**40),
        ("max_log_bytes", "100GB", 100 * 10**9),
        ("max_log_bytes", "100 GB", 100 * 10**9),
        ("weight", "3", 3),
    ],
)
def test_a_quota_is_read_as_the_cli_reads_it(field, text, value):
    assert limits.parse_quota(field, text) == value


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("max_running", "-1", "max_running: '-1' must be an integer from 0 to 2147483647"),
        ("max_running", "lots", "max_running: 'lots' must be an integer"),
        ("max_log_bytes", "100 parsecs", "max_log_bytes: '100 parsecs' must be a size"),
        ("weight", "none", "weight: 'none' must be an integer from 1 to 100"),
        ("weight", "0", "weight: '0' must be an integer from 1 to 100"),
    ],
)
def test_a_bad_quota_is_refused_naming_field_and_value(field, text, message):
    with pytest.raises(ValidationError) as raised:
        limits.parse_quota(field, text)
    assert str(raised.value).startswith(message)


def test_a_size_is_written_with_a_space_for_a_page():
    assert limits.format_bytes(100 * 10**9, " ") == "100 GB"
    assert limits.parse_bytes("b", limits.format_bytes(512 * 10**6, " ") or "") == 512 * 10**6
