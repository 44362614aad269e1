"""The limits' gauges of ``/metrics`` (issue 18), for :mod:`pgsched.metrics`: per tenant
its use beside each quota, per queue its pause and limit.

Per tenant (label ``tenant``): ``pgsched_tenant_running`` / ``pgsched_tenant_max_running``,
``pgsched_tenant_hour_starts`` / ``pgsched_tenant_max_starts_per_hour`` (this clock hour,
UTC), ``pgsched_tenant_compute_minutes`` / ``pgsched_tenant_max_compute_minutes`` (this
calendar month, UTC), ``pgsched_tenant_log_bytes`` / ``pgsched_tenant_max_log_bytes``, and
``pgsched_tenant_quota_over`` (labels ``tenant``, ``quota``: 1 when that quota holds the
tenant's claims, :mod:`pgsched.quota_use`). A quota that is none has no ``max`` series.

Per queue (labels ``tenant``, ``queue``): ``pgsched_queue_paused`` (0/1),
``pgsched_queue_max_running`` (queues with that limit only) and ``pgsched_queue_waiting``
(ready executions a limit holds back); what runs in a queue is ``pgsched_running``.
Cardinality: one series per tenant and quota, and per queue that has a row, work or a
live worker (the queues ``pgsched_queue_depth`` has, plus the paused or limited ones).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from . import quota_use
from .db import Row

# (family name suffix, column of the quota's use, column of the quota, what it counts)
_TENANT = (
    ("running", "max_running", "Executions of the tenant running now, across every worker."),
    ("hour_starts", "max_starts_per_hour", "Executions the tenant started this clock hour (UTC)."),
    (
        "compute_minutes",
        "max_compute_minutes_per_month",
        "Handler minutes of the tenant's attempts this calendar month (UTC), as last measured.",
    ),
    (
        "log_bytes",
        "max_log_bytes",
        "Bytes of the tenant's stored execution logs, as last measured.",
    ),
)
_MAX_NAMES = {
    "max_running": "pgsched_tenant_max_running",
    "max_starts_per_hour": "pgsched_tenant_max_starts_per_hour",
    "max_compute_minutes_per_month": "pgsched_tenant_max_compute_minutes",
    "max_log_bytes": "pgsched_tenant_max_log_bytes",
}


def families(tenants: Iterable[Row], queues: Iterable[Row]) -> list[Metric]:
    """The gauges of ``tenants`` (rows of ``limits_web_tenant_usage``) and ``queues``
    (rows of ``limits_queue_list``)."""
    out: list[Metric] = []
    used = {
        col: GaugeMetricFamily(f"pgsched_tenant_{col}", doc, labels=["tenant"])
        for col, _, doc in _TENANT
    }
    quota = {
        limit: GaugeMetricFamily(
            name, f"The tenant's quota {limit} (absent: none).", labels=["tenant"]
        )
        for limit, name in _MAX_NAMES.items()
    }
    over = GaugeMetricFamily(
        "pgsched_tenant_quota_over",
        "1 when the quota holds the tenant's claims (at max_running or max_starts_per_hour, "
        "at or over compute_minutes or log_bytes), else 0.",
        labels=["tenant", "quota"],
    )
    for t in tenants:
        for col, limit, _ in _TENANT:
            used[col].add_metric([t["tenant"]], float(t[col] or 0))
            if t[limit] is not None:
                quota[limit].add_metric([t["tenant"]], float(t[limit]))
        for u in quota_use.uses(t):
            over.add_metric([t["tenant"], u.quota], 1.0 if u.holds else 0.0)
    out += [*used.values(), *quota.values(), over]

    paused = GaugeMetricFamily(
        "pgsched_queue_paused", "1 when the queue is paused, else 0.", labels=["tenant", "queue"]
    )
    max_running = GaugeMetricFamily(
        "pgsched_queue_max_running",
        "The queue's limit of executions at once, across every worker (absent: none).",
        labels=["tenant", "queue"],
    )
    waiting = GaugeMetricFamily(
        "pgsched_queue_waiting",
        "Ready executions of the queue that a limit or its pause holds back.",
        labels=["tenant", "queue"],
    )
    for q in queues:
        labels = [q["tenant"], q["name"]]
        paused.add_metric(labels, 1.0 if q["paused_at"] is not None else 0.0)
        if q["max_running"] is not None:
            max_running.add_metric(labels, float(q["max_running"]))
        waiting.add_metric(labels, float(q["waiting"]))
    return out + [paused, max_running, waiting]
