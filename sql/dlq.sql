-- The dead-letter queue: executions in history in state 'dead' (docs/reliability.md).

-- name: dlq_list :many
-- Dead executions of a tenant, newest first, optionally of one task.
SELECT h.id, t.name AS task_name, h.trigger, h.scheduled_at, h.attempt, h.lost_attempts,
       h.finished_at, h.exit_code, h.error
  FROM pgsched.execution_history h
  JOIN pgsched.task t ON t.id = h.task_id
 WHERE h.state = 'dead' AND h.tenant = %(tenant)s
   AND (%(task)s::text IS NULL OR t.name = %(task)s::text)
 ORDER BY h.finished_at DESC, h.id DESC
 LIMIT %(limit)s

-- name: dlq_retry :one
SELECT pgsched.dlq_retry_v1(%(id)s, %(tenant)s) AS id

-- name: dlq_retry_all :one
SELECT pgsched.dlq_retry_all_v1(%(task)s, %(tenant)s) AS retried

-- name: dlq_purge :one
SELECT pgsched.dlq_purge_v1(make_interval(secs => %(seconds)s), %(tenant)s) AS purged
