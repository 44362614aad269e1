-- Executions: the hot queue (pgsched.execution), history, attempts and logs.

-- name: execution_claim :many
-- Claim up to %(limit)s ready executions of the given queues for one worker, every limit
-- held (tenant quotas, queue/task/key caps and rate limits, paused queues) and shared fairly
-- across tenants: pgsched_internal.execution_claim_v1 (migration 0021; it says how). Rows
-- come in the order they are to start.
-- task is the task's definition as a JSON object, NULL when the caller already holds it
-- at task_version (the task row's xmin: every change to the row gives it a new one):
-- %(known_task_ids)s / %(known_task_versions)s, parallel arrays (claims.TaskDefinitions).
-- Decoding the definition with every row was a sixth of a draining worker's CPU.
-- confirm_start asks the worker to record the start (execution_confirm_start) before it
-- runs the execution: a rescue could not tell whether an earlier claim had started it
-- (migration 0008). params come as JSON text: a Python handler's are decoded by the slot
-- that runs it, a command gets the text itself (PGSCHED_PARAMS); decoding every row's in
-- the claimer (psycopg's jsonb loader) was two thirds of a claim's client time. Params
-- that are not an object (only a raw INSERT into pgsched.execution can store one) come as
-- {}. backoff_from_attempt: the attempt number a retry's backoff counts from (a
-- dead-letter retry sets it; migration 0012).
-- Each (tenant, queue, priority) is read from its own front, bounded by run_at
-- (execution_ready_tenant_idx, migration 0020), so a claim reads only rows it may take;
-- each front locks its first rows with SKIP LOCKED. %(tenants)s: the tenants served, or
-- NULL for every tenant. The claim's own locks (a transaction-scoped advisory lock per
-- tenant) end with its statement: the worker claims in autocommit.
SELECT * FROM pgsched_internal.execution_claim_v1(
    %(worker_id)s, %(queues)s::text[], %(tenants)s::text[], %(limit)s, %(now)s::timestamptz,
    %(known_task_ids)s::bigint[], %(known_task_versions)s::bigint[])

-- name: execution_next_due :one
-- Seconds from now, by the database's clock, until the earliest run_at of a pending
-- execution of %(queues)s; NULL when none is pending; 0 or less when one is due already
-- (held by a claim in flight or a lock, or not claimable by this worker). future_seconds:
-- the same for the earliest still to come, in any of the worker's fronts (NULL when none),
-- so that work due later is not hidden behind a held row. A worker asks before it waits,
-- after a claim that came up short, and wakes then instead of at its next poll
-- (pgsched.due): a retry's backoff, a run enqueued for later start on time.
-- %(tenants)s as for execution_claim: the tenants served, or NULL for every tenant with
-- anything pending (found as the claim finds them: one descent of execution_ready_tenant_idx
-- per such tenant). Then one or two descents of that index per (tenant, queue, priority):
-- priorities are 1 to 10 (the table's CHECK), and within one, the index is in run_at order.
-- free_seconds: until the earliest end of a time window (a rate limit's, an hourly quota's)
-- that holds due work of these tenants back (limit_wait.free_at, written by the claim;
-- migration 0021), NULL when none does: work a limit holds is not "held by a claim in
-- flight", and is tried when the window ends, not by a doubling retry.
WITH RECURSIVE pending(tenant) AS (
    SELECT (SELECT e.tenant FROM pgsched.execution e WHERE e.state = 'pending'
                     ORDER BY e.tenant LIMIT 1)
     WHERE %(tenants)s::text[] IS NULL
    UNION ALL
    SELECT (SELECT e.tenant FROM pgsched.execution e WHERE e.state = 'pending' AND e.tenant > p.tenant
                     ORDER BY e.tenant LIMIT 1)
      FROM pending p WHERE p.tenant IS NOT NULL
), served(tenant) AS (
    SELECT p.tenant FROM pending p WHERE p.tenant IS NOT NULL
    UNION
    SELECT t FROM unnest(%(tenants)s::text[]) AS t
)
SELECT extract(epoch FROM min(x.run_at) - clock_timestamp())::float8 AS seconds,
       extract(epoch FROM min(x.later) - clock_timestamp())::float8 AS future_seconds,
       (SELECT extract(epoch FROM min(w.free_at) - clock_timestamp())::float8
          FROM pgsched.limit_wait w
         WHERE %(tenants)s::text[] IS NULL OR w.tenant = ANY (%(tenants)s::text[])) AS free_seconds
  FROM (SELECT f.run_at, g.run_at AS later
          FROM (SELECT DISTINCT s.tenant, q FROM served s CROSS JOIN unnest(%(queues)s::text[]) AS q)
               AS a(tenant, queue)
         CROSS JOIN generate_series(1, 10) AS p(priority)
         CROSS JOIN LATERAL (
               SELECT e.run_at FROM pgsched.execution e
                WHERE e.state = 'pending' AND e.tenant = a.tenant AND e.queue = a.queue
                  AND e.priority = p.priority
                ORDER BY e.run_at
                LIMIT 1) f
          LEFT JOIN LATERAL (  -- in every front: the work due later may stand in another than the held row
               SELECT e.run_at FROM pgsched.execution e
                WHERE e.state = 'pending' AND e.tenant = a.tenant AND e.queue = a.queue
                  AND e.priority = p.priority AND e.run_at > now()
                ORDER BY e.run_at
                LIMIT 1) g ON true) x

-- name: execution_wake :exec
-- Wake the workers (LISTEN pgsched_execution) when this transaction commits: for executions
-- made pending by an UPDATE (a retry, a hand-back, the leader's rescue), which the INSERT
-- trigger (execution_inserted, migration 0009) does not see. The same empty payload as the
-- trigger's: PostgreSQL sends one of a transaction's identical notifications.
SELECT pg_notify('pgsched_execution', '')

-- name: execution_finish :exec
-- Move a running execution that this worker still holds (its lease) into history with its
-- final state. Zero rows means the claim was lost (rescued after the worker was declared
-- dead): the outcome is rejected. A DAG node's execution settles its node and downstream
-- in this same statement (the dag_execution_finished trigger).
WITH done AS (
    DELETE FROM pgsched.execution
     WHERE id = %(id)s AND lease_id = %(lease_id)s AND state = 'running'
    RETURNING *
)
INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state, trigger,
    priority, queue, params, idempotency_key, attempt, max_attempts, worker_id, leader_epoch,
    created_at, started_at, finished_at, exit_code, error, result, lost_attempts, dag_run_id,
    progress, progress_message, progress_at)
SELECT id, tenant, task_id, scheduled_at, run_at, %(state)s, trigger, priority, queue, params,
       idempotency_key, attempt, max_attempts, worker_id, leader_epoch, created_at, started_at,
       %(finished_at)s, %(exit_code)s, %(error)s, %(result)s, lost_attempts, dag_run_id,
       progress, progress_message, progress_at
  FROM done

-- name: execution_progress :exec
-- The latest progress a running Python handler reported (ctx.progress, migration 0038), on
-- the execution this worker still holds (its lease); at the database's time.
UPDATE pgsched.execution
   SET progress = %(progress)s, progress_message = %(message)s, progress_at = now()
 WHERE id = %(id)s AND lease_id = %(lease_id)s AND state = 'running'

-- name: execution_confirm_start :exec
-- A slot is about to start an execution whose claim asked for it (confirm_start): record
-- the start, in its own transaction, before running it, so that a rescue knows it started
-- (rescue_v1, migration 0008). Zero rows: the claim is no longer held (rescued after the
-- worker was declared dead); it must not run.
UPDATE pgsched.execution SET start_confirmed_at = now()
 WHERE id = %(id)s AND lease_id = %(lease_id)s AND state = 'running'

-- name: execution_retry_slot :one
-- When a retry proposed for %(proposed)s may run under the retry budget (retry_slot_v1).
SELECT pgsched_internal.retry_slot_v1(%(proposed)s) AS run_at

-- name: execution_retry :exec
-- Put an attempt that this worker still holds back in the queue for a later attempt at
-- %(run_at)s. %(extra_attempts)s adds to max_attempts: 1 when the worker handed it back
-- on shutdown, so the lost attempt does not use up its retries.
UPDATE pgsched.execution
   SET state = 'pending', run_at = %(run_at)s, worker_id = NULL, started_at = NULL, lease_id = NULL,
       start_confirmed_at = NULL, max_attempts = max_attempts + %(extra_attempts)s, budget_delay_seconds = %(budget_delay_seconds)s
 WHERE id = %(id)s AND lease_id = %(lease_id)s AND state = 'running'

-- name: execution_attempt_insert :exec
-- Written before the execution moves (worker._store_outcome). When the rescue has already
-- written this attempt as 'lost', this row is not added, and the move that follows finds
-- the lease gone and rolls everything back.
INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state, started_at,
                                       finished_at, exit_code, error, error_type, lease_id,
                                       next_run_at, budget_delay_seconds)
VALUES (%(id)s, %(attempt)s, %(tenant)s, %(worker_id)s, %(state)s, %(started_at)s, %(finished_at)s,
        %(exit_code)s, %(error)s, %(error_type)s, %(lease_id)s, %(next_run_at)s,
        %(budget_delay_seconds)s)
ON CONFLICT DO NOTHING

-- name: execution_log_insert :exec
-- A batch of captured output lines (parallel arrays), one statement.
INSERT INTO pgsched.execution_log (execution_id, attempt, tenant, seq, stream, logged_at, line)
SELECT %(id)s, %(attempt)s, %(tenant)s, u.seq, u.stream, u.logged_at, u.line
  FROM unnest(%(seq)s::int[], %(stream)s::text[], %(logged_at)s::timestamptz[], %(line)s::text[])
       AS u(seq, stream, logged_at, line)

-- name: execution_list :many
-- Executions of a tenant, newest first, optionally of one task and/or in one state.
SELECT e.id, t.name AS task_name, e.state, e.trigger, e.scheduled_at, e.run_at, e.started_at,
       e.finished_at, e.attempt, e.max_attempts, e.exit_code, e.queue, e.priority, e.worker_id,
       extract(epoch FROM e.finished_at - e.started_at)::float8 AS duration_seconds
  FROM pgsched.execution_all e
  JOIN pgsched.task t ON t.id = e.task_id
 WHERE e.tenant = %(tenant)s
   AND (%(task)s::text IS NULL OR t.name = %(task)s::text)
   AND (%(state)s::text IS NULL OR e.state = %(state)s::text)
 ORDER BY e.id DESC
 LIMIT %(limit)s

-- name: execution_get :one
-- params masked for a viewer (shown_v1, migration 0031).
SELECT s.*, t.name AS task_name,
       extract(epoch FROM e.finished_at - e.started_at)::float8 AS duration_seconds
  FROM pgsched.execution_all e
  JOIN pgsched.task t ON t.id = e.task_id
 CROSS JOIN LATERAL pgsched_internal.shown_v1(e, t.sensitive_params) s
 WHERE e.id = %(id)s AND e.tenant = %(tenant)s

-- name: execution_params :one
-- An execution's params as stored, unmasked: what a retry runs again with (execution_get
-- masks them for a viewer, migration 0031).
SELECT e.params FROM pgsched.execution_all e WHERE e.id = %(id)s AND e.tenant = %(tenant)s

-- name: execution_attempts :many
SELECT attempt, state, worker_id, started_at, finished_at, exit_code, error, error_type,
       next_run_at, budget_delay_seconds,
       extract(epoch FROM finished_at - started_at)::float8 AS duration_seconds
  FROM pgsched.execution_attempt
 WHERE execution_id = %(id)s
 ORDER BY attempt

-- name: execution_queue_depth :many
-- Per (tenant, queue): a queue is named within its tenant (a worker serves tenants' queues).
SELECT tenant, queue, count(*) FILTER (WHERE state = 'pending' AND run_at <= now()) AS ready,
       count(*) FILTER (WHERE state = 'pending' AND run_at > now()) AS scheduled,
       count(*) FILTER (WHERE state = 'running') AS running
  FROM pgsched.execution
 GROUP BY tenant, queue
 ORDER BY tenant, queue

-- name: execution_cancel :one
SELECT pgsched.cancel_v1(%(id)s, %(tenant)s) AS outcome

-- name: execution_cancel_requested :one
-- Whether a cancel was asked for the execution this lease holds (checked, with the row
-- locked, before an attempt is retried: a cancelled execution is never started again).
SELECT cancel_requested_at IS NOT NULL AS requested FROM pgsched.execution
 WHERE id = %(id)s AND lease_id = %(lease_id)s
   FOR UPDATE

-- name: execution_cancel_asked :many
-- Of the executions that pgsched_cancel notifications named (%(ids)s), those whose cancel
-- was asked: a notification is only a hint (any login may send one; docs/security.md).
SELECT id FROM pgsched.execution
 WHERE id = ANY (%(ids)s::bigint[]) AND cancel_requested_at IS NOT NULL

-- name: execution_finish_many :one
-- Group commit of final outcomes (%(items)s: a JSON array with one array per execution,
-- its fields in the order of the columns below, instants as seconds since the epoch;
-- completer.finish_params builds it: json.dumps is far cheaper than adapting ten
-- parallel arrays element by element, which was a quarter of a busy worker's CPU): the moves
-- to history and the attempt rows of every execution this worker still holds (its lease),
-- in one statement. started_at is when the worker's slot started it (a claimed execution may
-- wait in the worker's buffer first; the row's own started_at is the claim's). Returns the
-- ids moved, as one array (a row per id cost the writer a Python dict each); an id missing
-- was rescued meanwhile (its attempt is not written: the rescue wrote it as 'lost').
WITH input AS (
    SELECT (x->>0)::bigint AS id, (x->>1)::bigint AS lease_id, x->>2 AS state,
           to_timestamp((x->>3)::float8) AS finished_at, (x->>4)::int AS exit_code, x->>5 AS error,
           nullif(x->6, 'null'::jsonb) AS result, x->>7 AS attempt_state,
           to_timestamp((x->>8)::float8) AS started_at, x->>9 AS error_type
      FROM jsonb_array_elements(%(items)s::jsonb) AS x
), done AS (
    DELETE FROM pgsched.execution e USING input i
     WHERE e.id = i.id AND e.lease_id = i.lease_id AND e.state = 'running'
    RETURNING e.*
), moved AS (
    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state, trigger,
        priority, queue, params, idempotency_key, attempt, max_attempts, worker_id, leader_epoch,
        created_at, started_at, finished_at, exit_code, error, result, lost_attempts, dag_run_id,
        progress, progress_message, progress_at)
    SELECT d.id, d.tenant, d.task_id, d.scheduled_at, d.run_at, i.state, d.trigger, d.priority, d.queue,
           d.params, d.idempotency_key, d.attempt, d.max_attempts, d.worker_id, d.leader_epoch,
           d.created_at, coalesce(i.started_at, d.started_at), i.finished_at, i.exit_code, i.error, i.result, d.lost_attempts,
           d.dag_run_id, d.progress, d.progress_message, d.progress_at
      FROM done d JOIN input i ON i.id = d.id
     -- DAG nodes settle in run order: two workers' batches lock their runs alike
     ORDER BY d.dag_run_id NULLS FIRST, d.id
    RETURNING id
), attempts AS (
    INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state, started_at,
                                           finished_at, exit_code, error, error_type, lease_id)
    SELECT d.id, d.attempt, d.tenant, %(worker_id)s, i.attempt_state, coalesce(i.started_at, d.started_at),
           i.finished_at, i.exit_code, i.error, i.error_type, d.lease_id
      FROM done d JOIN input i ON i.id = d.id
    ON CONFLICT DO NOTHING
)
SELECT coalesce(array_agg(id), '{}') AS moved FROM moved

-- name: execution_unclaim :many
-- Hand back executions a stopping worker claimed but never started (its local buffer):
-- pending again, as if never claimed: the attempt number goes back, no attempt row is
-- written, the lease ends. Only while this lease is still held (parallel arrays). One of a
-- task deleted meanwhile is dropped instead, as task_drop_pending drops the pending ones
-- (else it would be left pending for a worker to run), except a DAG node's: a DAG apply
-- deletes a changed node's task while runs in flight still run it (dagruns.apply), and its
-- run would wait forever for a dropped node. The task row is held FOR KEY SHARE,
-- so a delete in progress (FOR UPDATE) is waited for and seen, or waits for this and then
-- drops what this made pending.
WITH held AS (
    SELECT e.id, t.deleted_at IS NOT NULL AND e.dag_run_id IS NULL AS gone
      FROM pgsched.execution e
      JOIN unnest(%(id)s::bigint[], %(lease_id)s::bigint[]) AS u(id, lease_id)
           ON e.id = u.id AND e.lease_id = u.lease_id
      JOIN pgsched.task t ON t.id = e.task_id
     WHERE e.state = 'running'
       FOR UPDATE OF e FOR KEY SHARE OF t
), dropped AS (
    DELETE FROM pgsched.execution e USING held h WHERE e.id = h.id AND h.gone
    RETURNING e.id
), back AS (
    UPDATE pgsched.execution e
       SET state = 'pending', attempt = e.attempt - 1, worker_id = NULL, started_at = NULL, lease_id = NULL,
           start_confirmed_at = NULL
      FROM held h
     WHERE e.id = h.id AND NOT h.gone
    RETURNING e.id
)
SELECT id FROM back UNION ALL SELECT id FROM dropped

-- name: execution_log_page :many
-- Up to %(limit)s lines of an execution's log after (%(after_attempt)s, %(after_seq)s), in
-- order: a long log is read a page at a time.
SELECT attempt, seq, stream, logged_at, line
  FROM pgsched.execution_log
 WHERE execution_id = %(id)s AND (attempt, seq) > (%(after_attempt)s, %(after_seq)s)
 ORDER BY attempt, seq
 LIMIT %(limit)s

-- name: execution_log_tail :many
-- The last %(limit)s lines of an execution's log, newest first.
SELECT attempt, seq, stream, logged_at, line
  FROM pgsched.execution_log
 WHERE execution_id = %(id)s
 ORDER BY attempt DESC, seq DESC
 LIMIT %(limit)s

-- name: execution_held :many
-- The executions the database gives worker %(worker_id)s (running, its id), with their
-- leases. After its claimer reconnects, the worker compares them with what it knows it
-- holds (buffered, starting, running, having its end written): one it does not know was
-- claimed by a statement whose reply never arrived (the server went away between the
-- commit and the reply) and is handed back (execution_unclaim), never run blind. One
-- descent of execution_worker_idx.
SELECT id, lease_id FROM pgsched.execution WHERE worker_id = %(worker_id)s AND state = 'running'

-- name: execution_finish_many_recorded :one
-- Which outcomes of %(items)s (execution_finish_many's parameter, the same JSON) an earlier
-- try of that statement committed although its reply was lost: their attempt row, written
-- in that statement's transaction only, is there with this worker, the lease and the very
-- finished_at and state the worker wrote (the rescue's 'lost' row has its own now() and
-- state). Asked only after a try failed with a lost connection and its retry did not move
-- them: the retry finds the lease gone either way. Returns the ids, as one array.
WITH input AS (
    SELECT (x->>0)::bigint AS id, (x->>1)::bigint AS lease_id, to_timestamp((x->>3)::float8) AS finished_at,
           x->>7 AS attempt_state, to_timestamp((x->>8)::float8) AS started_at
      FROM jsonb_array_elements(%(items)s::jsonb) AS x
)
SELECT coalesce(array_agg(i.id), '{}') AS recorded
  FROM input i
 WHERE EXISTS (SELECT 1 FROM pgsched.execution_attempt a
                WHERE a.execution_id = i.id AND a.lease_id = i.lease_id AND a.worker_id = %(worker_id)s
                  AND a.finished_at = i.finished_at AND a.state = i.attempt_state
                  AND (i.started_at IS NULL OR a.started_at = i.started_at))

-- name: execution_attempt_recorded :one
-- Whether the worker's own earlier try of an outcome's transaction (worker._store_outcome)
-- committed although its reply was lost: the attempt row it wrote, with this worker, the
-- lease and the very finished_at and state (the rescue's 'lost' row has its own now()).
-- next_run_at and budget_delay_seconds are what that try decided for a retry; final is the
-- state it moved the execution to in history (NULL: it went back to the queue).
SELECT a.next_run_at, a.budget_delay_seconds,
       (SELECT h.state FROM pgsched.execution_history h
         WHERE h.id = a.execution_id AND h.finished_at = a.finished_at) AS final
  FROM pgsched.execution_attempt a
 WHERE a.execution_id = %(id)s AND a.lease_id = %(lease_id)s AND a.worker_id = %(worker_id)s
   AND a.finished_at = %(finished_at)s AND a.state = %(state)s AND a.started_at = %(started_at)s

-- name: execution_done_listen :exec
-- An application waiting for executions to end (App.wait): every statement that moves
-- executions into history notifies, its payload their ids, comma-separated, or '*' (0038).
LISTEN pgsched_execution_done

-- name: execution_wait_read :one
-- The execution an application waits for, as its tenant sees it (execution_v3: an app login
-- reads no table; another tenant's id is not found).
SELECT * FROM pgsched.execution_v3(%(id)s, %(tenant)s)
