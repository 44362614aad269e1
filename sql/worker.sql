-- Worker processes (pgsched.worker).

-- name: worker_register :one
INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency, heartbeat_interval)
VALUES (%(name)s, %(hostname)s, %(pid)s, %(queues)s, %(concurrency)s, %(heartbeat_interval)s)
RETURNING id

-- name: worker_heartbeat :exec
UPDATE pgsched.worker SET last_heartbeat_at = now(), running = %(running)s
 WHERE id = %(id)s AND state = 'running'

-- name: worker_stop :exec
UPDATE pgsched.worker SET state = 'stopped', stopped_at = now(), running = 0 WHERE id = %(id)s

-- name: worker_list :many
SELECT id, name, hostname, pid, queues, concurrency, state, running, started_at,
       last_heartbeat_at, stopped_at,
       extract(epoch FROM now() - last_heartbeat_at)::float8 AS heartbeat_age_seconds,
       state = 'running' AND now() - last_heartbeat_at > 3 * heartbeat_interval * interval '1 second'
           AS presumed_dead
  FROM pgsched.worker
 WHERE %(all)s OR state = 'running'
 ORDER BY id

-- name: worker_listen :exec
-- Wake-ups: one NOTIFY per statement that inserts executions (execution_notify trigger).
LISTEN pgsched_execution
