"""pgsched.node: each process kind's settings refuse a bad value with an error naming the
field and the value (the defaults, the CLI's, are valid)."""

from __future__ import annotations

import pytest

from pgsched.errors import ValidationError
from pgsched.node import DevSettings, SchedulerSettings, WebSettings, WorkerSettings


@pytest.mark.parametrize(
    "settings", [SchedulerSettings(), WorkerSettings(), WebSettings(), DevSettings()]
)
def test_the_defaults_are_valid(settings):
    settings.validate()


@pytest.mark.parametrize(
    "settings, field, value",
    [
        (SchedulerSettings(batch=0), "batch", 0),
        (SchedulerSettings(max_sleep=float("nan")), "max_sleep", "nan"),
        (SchedulerSettings(retention_days=0), "retention_days", 0),
        (SchedulerSettings(premake_days=61), "premake_days", 61),
        (SchedulerSettings(leader_timeout=1.0), "leader_timeout", 1.0),
        (SchedulerSettings(observe_interval=True), "observe_interval", True),
        (SchedulerSettings(usage_interval=0.1), "usage_interval", 0.1),
        (WorkerSettings(queues=()), "queues", ()),
        (WorkerSettings(queues=("default", "no spaces")), "queue", "no spaces"),
        (WorkerSettings(fallback_tenant="no tenant"), "tenant", "no tenant"),
        (WorkerSettings(tenants=("a", "not a tenant")), "tenant", "not a tenant"),
        (WorkerSettings(concurrency=0), "concurrency", 0),
        (WorkerSettings(poll_interval=0.0), "poll_interval", 0.0),
        (WorkerSettings(heartbeat_interval=0.1), "heartbeat_interval", 0.1),
        (WorkerSettings(kill_grace=-1), "kill_grace", -1),
        (WorkerSettings(shutdown_timeout=100_000), "shutdown_timeout", 100_000),
        (WorkerSettings(max_output_lines=0), "max_output_lines", 0),
        (WorkerSettings(max_output_bytes=10), "max_output_bytes", 10),
        (WorkerSettings(prefetch=-1), "prefetch", -1),
        (WorkerSettings(statement_deadline=float("inf")), "statement_deadline", "inf"),
        (WebSettings(port=0), "port", 0),
        (WebSettings(host=""), "host", ""),
        (WebSettings(pool_size=0), "pool_size", 0),
        (DevSettings(concurrency=2000), "concurrency", 2000),
        (DevSettings(web_port=70000), "web_port", 70000),
    ],
)
def test_a_bad_setting_is_refused_naming_its_field_and_value(settings, field, value):
    with pytest.raises(ValidationError) as raised:
        settings.validate()
    assert raised.value.field == field
    assert str(raised.value.value) == str(value)
    assert field in str(raised.value) and str(value) in str(raised.value)
