-- The scheduler's tick: due tasks, executions for their fires, leadership.

-- name: scheduler_due_groups :many
-- The front of task_next_fire_idx: due tasks, locked for this tick (a concurrent tick skips
-- them instead of waiting), one row per schedule and due time they share, so that the tick
-- computes fire times once per group. The ids come as the text of a bigint[] and go back
-- as such to scheduler_fire: psycopg adapts a list element by element in Python, which
-- took a burst's tick 27 ms per 1,000 tasks (more than the database's work on them).
-- names: the first few task names of the group (by id), for the log. windowed: some of
-- the group have an overlap policy or a unique window (scheduler_fire_windowed fires them).
WITH due AS (
    SELECT id, name, schedule_kind, schedule_expr, timezone, schedule_anchor, next_fire_at,
           misfire_policy, handler_kind, windowed
      FROM pgsched.task
     WHERE enabled AND deleted_at IS NULL AND next_fire_at IS NOT NULL
       AND next_fire_at <= %(now)s
     ORDER BY next_fire_at
     LIMIT %(limit)s
       -- NO KEY: an enqueue of the task holds its row FOR KEY SHARE (the execution's foreign
       -- key) until its transaction ends, and FOR UPDATE passed such a task over, tick after
       -- tick (tests/db/test_tick_beside_enqueue.py); the tick changes no key of the row, and
       -- an edit or a delete (FOR UPDATE) still waits for it
       FOR NO KEY UPDATE SKIP LOCKED
)
SELECT schedule_kind, schedule_expr, timezone, schedule_anchor, next_fire_at, misfire_policy,
       count(*) AS tasks, array_agg(id ORDER BY id)::text AS ids,
       (array_agg(name ORDER BY id))[1:%(names)s::int] AS names,
       bool_or(handler_kind = 'dag') AS dags,
       bool_or(windowed) AS windowed
  FROM due
 GROUP BY schedule_kind, schedule_expr, timezone, schedule_anchor, next_fire_at, misfire_policy
 ORDER BY next_fire_at

-- name: scheduler_task_names :many
-- Names of the tasks of a group (the text of a bigint[], as scheduler_due_groups gives it).
SELECT id, name FROM pgsched.task WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id

-- name: scheduler_unplanned_tasks :many
-- Enabled scheduled tasks without a next fire time (just created or resumed).
SELECT id, tenant, name, schedule_kind, schedule_expr, timezone, schedule_anchor, next_fire_at,
       misfire_policy, last_fire_at
  FROM pgsched.task
 WHERE enabled AND deleted_at IS NULL AND next_fire_at IS NULL AND schedule_kind <> 'none'
   AND (schedule_kind <> 'once' OR last_fire_at IS NULL)
 LIMIT %(limit)s
   FOR NO KEY UPDATE SKIP LOCKED  -- as scheduler_due_groups

-- name: scheduler_fire :exec
-- A batch of fires in one statement: one execution per (task, fire time), per group of
-- tasks (scheduler_due_groups; %(ids)s: each group's task ids as the text of a bigint[]);
-- the fire times to run as pairs (%(run_group)s: the group's 1-based position,
-- %(run_at)s). Never a fire at or before the task's last_fire_at: those instants were
-- dealt with already (run, or counted as missed), even if their executions have long left
-- this table; the statement trigger refuses such a row from any INSERT (migration 0010),
-- and this statement does not send one. The unique (task_id, scheduled_at) makes a
-- second insert of the same live fire a no-op, whoever sends it. Runs before
-- scheduler_advance moves last_fire_at on. DAGs' tasks start DAG runs instead
-- (scheduler_fire_dags), and tasks with an overlap policy or a unique window are fired one
-- by one under their windows (scheduler_fire_windowed).
WITH member AS (
    SELECT g.n, x.id
      FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS g(ids, n)
     CROSS JOIN LATERAL unnest(g.ids::bigint[]) AS x(id)
)
INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, trigger, priority, queue,
                               params, max_attempts, leader_epoch, idempotency_key)
SELECT t.tenant, t.id, r.fire_at, r.fire_at, 'schedule', t.priority, t.queue, t.params,
       t.max_attempts, %(epoch)s,
       CASE WHEN t.idempotent THEN pgsched_internal.derived_key_v1(t.id, t.params, r.fire_at) END
  FROM unnest(%(run_group)s::bigint[], %(run_at)s::timestamptz[]) AS r(n, fire_at)
  JOIN member m ON m.n = r.n
  JOIN pgsched.task t ON t.id = m.id
 WHERE t.handler_kind <> 'dag' AND NOT t.windowed
   AND (t.last_fire_at IS NULL OR r.fire_at > t.last_fire_at)
ON CONFLICT DO NOTHING

-- name: scheduler_fire_windowed :one
-- The fires of scheduler_fire's batch (same parameters) whose tasks have an overlap policy
-- or a unique window (task.windowed, migration 0022): each, in order of task and fire
-- time, is made or recorded as a skipped execution saying why (fire_windowed_v2). made:
-- the executions made; fires: how many fires there were; busy: the tasks whose window lock
-- an enqueue held (never waited for, 0027), busy_fires their fires, none of them made or
-- recorded: scheduler_advance leaves these tasks due, for a later tick. The rest of the
-- fires were recorded skipped.
WITH member AS (
    SELECT g.n, x.id
      FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS g(ids, n)
     CROSS JOIN LATERAL unnest(g.ids::bigint[]) AS x(id)
), fires AS (
    SELECT t.id, r.fire_at
      FROM unnest(%(run_group)s::bigint[], %(run_at)s::timestamptz[]) AS r(n, fire_at)
      JOIN member m ON m.n = r.n
      JOIN pgsched.task t ON t.id = m.id
     WHERE t.windowed AND t.handler_kind <> 'dag'
), fired AS MATERIALIZED (  -- once: (w).made and (w).busy must not call it twice
    SELECT pgsched_internal.fire_windowed_v2(array_agg(id ORDER BY id, fire_at),
                                             array_agg(fire_at ORDER BY id, fire_at), %(epoch)s) AS w,
           count(*) AS fires
      FROM fires
)
SELECT (f.w).made, (f.w).busy, f.fires,
       (SELECT count(*) FROM fires x WHERE x.id = ANY((f.w).busy)) AS busy_fires
  FROM fired f

-- name: scheduler_advance :exec
-- After a batch's fires (scheduler_fire, scheduler_fire_dags): each task's next fire time
-- and its last_fire_at (the latest due fire the tick dealt with, run or missed; it never
-- moves back, migration 0010), and the fires it missed, per group as parallel arrays
-- (%(ids)s as in scheduler_fire). Not the tasks in %(busy)s (scheduler_fire_windowed: their
-- window lock was busy, nothing of theirs was fired): they stay due for the next tick.
UPDATE pgsched.task t
   SET next_fire_at = g.next_fire_at,
       last_fire_at = greatest(t.last_fire_at, g.fired_at),
       missed_fires = t.missed_fires + g.missed
  FROM unnest(%(ids)s::text[], %(next_fire_at)s::timestamptz[], %(fired_at)s::timestamptz[],
              %(missed)s::bigint[]) AS g(ids, next_fire_at, fired_at, missed)
 CROSS JOIN LATERAL unnest(g.ids::bigint[]) AS x(id)
 WHERE t.id = x.id AND x.id <> ALL(%(busy)s::bigint[])

-- name: scheduler_fire_dags :many
-- Fires of DAGs' tasks (kind 'dag') start DAG runs, one per (DAG, fire time) whoever sends
-- it (dag_start_v1 returns NULL for a fire already started), and never one at or before
-- the task's last_fire_at (as scheduler_fire).
SELECT d.name, f.fire_at, pgsched_internal.dag_start_v1(d.id, 'schedule', f.fire_at, NULL, %(epoch)s) AS run_id
  FROM unnest(%(ids)s::bigint[], %(fire_at)s::timestamptz[]) AS f(id, fire_at)
  JOIN pgsched.dag d ON d.task_id = f.id AND d.deleted_at IS NULL
  JOIN pgsched.task t ON t.id = f.id
 WHERE t.last_fire_at IS NULL OR f.fire_at > t.last_fire_at

-- name: scheduler_dag_sweep :one
-- Cancel live executions of DAG runs that are stopping (dag_sweep_v1).
SELECT pgsched_internal.dag_sweep_v1() AS cancelled

-- name: scheduler_next_due :one
-- When the earliest enabled task is due (the first entry of task_next_fire_idx), and in
-- how many seconds from the database's now() (negative when overdue; NULL when none is
-- planned).
SELECT min(next_fire_at) AS next_fire_at, extract(epoch FROM min(next_fire_at) - now())::float8 AS seconds
  FROM pgsched.task
 WHERE enabled AND deleted_at IS NULL AND next_fire_at IS NOT NULL

-- name: scheduler_next_due_except :one
-- scheduler_next_due but for the tasks in %(busy)s (the last tick left them due: their
-- window lock was busy), which the leader tries again at its own pace, not at once.
SELECT extract(epoch FROM min(next_fire_at) - now())::float8 AS seconds
  FROM pgsched.task
 WHERE enabled AND deleted_at IS NULL AND next_fire_at IS NOT NULL
   AND id <> ALL(%(busy)s::bigint[])

-- name: scheduler_try_lock :one
-- Leadership: a session-level advisory lock on the leader's dedicated connection, under a
-- key from the secret seed (internal_key_v1, 0027: the installation's logins alone).
SELECT pg_try_advisory_lock(pgsched_internal.internal_key_v1('leader')) AS acquired

-- name: scheduler_internal_key :one
-- The key of one of pgsched's own advisory locks, from the secret seed (internal_key_v1,
-- 0027): the installation's logins alone may ask.
SELECT pgsched_internal.internal_key_v1(%(purpose)s) AS key

-- name: scheduler_elect :one
-- Record a new term for the leader that just took the lock.
INSERT INTO pgsched.leader (singleton, epoch, holder, elected_at, heartbeat_at)
VALUES (true, 1, %(holder)s, now(), now())
ON CONFLICT (singleton) DO UPDATE
   SET epoch = pgsched.leader.epoch + 1, holder = EXCLUDED.holder, elected_at = now(),
       last_tick_at = NULL, heartbeat_at = now()
RETURNING epoch

-- name: scheduler_record_tick :exec
UPDATE pgsched.leader SET last_tick_at = now() WHERE epoch = %(epoch)s

-- name: scheduler_leader :one
SELECT epoch, holder, elected_at, last_tick_at, heartbeat_at,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_seconds,
       EXISTS (SELECT 1 FROM pgsched_internal.leader_sessions_v1()) AS lock_held
  FROM pgsched.leader

-- name: scheduler_listen :exec
-- Task definitions changed (created, paused, resumed, deleted): tick now.
LISTEN pgsched_task

-- name: scheduler_ping :one
-- The leader's check of its lock connection before each tick, which also reads the clock
-- the tick decides by: the database's.
SELECT now() AS now

-- name: scheduler_settings :many
SELECT name, value FROM pgsched.setting

-- name: scheduler_rescue :many
-- Declare silent workers dead and requeue what they ran (rescue_v1).
SELECT execution_id, worker_id, outcome FROM pgsched_internal.rescue_v1()

-- name: scheduler_rescue_drop_deleted :many
-- Of the executions the rescue just put back as never claimed (%(ids)s: outcome
-- 'unclaimed'), drop those whose task was deleted meanwhile, as execution_unclaim does for
-- a worker's own hand-back: a delete drops only pending executions, and one held unstarted
-- by a dead worker was not pending then. Run in the rescue's transaction (the rows are still
-- locked: no worker claims them first). The task row is held FOR KEY SHARE, so a delete in
-- progress (FOR UPDATE) is waited for and seen here, or waits for this and then drops these
-- itself (task_drop_pending). A DAG node's is kept, as execution_unclaim keeps it: its run
-- in flight needs it. Returns the ids dropped.
WITH held AS (
    SELECT e.id, t.deleted_at IS NOT NULL AND e.dag_run_id IS NULL AS gone
      FROM pgsched.execution e
      JOIN pgsched.task t ON t.id = e.task_id
     WHERE e.id = ANY(%(ids)s::bigint[]) AND e.state = 'pending'
       FOR UPDATE OF e FOR KEY SHARE OF t
)
DELETE FROM pgsched.execution e USING held h WHERE e.id = h.id AND h.gone
RETURNING e.id

-- name: scheduler_node_register :one
INSERT INTO pgsched.scheduler_node (name, hostname, pid) VALUES (%(name)s, %(hostname)s, %(pid)s)
RETURNING id

-- name: scheduler_node_seen :exec
-- A scheduler process is alive in a role (leader with its term, or standby), and its host's
-- clock offset from the database (as worker_heartbeat measures it).
UPDATE pgsched.scheduler_node
   SET role = %(role)s, epoch = %(epoch)s, last_seen_at = now(),
       clock_offset_seconds = extract(epoch FROM %(host_time)s::timestamptz - statement_timestamp())::float8,
       clock_round_trip_seconds = %(round_trip)s
 WHERE id = %(id)s

-- name: scheduler_node_stop :exec
UPDATE pgsched.scheduler_node SET role = 'stopped', stopped_at = now() WHERE id = %(id)s

-- name: scheduler_standbys :many
-- Scheduler processes seen in the last %(seconds)s seconds that do not lead.
SELECT id, name, hostname, pid, started_at, last_seen_at, clock_offset_seconds, clock_round_trip_seconds,
       extract(epoch FROM now() - last_seen_at)::float8 AS seen_seconds_ago
  FROM pgsched.scheduler_node
 WHERE role = 'standby' AND last_seen_at > now() - make_interval(secs => %(seconds)s)
 ORDER BY id

-- name: scheduler_rescue_grace :one
-- Seconds a new leader waits before declaring workers dead: as long as the slowest running
-- worker may stay silent. Workers could not heartbeat while the database was unreachable
-- (the usual reason a leader is new), so they get one full window to be heard again.
SELECT coalesce(max(heartbeat_interval), 0) * (pgsched_internal.setting_v1('worker_dead_after_heartbeats'))::float8
       AS seconds
  FROM pgsched.worker WHERE state = 'running'

-- name: scheduler_leader_heartbeat :one
-- The leader is alive (its heartbeat thread); no row when another term has begun.
UPDATE pgsched.leader SET heartbeat_at = now() WHERE epoch = %(epoch)s RETURNING epoch

-- name: scheduler_end_stale_leader :many
-- A standby's check: when the leader has not heartbeated for %(seconds)s seconds although
-- its lock is held, end the session holding the lock (pg_terminate_backend), so that the
-- lock is free. The hung process finds its session gone when it wakes, and stops acting.
SELECT l.pid, ld.holder, ld.epoch,
       extract(epoch FROM now() - ld.heartbeat_at)::float8 AS silent_seconds,
       pg_terminate_backend(l.pid) AS ended
  FROM pgsched.leader ld
 CROSS JOIN pgsched_internal.leader_sessions_v1() AS l(pid)
 WHERE ld.heartbeat_at < now() - make_interval(secs => %(seconds)s)
   AND l.pid <> pg_backend_pid()

-- name: scheduler_term_share :exec
-- The first statement of every transaction that creates or requeues anything under a term
-- (a tick's batch, a rescue): a transaction-level shared advisory lock on the term key,
-- held to its commit. An election takes that key exclusively (scheduler_fence_take) before
-- it records a new term, so it commits after every such transaction of the old term has
-- ended; and it first ends the sessions holding it (scheduler_fence_end), so a frozen old
-- leader cannot make it wait. pg_advisory_xact_lock_shared:
-- https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS
SELECT pg_advisory_xact_lock_shared(pgsched_internal.internal_key_v1('term'))

-- name: scheduler_term_current :one
-- The second statement of such a transaction: its term is current. In READ COMMITTED each
-- statement takes a new snapshot, taken here after the shared lock was granted, so a term
-- elected before the lock was granted is seen (its election held the key exclusively until
-- it committed). current is false once the leader table records any other term; a tick
-- outside every term (no leader row: tests, tools) is current.
SELECT NOT EXISTS (SELECT 1 FROM pgsched.leader WHERE epoch <> %(epoch)s) AS current

-- name: scheduler_fence_end :many
-- An election's first step: end every other session holding the term key (an old leader's
-- transactions that may still write; a frozen one would hold its tasks' row locks for as
-- long as it is frozen), waiting up to %(wait_ms)s ms for each to exit, so that its locks
-- are free. pg_locks lists advisory-lock holders with their pid (bigint keys as classid
-- and objid, objsubid 1); pg_terminate_backend(pid, timeout) waits for the exit (PostgreSQL
-- 14): https://www.postgresql.org/docs/current/view-pg-locks.html
SELECT l.pid, pg_terminate_backend(l.pid, %(wait_ms)s::bigint) AS ended
  FROM pg_locks l
 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
   -- pg_locks lists every database's locks: never another install's scheduler
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND ((l.classid::bigint << 32) | l.objid::bigint) = pgsched_internal.internal_key_v1('term')
   AND l.pid <> pg_backend_pid()

-- name: scheduler_fence_take :one
-- An election's second step, in the transaction that records the new term
-- (scheduler_elect): the term key exclusively, which no transaction of the old term holds
-- any longer once it is granted. Tried, not waited for: a holder that appeared since
-- scheduler_fence_end is ended at the next try.
SELECT pg_try_advisory_xact_lock(pgsched_internal.internal_key_v1('term')) AS fenced

-- name: scheduler_worker_prune :one
-- Remove rows of workers stopped or dead for longer than worker_retention_days that hold
-- nothing (worker_prune_v1, migration 0015).
SELECT pgsched_internal.worker_prune_v1() AS pruned
