-- Worker processes (pgsched.worker).

-- name: worker_register :one
-- %(host_time)s: this host's wall-clock estimate of when the statement reaches the server
-- (pgsched.clock.ClockProbe); the difference to the server's clock is the clock offset.
-- %(tenants)s: the tenants it serves, NULL for every tenant (migration 0020).
INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, heartbeat_interval,
                            clock_offset_seconds, clock_round_trip_seconds)
VALUES (%(name)s, %(hostname)s, %(pid)s, %(queues)s, %(tenants)s::text[], %(concurrency)s, %(heartbeat_interval)s,
        extract(epoch FROM %(host_time)s::timestamptz - statement_timestamp())::float8,
        %(round_trip)s)
RETURNING id, now() AS now

-- name: worker_heartbeat :one
-- One heartbeat: alive is false when this worker was declared dead (its executions were
-- rescued); cancel_ids are its running executions whose cancel was asked (a NOTIFY may
-- have been missed while the listener reconnected). It also measures this host's clock
-- offset from the database (host - database, seconds; reported, never corrected for):
-- %(host_time)s is the host's estimate of when the statement reaches the server, and
-- %(round_trip)s the round trip the estimate was made from (pgsched.clock.ClockProbe).
-- now is the database's clock, which the worker records times by (DatabaseClock).
-- %(held)s: the ids of every execution the worker holds (buffered, running, or having its
-- end written); the rescue takes back one it holds but leaves out of two reports in a row
-- (migration 0015). lost_ids: those of %(held)s no longer held by it (rescued meanwhile, or
-- finished or retried by its own writes since the set was composed).
WITH beat AS (
    UPDATE pgsched.worker
       SET last_heartbeat_at = now(), running = %(running)s,
           held = %(held)s::bigint[], held_prev_at = held_at, held_at = now(),
           clock_offset_seconds = extract(epoch FROM %(host_time)s::timestamptz - statement_timestamp())::float8,
           clock_round_trip_seconds = %(round_trip)s
     WHERE id = %(id)s AND state = 'running'
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM beat) AS alive,
       ARRAY(SELECT e.id FROM pgsched.execution e
              WHERE e.worker_id = %(id)s AND e.state = 'running' AND e.cancel_requested_at IS NOT NULL)
           AS cancel_ids,
       ARRAY(SELECT h FROM unnest(%(held)s::bigint[]) AS h
              WHERE NOT EXISTS (SELECT 1 FROM pgsched.execution e
                                 WHERE e.id = h AND e.worker_id = %(id)s AND e.state = 'running'))
           AS lost_ids,
       now() AS now

-- name: worker_claimer_stalled :exec
-- The worker's heartbeat found its claimer stalled for %(seconds)s seconds (it has not gone
-- round its loop: pgsched.liveness), or going round again (%(seconds)s NULL). Sent only when
-- that changes, on the heartbeat's connection (migration 0016).
UPDATE pgsched.worker
   SET claimer_stalled_since = now() - make_interval(secs => %(seconds)s::float8)
 WHERE id = %(id)s

-- name: worker_stop :exec
UPDATE pgsched.worker SET state = 'stopped', stopped_at = now(), running = 0 WHERE id = %(id)s

-- name: worker_list :many
-- tenants: those the worker serves, NULL for every tenant.
SELECT id, name, hostname, pid, queues, tenants, concurrency, state, running, started_at,
       last_heartbeat_at, stopped_at, clock_offset_seconds, clock_round_trip_seconds,
       extract(epoch FROM now() - last_heartbeat_at)::float8 AS heartbeat_age_seconds,
       claimer_stalled_since, extract(epoch FROM now() - claimer_stalled_since)::float8 AS claimer_stalled_seconds,
       state = 'running' AND now() - last_heartbeat_at > 3 * heartbeat_interval * interval '1 second'
           AS presumed_dead
  FROM pgsched.worker
 WHERE %(all)s OR state = 'running'
 ORDER BY id

-- name: worker_listen :exec
-- Wake-ups: one NOTIFY per statement that inserts executions (execution_inserted trigger,
-- migration 0009).
LISTEN pgsched_execution

-- name: worker_listen_cancel :exec
-- Cancel requests (cancel_v1): the payload is the execution id.
LISTEN pgsched_cancel

-- name: worker_start_proof :one
-- A slot that cannot show a fresh heartbeat (the worker was frozen, or waited long on the
-- database, after it took the execution off its buffer) proves the start here, in one
-- statement, right before it starts: alive is whether the worker row is running, held
-- whether it still holds execution %(id)s under %(lease_id)s; when both, its heartbeat is
-- renewed (last_heartbeat_at = now()), so its lease holds from this statement on for the
-- dead-worker limit. A rescue that declares the worker dead locks its row first: this waits
-- for it and then sees the worker dead, or goes first and the rescue then sees the fresh
-- heartbeat.
WITH beat AS (
    UPDATE pgsched.worker w
       SET last_heartbeat_at = now()
     WHERE w.id = %(worker_id)s AND w.state = 'running'
       AND EXISTS (SELECT 1 FROM pgsched.execution e
                    WHERE e.id = %(id)s AND e.lease_id = %(lease_id)s AND e.state = 'running'
                      AND e.worker_id = %(worker_id)s)
    RETURNING w.id
)
SELECT EXISTS (SELECT 1 FROM beat) AS held,
       EXISTS (SELECT 1 FROM pgsched.worker w WHERE w.id = %(worker_id)s AND w.state = 'running') AS alive,
       now() AS now
