"""The handler's context (pgsched/context.py): progress values checked with the field and
value named; a burst of reports coalesced to the latest, which still arrives; its logger
writes lines to the execution's log only; which handlers get a ctx."""

from __future__ import annotations

import logging
import time

import pytest

from pgsched.context import Context, checked, wants_context
from pgsched.errors import ValidationError


@pytest.mark.parametrize(
    ("fraction", "message", "said"),
    [
        (1.5, None, "progress: 1.5 must be from 0 to 1"),
        (-0.1, None, "progress: -0.1 must be from 0 to 1"),
        (float("nan"), None, "progress: nan must be from 0 to 1"),
        ("0.5", None, "progress: '0.5' must be a number from 0 to 1"),
        (True, None, "progress: True must be a number from 0 to 1"),
        (0.5, 3, "progress message: 3 must be text or None"),
        (0.5, "x" * 501, "is longer than 500 characters"),
    ],
)
def test_a_bad_progress_is_refused_naming_it(fraction, message, said):
    with pytest.raises(ValidationError, match=said.replace("(", r"\(")):
        checked(fraction, message)


def test_good_progress_values():
    assert checked(0) == (0.0, None)
    assert checked(1, "done") == (1.0, "done")


def _context(sent, lines, interval=0.0):
    return Context(
        execution_id=1,
        attempt=1,
        scheduled_at=None,
        tenant="default",
        task_name="t",
        report=lambda f, m: sent.append((f, m)),
        write_line=lines.append,
        min_interval=interval,
    )


def test_a_burst_of_reports_is_coalesced_and_the_last_arrives():
    sent: list = []
    ctx = _context(sent, [], interval=0.1)
    for i in range(1000):
        ctx.progress(i / 1000, f"step {i}")
    assert sent == [(0.0, "step 0")]
    time.sleep(0.3)  # no more calls: the held one is sent when its interval ends
    assert sent == [(0.0, "step 0"), (0.999, "step 999")]


def test_its_logger_writes_the_executions_log_only(caplog):
    lines: list = []
    ctx = _context([], lines)
    with caplog.at_level(logging.DEBUG):
        ctx.logger.warning("two\nlines %s", 1)
    assert lines == ["WARNING pgsched.task.t: two", "lines 1"]
    assert not caplog.records  # not the worker's own log


def test_which_handlers_get_a_context():
    def kw(*, ctx): ...
    def positional(ctx): ...
    def only_kwargs(**params): ...
    def none(a=1): ...

    assert wants_context(kw) and wants_context(positional)
    assert not wants_context(only_kwargs) and not wants_context(none)


def test_a_progress_message_is_masked_and_the_latest_kept():
    from datetime import UTC, datetime

    from pgsched.handlers.output import LogSink

    sink = LogSink(now=lambda: datetime.now(UTC))
    sink.mask = lambda text: text.replace("hunter2", "••••••")
    sink.report(0.1, "first")
    sink.report(0.5, "token hunter2\x00")
    assert sink.pending()
    assert sink.take_progress() == (0.5, "token ••••••")
    assert sink.take_progress() is None and not sink.pending()
    sink.untake_progress((0.5, "again"))
    sink.report(0.7, None)
    sink.untake_progress((0.5, "stale"))  # a newer report came: the failed write is not put back
    assert sink.take_progress() == (0.7, None)
