-- History partition maintenance (run by the scheduler leader).

-- name: partition_ensure :many
SELECT partition_name FROM pgsched_internal.partition_ensure_v1(%(from_day)s::date, %(days)s) AS partition_name

-- name: partition_lock_timeout :one
-- Bound this transaction's lock waits (milliseconds): maintenance gives way to the hot path.
SELECT set_config('lock_timeout', %(ms)s::text, true) AS lock_timeout

-- name: partition_expired :many
SELECT partition_name, parent, live FROM pgsched_internal.partition_expired_v1(%(cutoff)s)

-- name: partition_drop :one
SELECT pgsched_internal.partition_drop_v1(%(partition_name)s, %(parent)s) AS dropped

-- name: partition_default_rows :one
-- Rows that strayed into the DEFAULT partitions (outside every daily range).
SELECT execution_history, execution_attempt, execution_log
  FROM pgsched_internal.partition_default_rows_v1()

-- name: partition_summary :one
-- Daily partitions of execution_history: how many, first and last day.
SELECT count(*) AS daily, min(right(c.relname, 8)) AS first_day, max(right(c.relname, 8)) AS last_day
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'pgsched.execution_history'::regclass AND c.relname ~ '_p[0-9]{8}$'
