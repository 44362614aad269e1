-- Prometheus metrics (pgsched.metrics, GET /metrics), from the roll-up of 0006_observability.sql.

-- name: metrics_executions :many
-- All-time executions per (tenant, task, state) from the roll-up (the totals of final
-- hours plus the hourly rows not final yet), with retries and the latency/duration sums
-- and cumulative buckets.
SELECT x.tenant, t.name AS task, x.state, sum(x.executions)::bigint AS executions,
       sum(x.started)::bigint AS started, sum(x.retries)::bigint AS retries,
       sum(x.latency_sum)::float8 AS latency_sum, sum(x.duration_sum)::float8 AS duration_sum,
       pgsched_internal.stats_sum_v1(x.latency_le) AS latency_le, pgsched_internal.stats_sum_v1(x.duration_le) AS duration_le
  FROM (SELECT tenant, task_id, state, executions, started, retries, latency_sum, duration_sum,
               latency_le, duration_le FROM pgsched.stats_total
        UNION ALL
        SELECT tenant, task_id, state, executions, started, retries, latency_sum, duration_sum,
               latency_le, duration_le FROM pgsched.stats_hourly
         WHERE hour >= coalesce((SELECT dirty_from FROM pgsched.stats_rollup_state), '-infinity')) x
  JOIN pgsched.task t ON t.id = x.task_id
 WHERE %(tenant)s::text IS NULL OR x.tenant = %(tenant)s::text
 GROUP BY x.tenant, t.name, x.state

-- name: metrics_buckets :many
SELECT kind, bounds FROM pgsched.stats_bucket

-- name: metrics_gauges :many
-- Per tenant: live executions per queue (ready, scheduled later, running), the
-- dead-letter queue, fires never run, open alerts by kind.
SELECT 'queue' AS what, tenant, queue AS label,
       count(*) FILTER (WHERE state = 'pending' AND run_at <= now()) AS ready,
       count(*) FILTER (WHERE state = 'pending' AND run_at > now()) AS scheduled,
       count(*) FILTER (WHERE state = 'running') AS running
  FROM pgsched.execution WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s::text GROUP BY tenant, queue
UNION ALL
SELECT 'dead_letter', tenant, '', count(*), 0, 0
  FROM pgsched.execution_history
 WHERE state = 'dead' AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text) GROUP BY tenant
UNION ALL
SELECT 'missed_fires', tenant, '', sum(missed_fires)::bigint, 0, 0
  FROM pgsched.task WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s::text GROUP BY tenant
UNION ALL
SELECT 'alerts', tenant, kind, count(*), 0, 0
  FROM pgsched.alert
 WHERE resolved_at IS NULL AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text) GROUP BY tenant, kind

-- name: metrics_processes :many
-- Scheduler nodes seen in the last 30 s (is each the leader?) and running workers with
-- their heartbeat age in seconds.
SELECT 'scheduler' AS what, n.name,
       (n.role = 'leader' AND l.holder = n.name AND l.epoch = n.epoch)::int::float8 AS value
  FROM pgsched.scheduler_node n LEFT JOIN pgsched.leader l ON true
 WHERE n.role <> 'stopped' AND n.last_seen_at > now() - interval '30 seconds'
UNION ALL
SELECT 'worker', name || ' (' || id || ')', extract(epoch FROM now() - last_heartbeat_at)::float8
  FROM pgsched.worker WHERE state = 'running'
UNION ALL
SELECT 'leader_heartbeat', holder, extract(epoch FROM now() - heartbeat_at)::float8
  FROM pgsched.leader
UNION ALL
SELECT 'rollup', '', extract(epoch FROM now() - rolled_at)::float8 FROM pgsched.stats_rollup_state
UNION ALL
SELECT 'webhooks_pending', '', count(*)::float8 FROM pgsched.webhook_delivery
 WHERE delivered_at IS NULL AND gave_up_at IS NULL

-- name: metrics_task_limit :one
SELECT coalesce((pgsched_internal.setting_v1('metrics_task_limit'))::integer, 100) AS task_limit
