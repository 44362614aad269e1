"""pgsched.windows: the overlap policy and unique window of a task, validated with errors
that name the field and the value, and the CLI's options read into TaskSpec fields."""

from __future__ import annotations

import pytest

from pgsched.cli.task_options import windows
from pgsched.errors import ValidationError
from pgsched.taskspec import TaskSpec
from pgsched.windows import check_windows, describe


def spec(**fields) -> TaskSpec:
    return TaskSpec(name="job", command="true", **fields)


def test_the_defaults_are_todays_behaviour():
    s = spec()
    s.validate()
    assert (s.overlap_policy, s.unique_policy, s.unique_period_seconds, s.unique_scope) == (
        "allow",
        "none",
        None,
        "task",
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"overlap_policy": "never"},
            "overlap_policy: 'never' must be one of allow, skip, queue_one",
        ),
        ({"unique_policy": "running"}, "unique_policy: 'running' must be one of none, pending"),
        (
            {"unique_period_seconds": 0},
            "unique_period_seconds: 0 must be a number of seconds above 0, at most 3.16224e+07, "
            "or none",
        ),
        (
            {"unique_period_seconds": float("inf")},
            "unique_period_seconds: inf must be a number of seconds above 0",
        ),
        ({"unique_period_seconds": True}, "unique_period_seconds: True must be a number"),
        ({"unique_scope": "queue"}, "unique_scope: 'queue' must be one of task, key"),
    ],
)
def test_bad_values_name_the_field_and_the_value(fields, message):
    with pytest.raises(ValidationError) as caught:
        spec(**fields).validate()
    assert str(caught.value).startswith(message)


def test_a_key_scope_needs_a_key_when_the_caller_knows_there_is_none():
    check_windows("allow", "pending", None, "key", "customer:{id}")
    check_windows("allow", "pending", None, "key", "")  # not known here: the database checks
    with pytest.raises(ValidationError, match="unique_scope: 'key' needs the task's"):
        check_windows("allow", "pending", None, "key", None)


def test_the_cli_options_become_fields():
    given = {"overlap_policy": "queue_one", "unique_policy": "pending", "unique_period": "10m"}
    assert windows(given) == {
        "overlap_policy": "queue_one",
        "unique_policy": "pending",
        "unique_period_seconds": 600.0,
    }
    assert windows({"unique_period": "none"}) == {"unique_period_seconds": None}
    assert windows({"unique_scope": "key"}) == {"unique_scope": "key"}
    assert windows({}) == {}
    with pytest.raises(ValidationError, match="unique_period: 'soon' is not an interval"):
        windows({"unique_period": "soon"})


def test_task_show_says_it_in_one_line():
    row = {
        "overlap_policy": "skip",
        "unique_policy": "pending",
        "unique_period_seconds": 30.0,
        "unique_scope": "key",
    }
    assert describe(row) == "overlap skip, unique: one pending and one per 30 s per key"
    row.update(unique_policy="none", unique_period_seconds=None, overlap_policy="allow")
    assert describe(row) == "overlap allow, unique: none"
