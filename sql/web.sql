-- name: api_token_insert :one
INSERT INTO pgsched.api_token (tenant, role, name, token_sha256)
VALUES (%(tenant)s, %(role)s, %(name)s, %(token_sha256)s)
RETURNING id, tenant, role, name, created_at

-- name: api_token_list :many
-- Every token of a tenant (all tenants when tenant is NULL), newest first.
SELECT id, tenant, role, name, created_at, last_used_at, revoked_at
  FROM pgsched.api_token
 WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s
 ORDER BY id DESC

-- name: api_token_revoke :one
-- Revoke a token (idempotent: a revoked token keeps its first revocation time).
UPDATE pgsched.api_token SET revoked_at = coalesce(revoked_at, now())
 WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
RETURNING id, tenant, role, name, created_at, last_used_at, revoked_at

-- name: api_token_revoke_named :exec
-- Revoke the live tokens of a tenant with a given name (pgsched dev replaces its own).
UPDATE pgsched.api_token SET revoked_at = now()
 WHERE tenant = %(tenant)s AND name = %(name)s AND revoked_at IS NULL

-- name: api_token_authenticate :one
-- The live token with this hash; its last use is recorded at most once a minute so that
-- reads do not write on every request.
WITH hit AS (
    SELECT id, tenant, role, name, last_used_at FROM pgsched.api_token
     WHERE token_sha256 = %(token_sha256)s AND revoked_at IS NULL
), touch AS (
    UPDATE pgsched.api_token t SET last_used_at = now()
      FROM hit
     WHERE t.id = hit.id AND (hit.last_used_at IS NULL OR hit.last_used_at < now() - interval '1 minute')
)
SELECT id, tenant, role, name FROM hit

-- name: api_token_live :one
-- A live token by id (a session signed in with a token stays valid while the token is);
-- db_now is the clock its session's expiry is judged by.
SELECT id, tenant, role, name, now() AS db_now FROM pgsched.api_token WHERE id = %(id)s AND revoked_at IS NULL

-- name: web_user_insert :one
INSERT INTO pgsched.web_user (username, tenant, role, password_hash)
VALUES (%(username)s, %(tenant)s, %(role)s, %(password_hash)s)
ON CONFLICT (username) DO NOTHING
RETURNING username, tenant, role, created_at

-- name: web_user_get :one
-- db_now: the clock a session's expiry is judged by.
SELECT username, tenant, role, password_hash, created_at, now() AS db_now FROM pgsched.web_user
 WHERE username = %(username)s

-- name: web_user_rehash :exec
-- Store a password hash made with newer argon2 parameters.
UPDATE pgsched.web_user SET password_hash = %(password_hash)s, updated_at = now() WHERE username = %(username)s

-- name: web_key_ensure :one
-- The key called name, stored first as the given value if there is none yet. When another
-- process stored one meanwhile this returns no row; ask again with web_key_get.
WITH added AS (
    INSERT INTO pgsched.web_key (name, value) VALUES (%(name)s, %(value)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING value
)
SELECT value FROM added
UNION ALL
SELECT value FROM pgsched.web_key WHERE name = %(name)s

-- name: web_key_get :one
SELECT value FROM pgsched.web_key WHERE name = %(name)s

-- The REST API's reads (/api/v1/). Every one is scoped to the caller's tenant.

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
SELECT l.pid, pg_terminate_backend(l.pid) AS ended
  FROM pg_locks l
 WHERE l.locktype = 'advisory' AND l.granted
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND ((l.classid::bigint << 32) | l.objid::bigint) = %(key)s

-- name: web_user_list :many
SELECT username, tenant, role, created_at, updated_at FROM pgsched.web_user
 WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s
 ORDER BY username

-- name: web_user_delete :one
-- Remove a user; their sessions end at their next request (each request looks them up).
DELETE FROM pgsched.web_user WHERE username = %(username)s RETURNING username
