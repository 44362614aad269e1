-- The REST API's reads and writes (/api/v1/). Every one is scoped to the caller's tenant.

-- name: api_task_list :many
-- Live tasks of a tenant by name, after the cursor %(after)s (a name), with filters: name
-- contains %(name)s, has tag %(tag)s, state 'active' or 'paused', queue. DAG nodes' tasks
-- are left out (the DAG's own task is listed), as in `pgsched task list`.
SELECT t.id, t.name, t.description, t.schedule_kind, t.schedule_expr, t.timezone, t.handler_kind,
       t.queue, t.priority, t.tags, t.enabled, CASE WHEN t.enabled THEN 'active' ELSE 'paused' END AS state,
       t.next_fire_at, t.last_fire_at, t.created_at, t.updated_at, t.paused_at, t.paused_by, t.pause_reason
  FROM pgsched.task t
 WHERE t.tenant = %(tenant)s AND t.deleted_at IS NULL
   AND (%(name)s::text IS NULL OR strpos(t.name, %(name)s::text) > 0)
   AND (%(tag)s::text IS NULL OR t.tags @> ARRAY[%(tag)s::text])
   AND (%(state)s::text IS NULL OR t.enabled = (%(state)s::text = 'active'))
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s::text)
   AND (%(after)s::text IS NULL OR t.name > %(after)s::text)
   AND (t.handler_kind = 'dag' OR t.source IS NULL OR t.source NOT LIKE 'dag:%%')
 ORDER BY t.name
 LIMIT %(limit)s

-- name: api_execution_list :many
-- Executions of a tenant, newest first, before the cursor %(before)s (an id), with filters:
-- task name, state, scheduled in [%(from)s, %(to)s), worker id.
SELECT e.id, t.name AS task_name, e.state, e.trigger, e.scheduled_at, e.run_at, e.started_at,
       e.finished_at, e.attempt, e.max_attempts, e.exit_code, e.queue, e.priority, e.worker_id,
       extract(epoch FROM e.finished_at - e.started_at)::float8 AS duration_seconds
  FROM pgsched.execution_all e
  JOIN pgsched.task t ON t.id = e.task_id
 WHERE e.tenant = %(tenant)s
   AND (%(task)s::text IS NULL OR t.name = %(task)s::text)
   AND (%(state)s::text IS NULL OR e.state = %(state)s::text)
   AND (%(from)s::timestamptz IS NULL OR e.scheduled_at >= %(from)s::timestamptz)
   AND (%(to)s::timestamptz IS NULL OR e.scheduled_at < %(to)s::timestamptz)
   AND (%(worker)s::bigint IS NULL OR e.worker_id = %(worker)s::bigint)
   AND (%(before)s::bigint IS NULL OR e.id < %(before)s::bigint)
 ORDER BY e.id DESC
 LIMIT %(limit)s

-- name: api_dag_run_list :many
-- DAG runs of a tenant, newest first, before the cursor %(before)s (an id), optionally of
-- one DAG and in one state.
SELECT r.id, d.name AS dag_name, r.state, r.trigger, r.scheduled_at, r.created_at, r.finished_at,
       r.rerun_of, r.nodes, r.remaining
  FROM pgsched.dag_run r JOIN pgsched.dag d ON d.id = r.dag_id
 WHERE r.tenant = %(tenant)s
   AND (%(dag)s::text IS NULL OR d.name = %(dag)s::text)
   AND (%(state)s::text IS NULL OR r.state = %(state)s::text)
   AND (%(before)s::bigint IS NULL OR r.id < %(before)s::bigint)
 ORDER BY r.id DESC
 LIMIT %(limit)s

-- name: api_dlq_count :one
-- Dead executions of a tenant (of one task), locked until the transaction ends so that a
-- retry-all acts on exactly the rows counted.
SELECT count(*)::integer AS dead FROM (
    SELECT h.id FROM pgsched.execution_history h JOIN pgsched.task t ON t.id = h.task_id
     WHERE h.state = 'dead' AND h.tenant = %(tenant)s AND t.deleted_at IS NULL
       AND (%(task)s::text IS NULL OR t.name = %(task)s::text)
       FOR UPDATE OF h) s

-- name: api_dlq_delete :one
-- Remove one dead execution from history (its attempts and log stay until retention).
DELETE FROM pgsched.execution_history
 WHERE id = %(id)s AND tenant = %(tenant)s AND state = 'dead'
RETURNING id

-- name: api_scheduler_failover :many
-- End the session holding the leader's advisory lock: the leader notices before its next
-- tick and stops acting, and a standby takes the lock (within about a second).
-- pg_locks lists every database's locks: only this database's leader lock counts.
-- Who holds it: leader_sessions_v1 (0027; the key itself is the installation's secret).
SELECT l.pid, pg_terminate_backend(l.pid) AS ended
  FROM pgsched_internal.leader_sessions_v1() AS l(pid)
