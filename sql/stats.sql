-- Dashboard numbers (pgsched.stats) and the hourly roll-up (0006_observability.sql).
-- Latency is started_at - run_at (from when an execution was due to when its last
-- attempt started); duration is finished_at - started_at. Seconds.

-- name: stats_rollup :one
-- Recompute the roll-up's open hours and fold old ones (stats_rollup_v1).
SELECT pgsched_internal.stats_rollup_v1(%(keep_hours)s) AS written

-- name: stats_snapshot :exec
-- The dashboard's queries read one snapshot, so that its numbers agree with each other.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY

-- name: stats_tasks :one
-- Tasks as the task list counts them: a DAG's node tasks (DAG.NODE) are part of their DAG,
-- not tasks of their own (task_list); their missed fires still count.
SELECT count(*) FILTER (WHERE deleted_at IS NULL AND enabled AND NOT node) AS active,
       count(*) FILTER (WHERE deleted_at IS NULL AND NOT enabled AND NOT node) AS paused,
       count(*) FILTER (WHERE deleted_at IS NOT NULL AND NOT node) AS deleted,
       coalesce(sum(missed_fires) FILTER (WHERE deleted_at IS NULL), 0)::bigint AS missed_fires
  FROM (SELECT *, handler_kind <> 'dag' AND coalesce(source LIKE 'dag:%%', false) AS node
          FROM pgsched.task WHERE tenant = %(tenant)s) t

-- name: stats_window :many
-- Executions of a tenant finished in [since, until) by state, from raw rows (a range
-- of execution_history_finished_idx).
SELECT state, count(*) AS executions
  FROM pgsched.execution_history
 WHERE tenant = %(tenant)s AND finished_at >= %(since)s AND finished_at < %(until)s
 GROUP BY state

-- name: stats_rollup_window :many
-- Executions of a tenant by state from the roll-up's hours in [since, until).
SELECT state, sum(executions)::bigint AS executions
  FROM pgsched.stats_hourly
 WHERE tenant = %(tenant)s AND hour >= %(since)s AND hour < %(until)s
 GROUP BY state

-- name: stats_rollup_boundary :one
-- The first hour the roll-up may still change (NULL before the first roll-up).
SELECT dirty_from, rolled_at FROM pgsched.stats_rollup_state

-- name: stats_percentiles :one
-- Exact p50/p95/p99 of latency and duration over the raw rows finished in [since, until)
-- that started (percentile_cont: linear interpolation between the closest ranks).
SELECT count(*) AS started,
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - run_at)::float8)
           AS latency,
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)::float8)
           AS duration
  FROM pgsched.execution_history
 WHERE tenant = %(tenant)s AND finished_at >= %(since)s AND finished_at < %(until)s
   AND started_at IS NOT NULL

-- name: stats_queues :many
-- Live executions of a tenant per queue: ready (due), scheduled later, running.
SELECT queue,
       count(*) FILTER (WHERE state = 'pending' AND run_at <= %(now)s) AS ready,
       count(*) FILTER (WHERE state = 'pending' AND run_at > %(now)s) AS scheduled,
       count(*) FILTER (WHERE state = 'running') AS running
  FROM pgsched.execution
 WHERE tenant = %(tenant)s
 GROUP BY queue
 ORDER BY queue

-- name: stats_dead_letter :one
SELECT count(*) AS dead FROM pgsched.execution_history WHERE state = 'dead' AND tenant = %(tenant)s

-- name: stats_cluster :one
-- Leader, standbys and workers (shared by every tenant), and the tenant's open alerts.
SELECT (SELECT holder FROM pgsched.leader) AS leader,
       (SELECT epoch FROM pgsched.leader) AS leader_epoch,
       (SELECT extract(epoch FROM %(now)s - heartbeat_at)::float8 FROM pgsched.leader) AS leader_heartbeat_age,
       (SELECT extract(epoch FROM %(now)s - last_tick_at)::float8 FROM pgsched.leader) AS leader_tick_age,
       (SELECT count(*) FROM pgsched.scheduler_node
         WHERE role = 'standby' AND last_seen_at > %(now)s - interval '30 seconds') AS standbys,
       (SELECT count(*) FROM pgsched.worker
         WHERE state = 'running'
           AND last_heartbeat_at > %(now)s - 3 * heartbeat_interval * interval '1 second') AS workers,
       (SELECT count(*) FROM pgsched.alert WHERE tenant = %(tenant)s AND resolved_at IS NULL) AS alerts_open

-- name: stats_task_hourly :many
-- One task's executions per hour of scheduled_at over [since, now] (task index): counts,
-- failures, and latency/duration average and p95 in seconds.
SELECT date_trunc('hour', scheduled_at) AS hour, count(*) AS executions,
       count(*) FILTER (WHERE state IN ('failed', 'timed_out', 'dead')) AS failures,
       avg(extract(epoch FROM started_at - run_at))::float8 AS latency_avg,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - run_at)::float8) AS latency_p95,
       avg(extract(epoch FROM finished_at - started_at))::float8 AS duration_avg,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)::float8) AS duration_p95
  FROM pgsched.execution_history
 WHERE task_id = %(task_id)s AND tenant = %(tenant)s AND scheduled_at >= %(since)s
 GROUP BY 1
 ORDER BY 1

-- name: stats_task_recent :many
-- One task's last %(limit)s finished executions, newest first (task index).
SELECT id, state, scheduled_at, started_at, finished_at,
       extract(epoch FROM started_at - run_at)::float8 AS latency,
       extract(epoch FROM finished_at - started_at)::float8 AS duration
  FROM pgsched.execution_history
 WHERE task_id = %(task_id)s AND tenant = %(tenant)s
 ORDER BY scheduled_at DESC
 LIMIT %(limit)s
