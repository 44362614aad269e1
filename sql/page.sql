-- The admin pages' listings (pgsched/web/pages_*.py). Every one is scoped to a tenant;
-- the REST API's reads in web.sql serve the pages too where they fit.

-- name: page_task_choices :one
-- The queues and tags a tenant's live tasks use (the options of the task filters).
SELECT ARRAY(SELECT DISTINCT queue FROM pgsched.task
              WHERE tenant = %(tenant)s AND deleted_at IS NULL ORDER BY 1) AS queues,
       ARRAY(SELECT DISTINCT tag FROM pgsched.task, unnest(tags) AS tag
              WHERE tenant = %(tenant)s AND deleted_at IS NULL ORDER BY 1) AS tags

-- name: page_dlq_list :many
-- Dead executions of a tenant, newest id first, before the cursor %(before)s (an id),
-- optionally of one task (execution_history_dead_idx holds the dead rows).
SELECT h.id, t.name AS task_name, t.deleted_at IS NOT NULL AS task_deleted, h.trigger, h.scheduled_at,
       h.attempt, h.lost_attempts, h.finished_at, h.exit_code, h.error
  FROM pgsched.execution_history h
  JOIN pgsched.task t ON t.id = h.task_id
 WHERE h.state = 'dead' AND h.tenant = %(tenant)s
   AND (%(task)s::text IS NULL OR t.name = %(task)s::text)
   AND (%(before)s::bigint IS NULL OR h.id < %(before)s::bigint)
 ORDER BY h.id DESC
 LIMIT %(limit)s

-- name: page_dlq_count :one
-- Dead executions of a tenant's live tasks (of one task): what "retry all" would retry
-- (the same rows as api_dlq_count, read without locking them).
SELECT count(*)::integer AS dead
  FROM pgsched.execution_history h JOIN pgsched.task t ON t.id = h.task_id
 WHERE h.state = 'dead' AND h.tenant = %(tenant)s AND t.deleted_at IS NULL
   AND (%(task)s::text IS NULL OR t.name = %(task)s::text)

-- name: page_task_ids :one
-- The ids of a tenant's tasks called %(name)s (the live one and any deleted ones).
SELECT coalesce(array_agg(id), '{}') AS ids FROM pgsched.task WHERE tenant = %(tenant)s AND name = %(name)s

-- name: page_task_executions :many
-- Executions of tasks %(task_ids)s (ids, so that the planner sees how many rows each task
-- has: a task with few takes them from execution_history_task_idx, one with many walks
-- the id order), newest first, before the cursor %(before)s (an id), with the filters of
-- api_execution_list.
SELECT e.id, t.name AS task_name, e.state, e.trigger, e.scheduled_at, e.run_at, e.started_at,
       e.finished_at, e.attempt, e.max_attempts, e.exit_code, e.queue, e.priority, e.worker_id,
       extract(epoch FROM e.finished_at - e.started_at)::float8 AS duration_seconds
  FROM pgsched.execution_all e
  JOIN pgsched.task t ON t.id = e.task_id
 WHERE e.task_id = ANY(%(task_ids)s::bigint[]) AND e.tenant = %(tenant)s
   AND (%(state)s::text IS NULL OR e.state = %(state)s::text)
   AND (%(from)s::timestamptz IS NULL OR e.scheduled_at >= %(from)s::timestamptz)
   AND (%(to)s::timestamptz IS NULL OR e.scheduled_at < %(to)s::timestamptz)
   AND (%(worker)s::bigint IS NULL OR e.worker_id = %(worker)s::bigint)
   AND (%(before)s::bigint IS NULL OR e.id < %(before)s::bigint)
 ORDER BY e.id DESC
 LIMIT %(limit)s
