"""Prometheus metrics, read fresh from the database at scrape time (a custom collector)
and cached for a few seconds so that scrapes cannot load the database.

Served by the web app at ``/metrics`` through :func:`render`. The series of executions,
queues, dead letters, missed fires and alerts have a ``tenant`` label; those of the
processes (scheduler nodes, workers, the roll-up, webhooks) and of health (clock offsets,
old snapshots) span every tenant and are read only with ``installation`` (an instance
principal's scrape: every tenant's series too; a tenant's scrape gets its own tenant's
series alone). Counters and histograms come from the hourly roll-up
(``stats_hourly`` + ``stats_total``, see :mod:`pgsched.stats`), so they move when the
scheduler leader rolls up (each minute); gauges are live. Names, units and meanings are
listed in ``docs/observability.md``; the limits' gauges (quotas, paused and limited
queues) are :mod:`pgsched.metrics_limits`'s.

Cardinality: ``pgsched_executions_total`` has a series per task only for the
``metrics_task_limit`` setting's (default 100) tasks with the most executions of each
tenant; the others are summed under ``task="other"``. Histograms are per tenant only.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from . import health, metrics_limits
from .db import Database, Row

OTHER = "other"


def _histogram(
    name: str, doc: str, rows: Iterable[Row], bounds: list[float], kind: str
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["tenant"])
    by_tenant: dict[str, list[Any]] = {}
    for r in rows:
        acc = by_tenant.setdefault(r["tenant"], [[0] * len(bounds), 0, 0.0])
        for i, n in enumerate(r[f"{kind}_le"] or ()):
            acc[0][i] += n
        acc[1] += r["started"]
        acc[2] += r[f"{kind}_sum"]
    for tenant, (le, count, total) in sorted(by_tenant.items()):
        buckets = [(_bound(b), float(n)) for b, n in zip(bounds, le, strict=True)] + [
            ("+Inf", float(count))
        ]
        family.add_metric([tenant], buckets, sum_value=total)
    return family


def _bound(value: float) -> str:
    return repr(float(value))


def _top_tasks(rows: list[Row], limit: int) -> set[tuple[str, str]]:
    """(tenant, task) of the ``limit`` tasks with the most executions in each tenant."""
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        totals[(r["tenant"], r["task"])] += r["executions"]
    kept: set[tuple[str, str]] = set()
    per_tenant: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for (tenant, task), n in totals.items():
        per_tenant[tenant].append((-n, task))
    for tenant, ranked in per_tenant.items():
        kept.update((tenant, task) for _, task in sorted(ranked)[:limit])
    return kept


def families(db: Database, tenant: str | None = None, *, installation: bool = True) -> list[Metric]:
    """Every pgsched metric family, read now from ``db`` (all tenants when ``tenant`` is
    None); without ``installation``, none of those that span tenants (the processes and
    health)."""
    with db.transaction() as tx:
        tx.exec("stats_snapshot")
        executions = tx.many("metrics_executions", tenant=tenant)
        bounds = {r["kind"]: r["bounds"] for r in tx.many("metrics_buckets")}
        gauges = tx.many("metrics_gauges", tenant=tenant)
        processes = tx.many("metrics_processes") if installation else []
        limit_row = tx.one("metrics_task_limit")
        checked = health.check(tx) if installation else None
        quotas = tx.many("limits_web_tenant_usage", tenant=tenant)
        queues = tx.many("limits_queue_list", tenant=tenant, name=None)
    limit = int(limit_row["task_limit"]) if limit_row else 100

    out: list[Metric] = []
    total = CounterMetricFamily(
        "pgsched_executions",
        "Finished executions by task and final state "
        '(tasks beyond metrics_task_limit summed as task="other").',
        labels=["tenant", "task", "state"],
    )
    kept = _top_tasks(executions, limit)
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    retries: dict[str, int] = defaultdict(int)
    for r in executions:
        task = r["task"] if (r["tenant"], r["task"]) in kept else OTHER
        counts[(r["tenant"], task, r["state"])] += r["executions"]
        retries[r["tenant"]] += r["retries"]
    for labels, n in sorted(counts.items()):
        total.add_metric(list(labels), n)
    out.append(total)
    retry = CounterMetricFamily(
        "pgsched_retries", "Attempts after the first, of finished executions.", labels=["tenant"]
    )
    for t, n in sorted(retries.items()):
        retry.add_metric([t], n)
    out.append(retry)
    out.append(
        _histogram(
            "pgsched_schedule_to_start_seconds",
            "From when an execution was due (run_at) to when its last attempt started, seconds.",
            executions,
            bounds["latency"],
            "latency",
        )
    )
    out.append(
        _histogram(
            "pgsched_execution_duration_seconds",
            "From start to finish of an execution's last attempt, seconds.",
            executions,
            bounds["duration"],
            "duration",
        )
    )

    depth = GaugeMetricFamily(
        "pgsched_queue_depth",
        "Executions ready to run now (due, not claimed).",
        labels=["tenant", "queue"],
    )
    later = GaugeMetricFamily(
        "pgsched_queue_scheduled", "Pending executions due later.", labels=["tenant", "queue"]
    )
    running = GaugeMetricFamily(
        "pgsched_running", "Executions running now.", labels=["tenant", "queue"]
    )
    dead = GaugeMetricFamily(
        "pgsched_dead_letter_size", "Executions in the dead-letter queue.", labels=["tenant"]
    )
    missed = CounterMetricFamily(
        "pgsched_missed_schedules", "Fires that misfire policies did not run.", labels=["tenant"]
    )
    alerts = GaugeMetricFamily("pgsched_alerts_active", "Open alerts.", labels=["tenant", "kind"])
    for g in gauges:
        if g["what"] == "queue":
            depth.add_metric([g["tenant"], g["label"]], g["ready"])
            later.add_metric([g["tenant"], g["label"]], g["scheduled"])
            running.add_metric([g["tenant"], g["label"]], g["running"])
        elif g["what"] == "dead_letter":
            dead.add_metric([g["tenant"]], g["ready"])
        elif g["what"] == "missed_fires":
            missed.add_metric([g["tenant"]], g["ready"])
        else:
            alerts.add_metric([g["tenant"], g["label"]], g["ready"])
    out += [depth, later, running, dead, missed, alerts, *metrics_limits.families(quotas, queues)]
    if checked is None:
        return out

    leader = GaugeMetricFamily(
        "pgsched_leader", "1 for the scheduler node that leads, 0 for standbys.", labels=["node"]
    )
    beat = GaugeMetricFamily(
        "pgsched_worker_heartbeat_age_seconds",
        "Seconds since each running worker's last heartbeat.",
        labels=["worker"],
    )
    other = {
        "leader_heartbeat": GaugeMetricFamily(
            "pgsched_leader_heartbeat_age_seconds",
            "Seconds since the leader's last heartbeat.",
            labels=["node"],
        ),
        "rollup": GaugeMetricFamily(
            "pgsched_rollup_age_seconds", "Seconds since the statistics roll-up last ran."
        ),
        "webhooks_pending": GaugeMetricFamily(
            "pgsched_webhook_pending", "Webhook deliveries not yet delivered nor given up."
        ),
    }
    for p in processes:
        if p["what"] == "scheduler":
            leader.add_metric([p["name"]], p["value"])
        elif p["what"] == "worker":
            beat.add_metric([p["name"]], p["value"])
        elif p["what"] == "leader_heartbeat":
            other["leader_heartbeat"].add_metric([p["name"]], p["value"])
        else:
            other[p["what"]].add_metric([], p["value"])
    out += [leader, beat, *other.values()]
    return out + _health(checked)


def _health(h: health.Health) -> list[Metric]:
    """Clock offsets, the oldest snapshot and the warnings about them (:mod:`pgsched.health`)."""
    offset = GaugeMetricFamily(
        "pgsched_clock_offset_seconds",
        "Each live process's host clock minus the "
        "database's, seconds (reported, never corrected for).",
        labels=["process", "name"],
    )
    for c in h.clock_offsets:
        if c.offset_seconds is not None:
            offset.add_metric([c.kind, f"{c.name} ({c.id})"], c.offset_seconds)
    ages = [x.age_seconds for x in h.snapshot_holders if x.age_seconds is not None]
    oldest = h.oldest_snapshot
    holder = GaugeMetricFamily(
        "pgsched_oldest_snapshot_holder",
        "1 for what holds the oldest snapshot that "
        "holds back the cleanup of dead rows (absent when none).",
        labels=["kind", "pid", "application_name", "usename", "state"],
    )
    if oldest is not None:
        holder.add_metric(
            [
                oldest.kind,
                "" if oldest.pid is None else str(oldest.pid),
                oldest.application_name or "",
                oldest.usename or "",
                oldest.state or "",
            ],
            1,
        )
    warnings = GaugeMetricFamily(
        "pgsched_health_warnings",
        "Warnings now, by kind (clock_offset, old_snapshot).",
        labels=["kind"],
    )
    for kind in ("clock_offset", "old_snapshot"):
        warnings.add_metric([kind], sum(1 for w in h.warnings if w["kind"] == kind))
    return [
        offset,
        GaugeMetricFamily(
            "pgsched_clock_offset_warn_seconds",
            "Clock offset above which a process is warned "
            "about (setting clock_offset_warn_seconds).",
            value=h.clock_offset_warn_seconds,
        ),
        GaugeMetricFamily(
            "pgsched_oldest_snapshot_age_seconds",
            "Seconds the longest-held snapshot holding back "
            "the cleanup of dead rows has been held (0 when none).",
            value=max(ages, default=0.0),
        ),
        GaugeMetricFamily(
            "pgsched_oldest_snapshot_xid_age",
            "Transactions begun since the oldest horizon held "
            "back (sessions, prepared transactions, replication slots; 0 when none).",
            value=oldest.xid_age if oldest else 0,
        ),
        GaugeMetricFamily(
            "pgsched_snapshot_age_warn_seconds",
            "Snapshot age above which it is warned about (setting snapshot_age_warn_seconds).",
            value=h.snapshot_age_warn_seconds,
        ),
        holder,
        warnings,
    ]


class DatabaseCollector(Collector):
    """A prometheus-client collector over ``db``: each ``collect()`` returns the families
    read at most ``ttl`` seconds ago (one reader at a time; others wait and share)."""

    def __init__(
        self, db: Database, tenant: str | None = None, ttl: float = 5.0, installation: bool = True
    ):
        self.db = db
        self.tenant = tenant
        self.ttl = ttl
        self.installation = installation
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._cached: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if time.monotonic() - self._read_at >= self.ttl:
                self._cached = families(self.db, self.tenant, installation=self.installation)
                self._read_at = time.monotonic()
            cached = self._cached
        yield from cached


_registries: weakref.WeakKeyDictionary[
    Database, dict[tuple[str | None, bool], CollectorRegistry]
] = weakref.WeakKeyDictionary()
_registries_lock = threading.Lock()


def registry(
    db: Database, tenant: str | None = None, ttl: float = 5.0, installation: bool = True
) -> CollectorRegistry:
    """The registry (one per database, tenant and ``installation``, made once) that holds
    a :class:`DatabaseCollector`."""
    key = (tenant, installation)
    with _registries_lock:
        per_db = _registries.setdefault(db, {})
        if key not in per_db:
            reg = CollectorRegistry(auto_describe=False)
            reg.register(DatabaseCollector(db, tenant, ttl, installation))
            per_db[key] = reg
        return per_db[key]


def render(
    db: Database, tenant: str | None = None, *, installation: bool = True
) -> tuple[bytes, str]:
    """The Prometheus text exposition of pgsched's metrics for ``tenant`` (None: every
    tenant; ``installation``: with the processes and health, which span tenants) and its
    content type, for ``/metrics``. Raises pgsched errors from the database (the web layer
    answers 503)."""
    return generate_latest(registry(db, tenant, installation=installation)), CONTENT_TYPE_LATEST
