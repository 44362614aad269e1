-- Queue limits and tenant quotas (migrations 0021 and 0024; docs/limits.md). Changes go
-- through the public functions, which check whom the caller may act for; reads are the
-- caller's, under row-level security.

-- name: limits_queue_list :many
-- Each queue of %(tenant)s (NULL: every tenant the session sees) that has a row (limits, a
-- pause), work (pending or running executions) or a live worker serving it; %(name)s: only
-- that one (NULL: all). ready: pending and due; waiting: of those, the ones a limit holds
-- back (pgsched_internal.wait_reason_v1, asked once per task and key of the queue, since
-- every due row of one task and key is held by the same limits); workers: live workers
-- that serve it (a worker serving every tenant counts for each).
WITH live AS (
    SELECT w.queues, w.tenants FROM pgsched.worker w
     WHERE w.state = 'running'
       AND now() - w.last_heartbeat_at <= 3 * w.heartbeat_interval * interval '1 second'
), groups AS (
    SELECT e.tenant, e.queue, count(*) FILTER (WHERE e.state = 'running') AS running,
           count(*) FILTER (WHERE e.state = 'pending' AND e.run_at <= now()) AS ready,
           min(e.id) FILTER (WHERE e.state = 'pending' AND e.run_at <= now()) AS sample
      FROM pgsched.execution e
     WHERE (%(tenant)s::text IS NULL OR e.tenant = %(tenant)s::text)
       AND (%(name)s::text IS NULL OR e.queue = %(name)s::text)
     GROUP BY e.tenant, e.queue, e.task_id, e.concurrency_key
), work AS (
    SELECT g.tenant, g.queue AS name, sum(g.running)::bigint AS running, sum(g.ready)::bigint AS ready,
           sum(coalesce((SELECT g.ready FROM pgsched.execution x
                          WHERE x.id = g.sample AND pgsched_internal.wait_reason_v1(x) IS NOT NULL), 0))::bigint
               AS waiting
      FROM groups g
     GROUP BY g.tenant, g.queue
), names AS (
    SELECT q.tenant, q.name FROM pgsched.queue q
     WHERE (%(tenant)s::text IS NULL OR q.tenant = %(tenant)s::text)
    UNION
    SELECT w.tenant, w.name FROM work w
    UNION
    SELECT t.tenant, q.name
      FROM live l CROSS JOIN unnest(l.queues) AS q(name)
     CROSS JOIN unnest(coalesce(l.tenants, ARRAY[%(tenant)s::text])) AS t(tenant)
     WHERE t.tenant IS NOT NULL AND (%(tenant)s::text IS NULL OR t.tenant = %(tenant)s::text)
)
SELECT n.tenant, n.name, q.max_running, q.rate_limit, q.rate_period_seconds, q.paused_at, q.paused_by,
       q.pause_reason, coalesce(w.running, 0) AS running, coalesce(w.ready, 0) AS ready,
       coalesce(w.waiting, 0) AS waiting,
       (SELECT count(*) FROM live l
         WHERE n.name = ANY (l.queues) AND (l.tenants IS NULL OR n.tenant = ANY (l.tenants))) AS workers
  FROM names n
  LEFT JOIN pgsched.queue q ON q.tenant = n.tenant AND q.name = n.name
  LEFT JOIN work w ON w.tenant = n.tenant AND w.name = n.name
 WHERE %(name)s::text IS NULL OR n.name = %(name)s::text
 ORDER BY n.tenant, n.name

-- name: limits_queue_pause :one
-- Pause queue %(name)s of %(tenant)s (made if it has no row); paused_by: %(by)s if the
-- caller may name who acts, else its login (0024).
SELECT * FROM pgsched.queue_pause_v1(%(name)s::text, %(reason)s::text, %(tenant)s::text, %(by)s::text)

-- name: limits_queue_resume :one
SELECT * FROM pgsched.queue_resume_v1(%(name)s::text, %(tenant)s::text, %(by)s::text)

-- name: limits_queue_set_limits :one
-- NULL leaves a limit; a field named in %(clear)s becomes no limit.
SELECT * FROM pgsched.queue_set_limits_v1(%(name)s, %(max_running)s::integer, %(rate_limit)s::integer,
                                          %(rate_period_seconds)s::float8, %(clear)s::text[], %(tenant)s)

-- name: limits_tenant_quotas :one
-- A tenant's quotas beside what it uses now (tenant_usage_v1).
SELECT u.name AS tenant, u.max_running, u.running, u.max_starts_per_hour, u.hour_starts,
       u.max_compute_minutes_per_month, u.compute_minutes, u.max_log_bytes, u.log_bytes, u.weight,
       u.over, u.measured_at
  FROM pgsched.tenant_usage_v1(%(tenant)s) u

-- name: limits_tenant_set_quotas :one
-- NULL leaves a quota; a field named in %(clear)s becomes none. The installation's alone.
SELECT * FROM pgsched.tenant_set_quotas_v1(%(tenant)s, %(max_running)s::integer,
                                           %(max_starts_per_hour)s::integer,
                                           %(max_compute_minutes_per_month)s::bigint,
                                           %(max_log_bytes)s::bigint, %(weight)s::integer, %(clear)s::text[])

-- name: limits_tenants_at_quota :many
-- The tenants (of those the session sees) that a quota holds now: executions at once or
-- this hour's starts (UTC) at their quota, or over a slow quota (compute, log bytes). at:
-- which ('max_running', 'max_starts_per_hour', and the names in tenant_usage.over).
SELECT s.tenant, s.max_running, s.running, s.max_starts_per_hour, s.hour_starts, s.over,
       array_remove(ARRAY[CASE WHEN s.running >= s.max_running THEN 'max_running' END,
                          CASE WHEN s.hour_starts >= s.max_starts_per_hour THEN 'max_starts_per_hour' END],
                    NULL) || s.over AS at
  FROM (SELECT x.name AS tenant, x.max_running, x.max_starts_per_hour, coalesce(u.over, '{}') AS over,
               (SELECT count(*) FROM pgsched.execution e WHERE e.tenant = x.name AND e.state = 'running')
                   AS running,
               CASE WHEN u.hour_start = date_trunc('hour', now(), 'UTC') THEN u.hour_starts ELSE 0 END
                   AS hour_starts
          FROM pgsched.tenant x LEFT JOIN pgsched.tenant_usage u ON u.tenant = x.name
         -- every login reads the tenant map; only its own tenants' usage is its to see
         WHERE pgsched_internal.is_instance_v1()
            OR (SELECT pgsched_internal.session_tenant_v1()) IN (x.name, '*')) s
 WHERE s.running >= s.max_running OR s.hour_starts >= s.max_starts_per_hour OR s.over <> '{}'
 ORDER BY s.tenant

-- name: limits_paused_queues :many
-- The paused queues of every tenant the session sees, with their ready work (pending and
-- due), by tenant and name.
SELECT q.tenant, q.name, q.paused_at, q.paused_by, q.pause_reason,
       (SELECT count(*) FROM pgsched.execution e
         WHERE e.tenant = q.tenant AND e.queue = q.name AND e.state = 'pending' AND e.run_at <= now())
           AS ready
  FROM pgsched.queue q
 WHERE q.paused_at IS NOT NULL
 ORDER BY q.tenant, q.name

-- name: limits_wait_reasons :many
-- Why each pending execution of %(ids)s (of %(tenant)s) has not started, for those
-- something holds (pgsched_internal.pending_reason_v1: its backoff, its due time, a limit,
-- no worker serving its queue; the rest: no row). One statement for a listing.
SELECT e.id, r.reason
  FROM pgsched.execution e,
       LATERAL (SELECT pgsched_internal.pending_reason_v1(e) AS reason) r
 WHERE e.id = ANY (%(ids)s::bigint[]) AND e.tenant = %(tenant)s AND r.reason IS NOT NULL

-- name: limits_wait_reason :one
-- Why pending execution %(id)s of %(tenant)s has not started (pending_reason_v1; NULL:
-- nothing holds it: it is due, free, and a live worker serves its queue).
SELECT pgsched_internal.pending_reason_v1(e) AS reason
  FROM pgsched.execution e WHERE e.id = %(id)s AND e.tenant = %(tenant)s
