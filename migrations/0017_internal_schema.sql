-- 0017: the schema pgsched holds only the public SQL API (docs/sql-api.md); the engine's
-- functions move to pgsched_internal (issue 16).
--
-- Applications and other languages call the functions left in pgsched (enqueue_v1,
-- enqueue_v2, enqueue_many_v1, enqueue_many_v2, trigger_v1, pause_v1, resume_v1,
-- cancel_v1, dlq_retry_v1, dlq_retry_all_v1, dlq_purge_v1, dag_trigger_v1,
-- dag_cancel_v1, dag_rerun_v1), INSERT into the view run_request and read the tables and
-- the view execution_all. A _v1 name never changes meaning; a new meaning gets a new name.
-- What only pgsched's own processes and triggers call moves below, under the same names
-- and with the same bodies: those may change in any release.
--
-- What moves, and who calls it:
--   the rescue and the end of an execution   rescue_v1, finish_v1 (the leader, cancel_v1)
--   the retry budget and settings            retry_slot_v1, setting_v1 (workers, queries)
--   idempotency                              derived_key_v1, record_skipped_v1 (enqueue)
--   the enqueue's task lock                  task_share_v1 (the public enqueue wrappers)
--   the DAG engine                           dag_start_v1, dag_enqueue_v1, dag_propagate_v1,
--                                            dag_decide_v1, dag_condition_v1, dag_close_v1,
--                                            dag_stop_v1, dag_cancel_execution_v1,
--                                            dag_sweep_v1 (the scheduler, triggers)
--   history partitions                       partition_ensure_v1, partition_expired_v1,
--                                            partition_is_live_v1, partition_drop_v1
--   the hourly roll-up                       stats_rollup_v1, stats_add_v1, stats_sum_v1
--   worker registrations                     worker_prune_v1
--   trigger functions                        task_notify_v1, task_pause_track_v1,
--                                            run_request_insert_v1, dag_execution_finished_v1,
--                                            webhook_execution_finished_v1
--
-- Triggers, the aggregate stats_sum_v1's state function, views and defaults name their
-- functions by OID and keep working. Function bodies do not: plpgsql and non-atomic SQL
-- bodies are text, and every one names the functions it calls qualified with the schema
-- (pgsched.finish_v1(...)), so each body that calls a moved function is created again with
-- that one word changed, pgsched. -> pgsched_internal. (the DO block below; sql/schema.sql
-- shows every body as it is now). No body depends on search_path (every name in them is
-- schema-qualified) and none is SECURITY DEFINER, so no function gets a search_path
-- setting: one would also stop the SQL functions from being inlined into their callers.

COMMENT ON SCHEMA pgsched IS
    'pgsched: tables and the public SQL API (docs/sql-api.md); a _v1 name never changes meaning';
COMMENT ON SCHEMA pgsched_internal IS
    'pgsched engine internals: called by pgsched''s own processes and triggers, may change in any release';

ALTER FUNCTION pgsched.rescue_v1() SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.finish_v1(pgsched.execution, text, text) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.retry_slot_v1(timestamptz) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.setting_v1(text) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.derived_key_v1(bigint, jsonb, timestamptz) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.record_skipped_v1(pgsched.task, timestamptz, text, jsonb, text, bigint)
    SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.task_share_v1(text, text) SET SCHEMA pgsched_internal;

ALTER FUNCTION pgsched.dag_start_v1(bigint, text, timestamptz, jsonb, bigint) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_enqueue_v1(pgsched.dag_run, text[]) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_propagate_v1(bigint, text[], boolean) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_decide_v1(text, text, integer, integer, integer, integer, integer)
    SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_condition_v1(jsonb, jsonb) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_close_v1(bigint) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_stop_v1(bigint, text) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_cancel_execution_v1(pgsched.execution, text) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_sweep_v1() SET SCHEMA pgsched_internal;

ALTER FUNCTION pgsched.partition_ensure_v1(date, integer) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.partition_expired_v1(timestamptz) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.partition_is_live_v1(text, text) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.partition_drop_v1(text, text) SET SCHEMA pgsched_internal;

ALTER FUNCTION pgsched.stats_rollup_v1(integer) SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.stats_add_v1(bigint[], bigint[]) SET SCHEMA pgsched_internal;
ALTER AGGREGATE pgsched.stats_sum_v1(bigint[]) SET SCHEMA pgsched_internal;

ALTER FUNCTION pgsched.worker_prune_v1() SET SCHEMA pgsched_internal;

ALTER FUNCTION pgsched.task_notify_v1() SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.task_pause_track_v1() SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.run_request_insert_v1() SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.dag_execution_finished_v1() SET SCHEMA pgsched_internal;
ALTER FUNCTION pgsched.webhook_execution_finished_v1() SET SCHEMA pgsched_internal;

-- Each body in either schema that calls a moved function by its old name is created again
-- (pg_get_functiondef: the same arguments, defaults, volatility and body) with the new
-- name; then no body may name one by its old name. The moved names are those now in
-- pgsched_internal alone (enqueue_v1, enqueue_v2 and enqueue_many_v1 are in both since
-- 0007: their public wrappers stay).
DO $migration$
DECLARE
    moved text;
    old_call text;
    f record;
    left_over text;
BEGIN
    SELECT string_agg(DISTINCT i.proname, '|' ORDER BY i.proname) INTO moved
      FROM pg_proc i
     WHERE i.pronamespace = 'pgsched_internal'::regnamespace
       AND NOT EXISTS (SELECT FROM pg_proc p WHERE p.pronamespace = 'pgsched'::regnamespace
                                              AND p.proname = i.proname);
    old_call := '\mpgsched\.(' || moved || ')\(';
    FOR f IN SELECT p.oid FROM pg_proc p
              WHERE p.pronamespace IN ('pgsched'::regnamespace, 'pgsched_internal'::regnamespace)
                AND p.prokind = 'f' AND p.prosrc ~ old_call
              ORDER BY p.oid
    LOOP
        EXECUTE regexp_replace(pg_get_functiondef(f.oid), old_call, 'pgsched_internal.\1(', 'g');
    END LOOP;
    SELECT string_agg(p.oid::regprocedure::text, ', ') INTO left_over
      FROM pg_proc p
     WHERE p.pronamespace IN ('pgsched'::regnamespace, 'pgsched_internal'::regnamespace)
       AND p.prosrc ~ old_call;
    IF left_over IS NOT NULL THEN
        RAISE EXCEPTION 'still calling a moved function by its old name: %', left_over;
    END IF;
END $migration$;

-- Who may call what is unchanged by the move: the engine's functions run with their
-- caller's rights (none is SECURITY DEFINER), so what a role may do is still decided by
-- its privileges on schema pgsched and its tables. Every role may therefore look into
-- pgsched_internal, as it could into pgsched before: a role that could cancel, start a DAG
-- run or record an outcome at 0016 can after this migration. (pgsched_internal is not a
-- privilege boundary; tenant roles and SECURITY DEFINER functions are issue 17's.)
GRANT USAGE ON SCHEMA pgsched_internal TO PUBLIC;
