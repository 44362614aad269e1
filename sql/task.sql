-- Task definitions (pgsched.task).

-- name: task_insert :one
-- Create a task; with if_absent, an existing live task of that name is left alone and no
-- row is returned.
INSERT INTO pgsched.task (tenant, name, description, schedule_kind, schedule_expr, timezone,
                          schedule_anchor, handler_kind, command, argv, python_target, env, stdin,
                          run_as_user, params, timeout_seconds, max_attempts, retry_policy,
                          retry_base_seconds, retry_max_seconds, priority, queue, enabled,
                          next_fire_at, source, no_retry_exit_codes, no_retry_exceptions,
                          misfire_policy, idempotent, tags)
VALUES (%(tenant)s, %(name)s, %(description)s, %(schedule_kind)s, %(schedule_expr)s, %(timezone)s,
        %(schedule_anchor)s, %(handler_kind)s, %(command)s, %(argv)s, %(python_target)s, %(env)s,
        %(stdin)s, %(run_as_user)s, %(params)s, %(timeout_seconds)s, %(max_attempts)s,
        %(retry_policy)s, %(retry_base_seconds)s, %(retry_max_seconds)s, %(priority)s, %(queue)s,
        %(enabled)s, %(next_fire_at)s, %(source)s, %(no_retry_exit_codes)s, %(no_retry_exceptions)s,
        %(misfire_policy)s, %(idempotent)s, %(tags)s)
ON CONFLICT (tenant, name) WHERE deleted_at IS NULL DO NOTHING
RETURNING *

-- name: task_get :one
-- The live task as this session may see it: env and params masked for a viewer (task_v1,
-- migration 0031).
SELECT * FROM pgsched.task_v1(%(name)s, %(tenant)s)

-- name: task_list :many
-- Live tasks of a tenant, optionally only those whose name contains %(search)s; the tasks
-- of DAG nodes (DAG.NODE) only with %(dag_nodes)s (a DAG's own task is always listed).
-- env and params masked for a viewer (shown_v1, migration 0031).
SELECT s.*,
       (SELECT count(*) FROM pgsched.execution e WHERE e.task_id = t.id) AS live_executions
  FROM pgsched.task t CROSS JOIN LATERAL pgsched_internal.shown_v1(t, t.sensitive_params) s
 WHERE t.tenant = %(tenant)s AND t.deleted_at IS NULL
   AND (%(search)s::text IS NULL OR strpos(t.name, %(search)s::text) > 0)
   AND (%(dag_nodes)s OR t.handler_kind = 'dag' OR t.source IS NULL OR t.source NOT LIKE 'dag:%%')
 ORDER BY t.name
 LIMIT %(limit)s

-- name: task_pause :one
SELECT pgsched.pause_v1(%(name)s, %(tenant)s) AS done

-- name: task_resume :one
SELECT pgsched.resume_v1(%(name)s, %(tenant)s) AS done

-- name: task_trigger :one
-- One run of a task, and whether its idempotency key deduplicated it (enqueue_v2:
-- execution_id, deduplicated, dedup_reason, succeeded_execution_id).
SELECT execution_id, deduplicated, dedup_reason, succeeded_execution_id
  FROM pgsched.enqueue_v2(%(name)s, %(params)s, %(run_at)s, %(priority)s, %(idempotency_key)s,
                          %(tenant)s, %(trigger)s)

-- name: task_soft_delete :one
-- Soft-delete: the row stays for history and its name is free again. Waits for a tick that
-- holds the row; task_drop_pending then runs as a separate statement so that its snapshot
-- sees what that tick inserted.
-- FOR UPDATE waits for enqueues holding the row FOR KEY SHARE (0007), so that
-- task_drop_pending sees what they inserted.
WITH locked AS (
    SELECT id FROM pgsched.task
     WHERE tenant = %(tenant)s AND name = %(name)s AND deleted_at IS NULL
       FOR UPDATE
)
UPDATE pgsched.task t SET deleted_at = now(), enabled = false, next_fire_at = NULL, updated_at = now()
  FROM locked
 WHERE t.id = locked.id AND t.deleted_at IS NULL
RETURNING t.id

-- name: task_drop_pending :exec
DELETE FROM pgsched.execution WHERE task_id = %(id)s AND state = 'pending'

-- name: task_plan :exec binary
-- Set the next fire time of tasks (parallel arrays), when they last fired, and add the
-- fires they missed (misfire policy skip, or all beyond its cap).
UPDATE pgsched.task t
   SET next_fire_at = u.next_fire_at, last_fire_at = coalesce(u.fired_at, t.last_fire_at),
       missed_fires = t.missed_fires + u.missed
  FROM unnest(%(ids)s::bigint[], %(next_fire_at)s::timestamptz[], %(fired_at)s::timestamptz[],
              %(missed)s::bigint[])
       AS u(id, next_fire_at, fired_at, missed)
 WHERE t.id = u.id

-- name: task_disable :exec
-- Pause tasks whose schedule cannot be computed, each with its reason (parallel arrays
-- %(ids)s and %(reasons)s), shown by every face until it is resumed or fixed (0011).
UPDATE pgsched.task t
   SET enabled = false, next_fire_at = NULL, updated_at = now(),
       paused_at = now(), paused_by = 'scheduler', pause_reason = u.reason
  FROM unnest(%(ids)s::bigint[], %(reasons)s::text[]) AS u(id, reason)
 WHERE t.id = u.id

-- name: task_get_for_update :one
-- The live task, locked until the end of the transaction (a tick holding it is waited for).
SELECT * FROM pgsched.task
 WHERE tenant = %(tenant)s AND name = %(name)s AND deleted_at IS NULL
   FOR UPDATE

-- name: task_update :one
-- Replace a task's definition (tasks.update has validated it and planned next_fire_at;
-- enabled changes only when a fix resumes a task the scheduler paused).
UPDATE pgsched.task
   SET description = %(description)s, schedule_kind = %(schedule_kind)s,
       schedule_expr = %(schedule_expr)s, timezone = %(timezone)s,
       schedule_anchor = %(schedule_anchor)s, handler_kind = %(handler_kind)s,
       command = %(command)s, argv = %(argv)s, python_target = %(python_target)s, env = %(env)s,
       stdin = %(stdin)s, params = %(params)s, timeout_seconds = %(timeout_seconds)s,
       max_attempts = %(max_attempts)s, retry_policy = %(retry_policy)s,
       retry_base_seconds = %(retry_base_seconds)s, retry_max_seconds = %(retry_max_seconds)s,
       priority = %(priority)s, queue = %(queue)s, next_fire_at = %(next_fire_at)s,
       no_retry_exit_codes = %(no_retry_exit_codes)s, no_retry_exceptions = %(no_retry_exceptions)s,
       misfire_policy = %(misfire_policy)s, idempotent = %(idempotent)s, tags = %(tags)s,
       enabled = %(enabled)s, updated_at = now()
 WHERE id = %(id)s
RETURNING *

-- name: task_wake_scheduler :exec
-- Tell the scheduler a definition changed (delivered at commit).
SELECT pg_notify('pgsched_task', '')

-- name: task_by_source :many
-- Live tasks of a tenant imported from a file of this name (source 'NAME:LINE').
SELECT id, name, source FROM pgsched.task
 WHERE tenant = %(tenant)s AND deleted_at IS NULL AND source LIKE %(prefix)s ESCAPE '\'
 ORDER BY name

-- name: task_enqueue_many :many
-- One run per object of the JSON array params, one INSERT (enqueue_many_v2); ids in the
-- order given.
SELECT e AS execution_id
  FROM pgsched.enqueue_many_v2(%(name)s, %(params)s::jsonb, %(run_at)s, %(priority)s, %(tenant)s,
                               %(trigger)s) AS e

-- name: task_windows_set :one
-- A task's overlap policy and unique window (issue 18, items 5-6; migration 0022), beside
-- task_insert and task_update in their transaction. Making a task windowed marks its live
-- executions (trigger task_windowed), so the next fire counts them.
UPDATE pgsched.task
   SET overlap_policy = %(overlap_policy)s, unique_policy = %(unique_policy)s,
       unique_period_seconds = %(unique_period_seconds)s, unique_scope = %(unique_scope)s
 WHERE id = %(id)s
RETURNING *

-- name: task_limits_set :one
-- A task's limits (issue 18, items 3-4; migration 0021: held by the claim across every
-- worker), beside task_insert and task_update in their transaction; NULL is no limit.
UPDATE pgsched.task
   SET max_running = %(max_running)s, rate_limit = %(rate_limit)s,
       rate_period_seconds = %(rate_period_seconds)s, concurrency_key = %(concurrency_key)s,
       key_max_running = %(key_max_running)s, key_rate_limit = %(key_rate_limit)s,
       key_rate_period_seconds = %(key_rate_period_seconds)s
 WHERE id = %(id)s
RETURNING *

-- name: task_sandbox_set :one
-- A task's own sandbox settings (issue 19; migration 0032: its commands' limits over the
-- worker's, and network; 0035: where its Python handler runs), beside task_insert and
-- task_update in their transaction; NULL is the worker's.
UPDATE pgsched.task
   SET limit_cpu_seconds = %(limit_cpu_seconds)s, limit_memory_bytes = %(limit_memory_bytes)s,
       limit_nofile = %(limit_nofile)s, limit_nproc = %(limit_nproc)s,
       limit_fsize_bytes = %(limit_fsize_bytes)s, network = %(network)s,
       python_isolation = %(python_isolation)s
 WHERE id = %(id)s
RETURNING *

-- name: task_sandbox :many
-- The sandbox settings of tasks whose definitions a claim has just sent (migration 0032;
-- claims.TaskDefinitions), read once per definition read, not per claimed row: where their
-- Python handlers run (0035), and the user their crontab line names (run_as_user: an
-- isolating worker runs it as that user only when it allows it, pgsched/handlers/run_as.py).
SELECT id, limit_cpu_seconds, limit_memory_bytes, limit_nofile, limit_nproc,
       limit_fsize_bytes, network, python_isolation, run_as_user
  FROM pgsched.task WHERE id = ANY(%(ids)s::bigint[])
-- name: task_sensitive_set :one
-- The params keys a task marks sensitive (migration 0031: masked for viewers beside those
-- named like a secret), beside task_insert and task_update in their transaction.
UPDATE pgsched.task SET sensitive_params = %(sensitive_params)s WHERE id = %(id)s
RETURNING *
