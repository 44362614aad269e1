-- Alerts (pgsched.alerts; the webhook outbox is webhook.sql); 0006_observability.sql.
-- Thresholds: a task's row in task_alerting, else the global settings passed in.

-- name: alert_lock :one
-- One detection at a time (two leaders for a moment, or a manual run beside the leader).
-- The key comes from the secret seed (internal_key_v1, 0027): no tenant's login can hold it.
SELECT pg_try_advisory_xact_lock(pgsched_internal.internal_key_v1('alert')) AS locked

-- name: alert_since :one
-- When the last detection ran (late starts after it are looked at).
SELECT checked_at FROM pgsched.alert_state

-- name: alert_checked :exec
INSERT INTO pgsched.alert_state (singleton, checked_at) VALUES (true, %(now)s)
ON CONFLICT (singleton) DO UPDATE SET checked_at = EXCLUDED.checked_at

-- name: alert_missed :many
-- Missed schedules. A task misses one when (overdue) its next fire is more than its
-- threshold past and the scheduler has not made it, (waiting) a fire made by the
-- scheduler has waited longer than that without starting, (late) a fire started later
-- than that since the last detection, or (misfired) the misfire policy did not run a
-- fire since the last detection. Opens one alert per task (queueing its on_missed
-- webhook in this statement) and resolves open ones whose task has no such fire now and
-- has started a fire on time since the alert opened, or is paused, deleted or
-- unscheduled. Returns what it opened and resolved.
WITH overdue AS (
    SELECT t.id AS task_id, jsonb_build_object('reason', 'overdue', 'due_at', t.next_fire_at) AS why
      FROM pgsched.task t LEFT JOIN pgsched.task_alerting a ON a.task_id = t.id
     WHERE t.enabled AND t.deleted_at IS NULL AND t.next_fire_at IS NOT NULL
       AND t.next_fire_at < %(now)s - make_interval(secs => %(least_missed_after)s)  -- task_next_fire_idx
       AND t.next_fire_at < %(now)s - make_interval(secs => coalesce(a.missed_after_seconds, %(missed_after)s))
), waiting AS (
    SELECT e.task_id, jsonb_build_object('reason', 'waiting', 'execution_id', min(e.id), 'due_at', min(e.run_at),
                                         'waiting', count(*)) AS why
      FROM pgsched.execution e LEFT JOIN pgsched.task_alerting a ON a.task_id = e.task_id
     WHERE e.state = 'pending' AND e.trigger = 'schedule'
       AND e.run_at < %(now)s - make_interval(secs => coalesce(a.missed_after_seconds, %(missed_after)s))
     GROUP BY e.task_id
), late AS (
    SELECT x.task_id, jsonb_build_object('reason', 'late', 'execution_id', max(x.id),
                                         'late_seconds', max(extract(epoch FROM x.started_at - x.run_at))) AS why
      FROM (SELECT id, task_id, trigger, run_at, started_at FROM pgsched.execution
             WHERE state = 'running' AND started_at > %(since)s
            UNION ALL
            SELECT id, task_id, trigger, run_at, started_at FROM pgsched.execution_history
             WHERE finished_at > %(since)s AND started_at > %(since)s) x
      LEFT JOIN pgsched.task_alerting a ON a.task_id = x.task_id
     WHERE x.trigger = 'schedule'
       AND x.started_at - x.run_at > make_interval(secs => coalesce(a.missed_after_seconds, %(missed_after)s))
     GROUP BY x.task_id
), misfired AS (
    SELECT t.id AS task_id,
           jsonb_build_object('reason', 'misfired', 'fires_not_run', t.missed_fires - t.missed_fires_seen) AS why
      FROM pgsched.task t
     WHERE t.missed_fires <> t.missed_fires_seen AND t.deleted_at IS NULL  -- task_missed_unseen_idx
), missed AS (
    SELECT m.task_id, jsonb_agg(m.why) AS reasons
      FROM (SELECT * FROM overdue UNION ALL SELECT * FROM waiting
            UNION ALL SELECT * FROM late UNION ALL SELECT * FROM misfired) m
     GROUP BY m.task_id
), cfg AS (
    -- the tasks this statement looks at: those missing a fire now and those with an open alert
    SELECT t.id AS task_id, t.tenant, t.name, t.enabled, t.deleted_at, t.schedule_kind,
           make_interval(secs => coalesce(a.missed_after_seconds, %(missed_after)s)) AS grace
      FROM pgsched.task t LEFT JOIN pgsched.task_alerting a ON a.task_id = t.id
     WHERE t.id IN (SELECT task_id FROM missed
                    UNION SELECT task_id FROM pgsched.alert WHERE kind = 'missed_schedule' AND resolved_at IS NULL)
), opened AS (
    INSERT INTO pgsched.alert (tenant, task_id, kind, opened_at, details)
    SELECT c.tenant, m.task_id, 'missed_schedule', %(now)s,
           jsonb_build_object('task', c.name, 'reasons', m.reasons,
                              'threshold_seconds', extract(epoch FROM c.grace))
      FROM missed m JOIN cfg c ON c.task_id = m.task_id
    ON CONFLICT (task_id, kind) WHERE resolved_at IS NULL DO NOTHING
    RETURNING id, tenant, task_id, kind, opened_at, details
), hooks AS (
    INSERT INTO pgsched.webhook_delivery (tenant, task_id, event, url, payload, next_attempt_at)
    SELECT o.tenant, o.task_id, 'missed_schedule', a.on_missed,
           jsonb_build_object('event', 'missed_schedule', 'alert_id', o.id, 'tenant', o.tenant,
                              'task', o.details->'task', 'opened_at', o.opened_at, 'details', o.details),
           %(now)s
      FROM opened o JOIN pgsched.task_alerting a ON a.task_id = o.task_id AND a.on_missed IS NOT NULL
    RETURNING id
), resolved AS (
    UPDATE pgsched.alert al SET resolved_at = %(now)s
      FROM cfg c
     WHERE al.kind = 'missed_schedule' AND al.resolved_at IS NULL AND c.task_id = al.task_id
       AND NOT EXISTS (SELECT 1 FROM missed m WHERE m.task_id = al.task_id)
       AND (NOT c.enabled OR c.deleted_at IS NOT NULL OR c.schedule_kind = 'none'
            OR EXISTS (SELECT 1 FROM pgsched.execution e
                        WHERE e.task_id = al.task_id AND e.trigger = 'schedule' AND e.state = 'running'
                          AND e.run_at >= al.opened_at - c.grace AND e.started_at - e.run_at <= c.grace)
            OR EXISTS (SELECT 1 FROM pgsched.execution_history h
                        WHERE h.task_id = al.task_id AND h.scheduled_at >= al.opened_at - c.grace  -- task index
                          AND h.trigger = 'schedule' AND h.started_at - h.run_at <= c.grace))
    RETURNING al.id, al.tenant, al.task_id, al.kind, al.opened_at, al.details
)
SELECT 'opened' AS change, o.*, (SELECT count(*) FROM hooks) AS webhooks FROM opened o
UNION ALL
SELECT 'resolved', r.*, 0 FROM resolved r

-- name: alert_seen_misfires :exec
-- The missed fires counted so far have been looked at.
UPDATE pgsched.task SET missed_fires_seen = missed_fires WHERE missed_fires <> missed_fires_seen

-- name: alert_failure_rate :many
-- Failure-rate alerts: a task whose failures (failed, timed_out, dead) over its window are
-- more than its rate of failures + successes, with at least its minimum of them. Opens
-- one alert per task (queueing its on_failure webhook in this statement) and resolves
-- open ones whose task's rate fell to resolve_fraction of its threshold. Returns what it
-- opened and resolved.
WITH rates AS (
    SELECT h.task_id, min(h.tenant) AS tenant,
           count(*) FILTER (WHERE h.state IN ('failed', 'timed_out', 'dead')) AS failures,
           count(*) FILTER (WHERE h.state IN ('succeeded', 'failed', 'timed_out', 'dead')) AS judged,
           min(coalesce(a.failure_rate, %(rate)s)) AS rate,
           min(coalesce(a.failure_min_executions, %(min_executions)s)) AS min_executions,
           min(coalesce(a.failure_window_seconds, %(window)s)) AS window_seconds
      FROM pgsched.execution_history h
      LEFT JOIN pgsched.task_alerting a ON a.task_id = h.task_id
     WHERE h.finished_at >= %(now)s - make_interval(secs => %(widest_window)s)  -- finished index
       AND h.finished_at >= %(now)s - make_interval(secs => coalesce(a.failure_window_seconds, %(window)s))
       AND h.finished_at <= %(now)s
     GROUP BY h.task_id
), firing AS (
    SELECT r.*, t.name FROM rates r JOIN pgsched.task t ON t.id = r.task_id AND t.deleted_at IS NULL
     WHERE r.judged >= r.min_executions AND r.failures::float8 / r.judged > r.rate
), opened AS (
    INSERT INTO pgsched.alert (tenant, task_id, kind, opened_at, details)
    SELECT f.tenant, f.task_id, 'failure_rate', %(now)s,
           jsonb_build_object('task', f.name, 'failures', f.failures, 'executions', f.judged,
                              'failure_rate', round((f.failures::numeric / f.judged), 4),
                              'threshold', f.rate, 'window_seconds', f.window_seconds)
      FROM firing f
    ON CONFLICT (task_id, kind) WHERE resolved_at IS NULL DO NOTHING
    RETURNING id, tenant, task_id, kind, opened_at, details
), hooks AS (
    INSERT INTO pgsched.webhook_delivery (tenant, task_id, event, url, payload, next_attempt_at)
    SELECT o.tenant, o.task_id, 'failure_rate', a.on_failure,
           jsonb_build_object('event', 'failure_rate', 'alert_id', o.id, 'tenant', o.tenant,
                              'task', o.details->'task', 'opened_at', o.opened_at, 'details', o.details),
           %(now)s
      FROM opened o JOIN pgsched.task_alerting a ON a.task_id = o.task_id AND a.on_failure IS NOT NULL
    RETURNING id
), resolved AS (
    -- resolved only once the rate is at most resolve_fraction of the threshold: a rate
    -- hovering at the threshold would otherwise open and resolve (and send) every minute
    UPDATE pgsched.alert al SET resolved_at = %(now)s
     WHERE al.kind = 'failure_rate' AND al.resolved_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM rates r JOIN pgsched.task t ON t.id = r.task_id AND t.deleted_at IS NULL
                        WHERE r.task_id = al.task_id AND r.judged >= r.min_executions
                          AND r.failures::float8 / r.judged > r.rate * %(resolve_fraction)s)
    RETURNING al.id, al.tenant, al.task_id, al.kind, al.opened_at, al.details
)
SELECT 'opened' AS change, o.*, (SELECT count(*) FROM hooks) AS webhooks FROM opened o
UNION ALL
SELECT 'resolved', r.*, 0 FROM resolved r

-- name: alert_widest :one
-- The least missed-schedule threshold and the widest failure window over every task's
-- overrides and the global values (index-friendly bounds for the queries above).
SELECT least(min(missed_after_seconds), %(missed_after)s)::float8 AS least_missed_after,
       greatest(max(failure_window_seconds), %(window)s)::float8 AS widest_window
  FROM pgsched.task_alerting

-- name: alert_list :many
-- Alerts of a tenant, open ones first, newest first; %(open_only)s leaves resolved out.
-- A quota alert (0025) is the tenant's: no task.
SELECT al.id, al.task_id, t.name AS task_name, al.kind, al.opened_at, al.resolved_at, al.details
  FROM pgsched.alert al LEFT JOIN pgsched.task t ON t.id = al.task_id
 WHERE al.tenant = %(tenant)s AND (NOT %(open_only)s OR al.resolved_at IS NULL)
 ORDER BY al.resolved_at IS NULL DESC, al.opened_at DESC, al.id DESC
 LIMIT %(limit)s

-- name: alert_task_get :one
SELECT * FROM pgsched.task_alerting WHERE task_id = %(task_id)s

-- name: alert_task_put :one
-- A task's webhooks and threshold overrides, replaced whole (alerts.configure merged them).
INSERT INTO pgsched.task_alerting (task_id, on_failure, on_dlq, on_missed, missed_after_seconds,
                                   failure_rate, failure_window_seconds, failure_min_executions)
VALUES (%(task_id)s, %(on_failure)s, %(on_dlq)s, %(on_missed)s, %(missed_after_seconds)s,
        %(failure_rate)s, %(failure_window_seconds)s, %(failure_min_executions)s)
ON CONFLICT (task_id) DO UPDATE
   SET on_failure = EXCLUDED.on_failure, on_dlq = EXCLUDED.on_dlq, on_missed = EXCLUDED.on_missed,
       missed_after_seconds = EXCLUDED.missed_after_seconds, failure_rate = EXCLUDED.failure_rate,
       failure_window_seconds = EXCLUDED.failure_window_seconds,
       failure_min_executions = EXCLUDED.failure_min_executions, updated_at = now()
RETURNING *
