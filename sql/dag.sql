-- DAGs: definitions (dag, dag_node, their tasks) and runs (dag_run, dag_node_run).

-- name: dag_lock :exec
-- Serialise applies of one DAG name (a first apply has no row to lock yet), under a key
-- of the caller's own tenant that no login computes (dag_lock_v1, 0027).
SELECT pgsched_internal.dag_lock_v1(%(tenant)s, %(name)s)

-- name: dag_lock_schedule_task :exec
-- An apply or a delete locks the DAG's schedule task first, as a tick does (it locks the
-- task, then starts a run: dag_start_v1 holds the dag row FOR SHARE): taken in the other
-- order, a tick firing the DAG and an apply of it deadlocked. Nothing for a new DAG.
SELECT 1 FROM pgsched.task t JOIN pgsched.dag d ON d.task_id = t.id
 WHERE d.tenant = %(tenant)s AND d.name = %(name)s AND d.deleted_at IS NULL
   FOR UPDATE OF t

-- name: dag_lock_row :exec
-- An apply holds its DAG's row: runs start (FOR SHARE) before or after it, never during.
SELECT 1 FROM pgsched.dag WHERE id = %(id)s FOR UPDATE

-- name: dag_get :one
-- A live DAG with its schedule and paused state (from its task of kind 'dag'), as stored (an
-- apply compares it with the file; dag_shown masks it for a viewer).
SELECT d.*, t.schedule_kind, t.schedule_expr, t.timezone, t.schedule_anchor, t.enabled,
       t.next_fire_at, t.last_fire_at, t.misfire_policy,
       (SELECT count(*) FROM pgsched.dag_node n WHERE n.dag_id = d.id) AS node_count
  FROM pgsched.dag d JOIN pgsched.task t ON t.id = d.task_id
 WHERE d.tenant = %(tenant)s AND d.name = %(name)s AND d.deleted_at IS NULL

-- name: dag_shown :one
-- dag_get as this session may see it: the DAG's params and its nodes' env and params (in
-- its definition) masked for a viewer (shown_v1, migration 0031).
SELECT s.*, t.schedule_kind, t.schedule_expr, t.timezone, t.schedule_anchor, t.enabled,
       t.next_fire_at, t.last_fire_at, t.misfire_policy,
       (SELECT count(*) FROM pgsched.dag_node n WHERE n.dag_id = d.id) AS node_count
  FROM pgsched.dag d JOIN pgsched.task t ON t.id = d.task_id
 CROSS JOIN LATERAL pgsched_internal.shown_v1(d) s
 WHERE d.tenant = %(tenant)s AND d.name = %(name)s AND d.deleted_at IS NULL

-- name: dag_insert :one
INSERT INTO pgsched.dag (tenant, name, description, failure_policy, params, task_id, definition, source)
VALUES (%(tenant)s, %(name)s, %(description)s, %(failure_policy)s, %(params)s, %(task_id)s,
        %(definition)s, %(source)s)
RETURNING *

-- name: dag_update :one
UPDATE pgsched.dag
   SET description = %(description)s, failure_policy = %(failure_policy)s, params = %(params)s,
       definition = %(definition)s, source = %(source)s, version = version + 1, updated_at = now()
 WHERE id = %(id)s
RETURNING *

-- name: dag_task_insert :one
-- The task of kind 'dag' that carries a DAG's schedule.
INSERT INTO pgsched.task (tenant, name, description, schedule_kind, schedule_expr, timezone,
                          schedule_anchor, handler_kind, next_fire_at, source)
VALUES (%(tenant)s, %(name)s, %(description)s, %(schedule_kind)s, %(schedule_expr)s, %(timezone)s,
        %(schedule_anchor)s, 'dag', %(next_fire_at)s, %(source)s)
ON CONFLICT (tenant, name) WHERE deleted_at IS NULL DO NOTHING
RETURNING *

-- name: dag_task_update :exec
UPDATE pgsched.task
   SET description = %(description)s, schedule_kind = %(schedule_kind)s, schedule_expr = %(schedule_expr)s,
       timezone = %(timezone)s, schedule_anchor = %(schedule_anchor)s, next_fire_at = %(next_fire_at)s,
       updated_at = now()
 WHERE id = %(id)s

-- name: dag_nodes :many
-- A DAG's nodes in file order, with their tasks' names.
SELECT n.*, t.name AS task_name, t.handler_kind, t.command, t.argv, t.python_target, t.timeout_seconds,
       t.max_attempts, t.retry_policy, t.queue
  FROM pgsched.dag_node n JOIN pgsched.task t ON t.id = n.task_id
 WHERE n.dag_id = %(dag_id)s
 ORDER BY n.position

-- name: dag_nodes_shown :many
-- dag_nodes as this session may see them: each node's env and params (in its definition)
-- masked for a viewer (shown_v1, migration 0031).
SELECT s.*, t.name AS task_name, t.handler_kind, t.command, t.argv, t.python_target, t.timeout_seconds,
       t.max_attempts, t.retry_policy, t.queue
  FROM pgsched.dag_node n JOIN pgsched.task t ON t.id = n.task_id
 CROSS JOIN LATERAL pgsched_internal.shown_v1(n) s
 WHERE n.dag_id = %(dag_id)s
 ORDER BY n.position

-- name: dag_nodes_replace :exec
-- Store a DAG's nodes (parallel arrays) in one statement; nodes not given are removed.
WITH given AS (
    SELECT * FROM unnest(%(node_id)s::text[], %(position)s::int[], %(task_id)s::bigint[],
                         %(trigger_rule)s::text[], %(condition)s::jsonb[], %(upstream)s::jsonb[],
                         %(downstream)s::jsonb[], %(definition)s::jsonb[])
           AS g(node_id, position, task_id, trigger_rule, condition, upstream, downstream, definition)
), gone AS (
    DELETE FROM pgsched.dag_node n
     WHERE n.dag_id = %(dag_id)s AND n.node_id <> ALL(%(node_id)s::text[])
)
INSERT INTO pgsched.dag_node (dag_id, node_id, position, task_id, trigger_rule, condition, upstream,
                              downstream, definition)
SELECT %(dag_id)s, g.node_id, g.position, g.task_id, g.trigger_rule, g.condition,
       -- the lists arrive as JSON arrays (a 2-D array cannot be ragged)
       ARRAY(SELECT jsonb_array_elements_text(g.upstream)), ARRAY(SELECT jsonb_array_elements_text(g.downstream)),
       g.definition
  FROM given g
ON CONFLICT (dag_id, node_id) DO UPDATE
   SET position = EXCLUDED.position, task_id = EXCLUDED.task_id, trigger_rule = EXCLUDED.trigger_rule,
       condition = EXCLUDED.condition, upstream = EXCLUDED.upstream, downstream = EXCLUDED.downstream,
       definition = EXCLUDED.definition

-- name: dag_tasks_by_name :many
-- Live tasks of a tenant with these names (a DAG's node tasks, or tasks in their way).
SELECT id, name, source, handler_kind FROM pgsched.task
 WHERE tenant = %(tenant)s AND name = ANY(%(names)s::text[]) AND deleted_at IS NULL

-- name: dag_tasks_soft_delete :exec
-- Remove tasks of nodes no longer in the DAG (runs in flight still finish them).
UPDATE pgsched.task SET deleted_at = now(), enabled = false, next_fire_at = NULL, updated_at = now()
 WHERE id = ANY(%(ids)s::bigint[]) AND deleted_at IS NULL

-- name: dag_list :many
-- Live DAGs of a tenant with schedule, node count and their last run.
SELECT d.id, d.name, d.description, d.failure_policy, d.version, t.schedule_kind, t.schedule_expr,
       t.timezone, t.enabled, t.next_fire_at,
       (SELECT count(*) FROM pgsched.dag_node n WHERE n.dag_id = d.id) AS node_count,
       lr.id AS last_run_id, lr.state AS last_run_state, lr.created_at AS last_run_at
  FROM pgsched.dag d JOIN pgsched.task t ON t.id = d.task_id
  LEFT JOIN LATERAL (SELECT r.id, r.state, r.created_at FROM pgsched.dag_run r WHERE r.dag_id = d.id
                      ORDER BY r.id DESC LIMIT 1) lr ON true
 WHERE d.tenant = %(tenant)s AND d.deleted_at IS NULL
 ORDER BY d.name
 LIMIT %(limit)s

-- name: dag_soft_delete :one
UPDATE pgsched.dag SET deleted_at = now(), updated_at = now()
 WHERE tenant = %(tenant)s AND name = %(name)s AND deleted_at IS NULL
RETURNING id, task_id

-- name: dag_trigger :one
SELECT pgsched.dag_trigger_v1(%(name)s, %(params)s, %(tenant)s) AS run_id

-- name: dag_cancel :one
SELECT pgsched.dag_cancel_v1(%(run_id)s, %(tenant)s) AS outcome

-- name: dag_rerun :one
SELECT pgsched.dag_rerun_v1(%(run_id)s, %(from_node)s, %(failed_only)s, %(tenant)s) AS run_id

-- name: dag_runs :many
-- Runs of a DAG, newest first, with counts of nodes by state.
SELECT r.id, r.state, r.trigger, r.scheduled_at, r.created_at, r.finished_at, r.rerun_of, r.nodes,
       r.remaining, extract(epoch FROM coalesce(r.finished_at, now()) - r.created_at)::float8 AS duration_seconds,
       (SELECT jsonb_object_agg(s.state, s.n) FROM (SELECT n.state, count(*) AS n FROM pgsched.dag_node_run n
                                                     WHERE n.run_id = r.id GROUP BY n.state) s) AS node_states
  FROM pgsched.dag_run r JOIN pgsched.dag d ON d.id = r.dag_id
 WHERE d.tenant = %(tenant)s AND d.name = %(name)s AND d.deleted_at IS NULL
   AND (%(state)s::text IS NULL OR r.state = %(state)s::text)
 ORDER BY r.id DESC
 LIMIT %(limit)s

-- name: dag_run_get :one
-- params masked for a viewer (shown_v1, migration 0031).
SELECT s.*, d.name AS dag_name,
       extract(epoch FROM coalesce(r.finished_at, now()) - r.created_at)::float8 AS duration_seconds
  FROM pgsched.dag_run r JOIN pgsched.dag d ON d.id = r.dag_id
 CROSS JOIN LATERAL pgsched_internal.shown_v1(r) s
 WHERE r.id = %(run_id)s AND r.tenant = %(tenant)s

-- name: dag_run_nodes :many
-- A run's nodes in file order. A queued node whose execution a worker holds shows as running.
SELECT n.node_id, n.position, n.upstream, n.downstream, n.trigger_rule, n.condition,
       CASE WHEN n.state = 'queued' AND e.state = 'running' THEN 'running' ELSE n.state END AS state,
       n.execution_id, n.result, n.error, n.queued_at, coalesce(n.started_at, e.started_at) AS started_at,
       n.finished_at, n.kept, coalesce(e.attempt, h.attempt) AS attempt,
       extract(epoch FROM n.finished_at - coalesce(n.started_at, e.started_at))::float8 AS duration_seconds
  FROM pgsched.dag_node_run n
  LEFT JOIN pgsched.execution e ON e.id = n.execution_id
  LEFT JOIN LATERAL (SELECT x.attempt FROM pgsched.execution_history x WHERE x.id = n.execution_id
                      LIMIT 1) h ON n.state NOT IN ('waiting', 'queued')
 WHERE n.run_id = %(run_id)s
 ORDER BY n.position
