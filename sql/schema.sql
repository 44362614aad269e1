-- The schema pgsched's migrations make, as pg_dump --schema-only shows it on PostgreSQL 18:
-- every table, view, index, trigger and function body as it is now. For reading: the
-- migrations (migrations/*.sql) are the only source of the schema, and this file is
-- generated from them. Do not edit it; after adding a migration, regenerate it with
--     .venv/bin/python -m tests.schema_snapshot
-- (tests/db/test_schema_snapshot.py fails while it is stale; the daily history partitions,
-- owners and privileges are left out). Not named queries: pgsched/queries.py skips it.

--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET transaction_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: pgsched; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA pgsched;

--
-- Name: SCHEMA pgsched; Type: COMMENT; Schema: -; Owner: -
--

COMMENT ON SCHEMA pgsched IS 'pgsched: tables and the public SQL API (docs/sql-api.md); a _v1 name never changes meaning';

--
-- Name: pgsched_internal; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA pgsched_internal;

--
-- Name: SCHEMA pgsched_internal; Type: COMMENT; Schema: -; Owner: -
--

COMMENT ON SCHEMA pgsched_internal IS 'pgsched engine internals: called by pgsched''s own processes and triggers, may change in any release';

--
-- Name: cancel_v1(bigint, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.cancel_v1(execution_id bigint, tenant text DEFAULT NULL::text) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    e pgsched.execution;
BEGIN
    cancel_v1.tenant := pgsched_internal.caller_tenant_v1(cancel_v1.tenant);
    SELECT * INTO e FROM pgsched.execution x
     WHERE x.id = cancel_v1.execution_id AND x.tenant = cancel_v1.tenant FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM FROM pgsched.execution_history h
         WHERE h.id = cancel_v1.execution_id AND h.tenant = cancel_v1.tenant;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'execution: no execution % in tenant %', cancel_v1.execution_id, quote_literal(cancel_v1.tenant)
                USING ERRCODE = 'no_data_found';
        END IF;
        RETURN 'finished';
    END IF;
    IF e.state = 'pending' THEN
        PERFORM pgsched_internal.finish_v1(e, 'cancelled', 'cancelled while pending');
        RETURN 'cancelled';
    END IF;
    UPDATE pgsched.execution x SET cancel_requested_at = coalesce(x.cancel_requested_at, now())
     WHERE x.id = e.id;
    PERFORM pg_notify('pgsched_cancel', e.id::text);
    RETURN 'cancelling';
END $$;

--
-- Name: dag_cancel_v1(bigint, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.dag_cancel_v1(run_id bigint, tenant text DEFAULT NULL::text) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    r pgsched.dag_run;
BEGIN
    dag_cancel_v1.tenant := pgsched_internal.caller_tenant_v1(dag_cancel_v1.tenant);
    SELECT * INTO r FROM pgsched.dag_run x
     WHERE x.id = dag_cancel_v1.run_id AND x.tenant = dag_cancel_v1.tenant FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run: no DAG run % in tenant %', run_id, quote_literal(tenant) USING ERRCODE = 'no_data_found';
    END IF;
    IF r.state NOT IN ('running', 'failing', 'cancelling') THEN
        RETURN 'finished';
    END IF;
    -- a run that fail_all is already stopping ends 'failed', as it would have
    UPDATE pgsched.dag_run x SET state = CASE WHEN x.state = 'failing' THEN 'failing' ELSE 'cancelling' END,
                                 error = coalesce(x.error, 'cancel requested')
     WHERE x.id = r.id;
    PERFORM pgsched_internal.dag_stop_v1(r.id, 'cancelled: the run was cancelled');
    SELECT * INTO r FROM pgsched.dag_run x WHERE x.id = r.id;
    IF r.remaining <= 0 THEN
        RETURN pgsched_internal.dag_close_v1(r.id);
    END IF;
    RETURN r.state;
END $$;

--
-- Name: dag_rerun_v1(bigint, text, boolean, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.dag_rerun_v1(run_id bigint, from_node text DEFAULT NULL::text, failed_only boolean DEFAULT false, tenant text DEFAULT NULL::text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    old pgsched.dag_run;
    r pgsched.dag_run;
    rerun_nodes text[];
    keep_nodes text[];
BEGIN
    dag_rerun_v1.tenant := pgsched_internal.caller_tenant_v1(dag_rerun_v1.tenant);
    SELECT * INTO old FROM pgsched.dag_run x WHERE x.id = dag_rerun_v1.run_id AND x.tenant = dag_rerun_v1.tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run: no DAG run % in tenant %', run_id, quote_literal(tenant) USING ERRCODE = 'no_data_found';
    END IF;
    IF old.state IN ('running', 'failing', 'cancelling') THEN
        RAISE EXCEPTION 'run: DAG run % is still %; wait for it to end or cancel it', old.id, old.state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM FROM pgsched.dag d WHERE d.id = old.dag_id AND d.deleted_at IS NULL FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run: DAG run % belongs to a deleted DAG', old.id USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF from_node IS NOT NULL THEN
        PERFORM FROM pgsched.dag_node_run n WHERE n.run_id = old.id AND n.node_id = from_node;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'from: % is not a node of DAG run %', quote_literal(from_node), old.id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- Re-run: from_node, every node that failed, was cancelled or was not run because of a
    -- failure (failed_only; a node skipped by its condition or rule is an outcome, not a
    -- failure), and everything downstream of those (a node that succeeded on a failed
    -- input runs again too).
    WITH RECURSIVE again(node_id) AS (
        SELECT n.node_id FROM pgsched.dag_node_run n
         WHERE n.run_id = old.id
           AND (n.node_id = from_node
                OR (coalesce(failed_only, false) AND n.state IN ('failed', 'upstream_failed', 'cancelled'))
                OR (from_node IS NULL AND NOT coalesce(failed_only, false)))
        UNION
        SELECT unnest(n.downstream) FROM pgsched.dag_node_run n JOIN again a ON a.node_id = n.node_id
         WHERE n.run_id = old.id
    )
    SELECT array_agg(n.node_id) FILTER (WHERE n.node_id IN (SELECT node_id FROM again)),
           array_agg(n.node_id) FILTER (WHERE n.node_id NOT IN (SELECT node_id FROM again))
      INTO rerun_nodes, keep_nodes
      FROM pgsched.dag_node_run n WHERE n.run_id = old.id;
    rerun_nodes := coalesce(rerun_nodes, '{}');
    keep_nodes := coalesce(keep_nodes, '{}');
    IF cardinality(rerun_nodes) = 0 THEN
        RAISE EXCEPTION 'run: nothing to re-run in DAG run % (no node failed)', old.id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgsched.dag_run (tenant, dag_id, trigger, scheduled_at, params, failure_policy, nodes,
                                 remaining, rerun_of)
    VALUES (old.tenant, old.dag_id, 'rerun', clock_timestamp(), old.params, old.failure_policy, old.nodes,
            cardinality(rerun_nodes), old.id)
    RETURNING * INTO r;
    INSERT INTO pgsched.dag_node_run (run_id, node_id, position, task_id, trigger_rule, condition, upstream,
                                      downstream, state, execution_id, result, error, queued_at, started_at,
                                      finished_at, kept)
    SELECT r.id, n.node_id, n.position,
           -- nodes that run again run their current definition (a fixed command), if any
           CASE WHEN k THEN n.task_id ELSE coalesce(cur.task_id, n.task_id) END,
           n.trigger_rule, n.condition, n.upstream, n.downstream,
           CASE WHEN k THEN n.state ELSE 'waiting' END,
           CASE WHEN k THEN n.execution_id END, CASE WHEN k THEN n.result END, CASE WHEN k THEN n.error END,
           CASE WHEN k THEN n.queued_at END, CASE WHEN k THEN n.started_at END,
           CASE WHEN k THEN n.finished_at END, k
      FROM pgsched.dag_node_run n
      CROSS JOIN LATERAL (SELECT n.node_id = ANY(keep_nodes) AS k) kk
      LEFT JOIN pgsched.dag_node cur ON cur.dag_id = old.dag_id AND cur.node_id = n.node_id
     WHERE n.run_id = old.id;
    -- Roots to re-run start now; the kept nodes settle their downstream as if just finished.
    PERFORM pgsched_internal.dag_enqueue_v1(r, ARRAY(
        SELECT n.node_id FROM pgsched.dag_node_run n
         WHERE n.run_id = r.id AND n.node_id = ANY(rerun_nodes) AND cardinality(n.upstream) = 0));
    PERFORM pgsched_internal.dag_propagate_v1(r.id, keep_nodes, false);
    RETURN r.id;
END $$;

--
-- Name: dag_trigger_v1(text, jsonb, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.dag_trigger_v1(dag_name text, params jsonb DEFAULT NULL::jsonb, tenant text DEFAULT NULL::text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    target bigint;
BEGIN
    dag_trigger_v1.tenant := pgsched_internal.caller_tenant_v1(dag_trigger_v1.tenant);
    SELECT d.id INTO target FROM pgsched.dag d
     WHERE d.tenant = dag_trigger_v1.tenant AND d.name = dag_trigger_v1.dag_name AND d.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dag: no DAG named % in tenant %', quote_literal(dag_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN pgsched_internal.dag_start_v1(target, 'manual', clock_timestamp(), dag_trigger_v1.params);
END $$;

--
-- Name: dlq_purge_v1(interval, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.dlq_purge_v1(older_than interval DEFAULT '00:00:00'::interval, tenant text DEFAULT NULL::text) RETURNS integer
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
    WITH doomed AS (
        SELECT h.id, h.finished_at FROM pgsched.execution_history h
         WHERE h.state = 'dead' AND h.tenant = (SELECT pgsched_internal.caller_tenant_v1(dlq_purge_v1.tenant))
           AND h.finished_at < now() - dlq_purge_v1.older_than
         ORDER BY h.id
           FOR UPDATE SKIP LOCKED  -- rows a concurrent retry holds are being retried
    ), gone AS (
        DELETE FROM pgsched.execution_history h USING doomed d
         WHERE h.id = d.id AND h.finished_at = d.finished_at
        RETURNING 1)
    SELECT count(*)::integer FROM gone;
$$;

--
-- Name: dlq_retry_all_v1(text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.dlq_retry_all_v1(task_name text DEFAULT NULL::text, tenant text DEFAULT NULL::text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    n integer := 0;
    dead_id bigint;
BEGIN
    dlq_retry_all_v1.tenant := pgsched_internal.caller_tenant_v1(dlq_retry_all_v1.tenant);
    FOR dead_id IN
        SELECT h.id FROM pgsched.execution_history h JOIN pgsched.task k ON k.id = h.task_id
         WHERE h.state = 'dead' AND h.tenant = dlq_retry_all_v1.tenant AND k.deleted_at IS NULL
           AND h.dag_run_id IS NULL
           AND (dlq_retry_all_v1.task_name IS NULL OR k.name = dlq_retry_all_v1.task_name)
         ORDER BY h.id
           FOR UPDATE OF h SKIP LOCKED  -- rows a concurrent purge or retry holds are theirs
    LOOP
        PERFORM pgsched.dlq_retry_v1(dead_id, dlq_retry_all_v1.tenant);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

--
-- Name: dlq_retry_v1(bigint, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.dlq_retry_v1(execution_id bigint, tenant text DEFAULT NULL::text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    h pgsched.execution_history;
    holder bigint;
    max_tries integer;
BEGIN
    dlq_retry_v1.tenant := pgsched_internal.caller_tenant_v1(dlq_retry_v1.tenant);
    SELECT * INTO h FROM pgsched.execution_history x
     WHERE x.id = dlq_retry_v1.execution_id AND x.tenant = dlq_retry_v1.tenant AND x.state = 'dead'
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: % is not in the dead-letter queue of tenant %', dlq_retry_v1.execution_id,
            quote_literal(dlq_retry_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
    IF h.dag_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'execution: % is a node of DAG run %; re-run it with pgsched dag rerun % --failed-only',
            h.id, h.dag_run_id, h.dag_run_id USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF h.idempotency_key IS NOT NULL THEN
        SELECT x.id INTO holder FROM pgsched.execution x
         WHERE x.tenant = h.tenant AND x.task_id = h.task_id AND x.idempotency_key = h.idempotency_key;
        IF NOT FOUND THEN
            SELECT x.id INTO holder FROM pgsched.execution_history x
             WHERE x.tenant = h.tenant AND x.task_id = h.task_id AND x.idempotency_key = h.idempotency_key
               AND x.state = 'succeeded'
             LIMIT 1;
        END IF;
        IF holder IS NOT NULL THEN
            UPDATE pgsched.execution_history x
               SET state = 'skipped',
                   error = format('idempotency key %s already taken by execution %s', quote_literal(h.idempotency_key), holder)
             WHERE x.id = h.id AND x.finished_at = h.finished_at;
            RETURN h.id;
        END IF;
    END IF;
    SELECT k.max_attempts INTO max_tries FROM pgsched.task k WHERE k.id = h.task_id AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: % belongs to a deleted task; it stays in the dead-letter queue', h.id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- queued again before its dead row goes: the insert trigger lets a scheduled fire at or
    -- before its task's last_fire_at through only as the requeue of such a row (0010)
    INSERT INTO pgsched.execution (id, tenant, task_id, scheduled_at, run_at, state, trigger,
        priority, queue, params, idempotency_key, attempt, max_attempts, leader_epoch,
        created_at, lost_attempts, backoff_from_attempt)
    VALUES (h.id, h.tenant, h.task_id, h.scheduled_at, now(), 'pending', h.trigger, h.priority,
            h.queue, h.params, h.idempotency_key, h.attempt, h.attempt + coalesce(max_tries, 1),
            h.leader_epoch, h.created_at, 0, h.attempt);
    DELETE FROM pgsched.execution_history x WHERE x.id = h.id AND x.finished_at = h.finished_at;
    RETURN h.id;
END $$;

--
-- Name: enqueue_many_v1(text, jsonb[], timestamp with time zone, integer, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.enqueue_many_v1(task_name text, params jsonb[], run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, tenant text DEFAULT NULL::text, trigger text DEFAULT 'api'::text) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    enqueue_many_v1.tenant := pgsched_internal.caller_tenant_v1(enqueue_many_v1.tenant);
    IF enqueue_many_v1.trigger IN ('schedule', 'dag') THEN
        enqueue_many_v1.trigger := pgsched_internal.caller_trigger_v1(enqueue_many_v1.trigger);
    END IF;
    PERFORM pgsched_internal.task_share_v1(task_name, tenant);
    RETURN QUERY SELECT pgsched_internal.enqueue_many_v1(task_name, params, run_at, priority, tenant, trigger);
END $$;

--
-- Name: enqueue_many_v2(text, jsonb, timestamp with time zone, integer, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.enqueue_many_v2(task_name text, params jsonb, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, tenant text DEFAULT NULL::text, trigger text DEFAULT 'api'::text) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    enqueue_many_v2.tenant := pgsched_internal.caller_tenant_v1(enqueue_many_v2.tenant);
    IF enqueue_many_v2.trigger IN ('schedule', 'dag') THEN
        enqueue_many_v2.trigger := pgsched_internal.caller_trigger_v1(enqueue_many_v2.trigger);
    END IF;
    IF params IS NULL OR jsonb_typeof(params) <> 'array' THEN
        RAISE EXCEPTION 'params: % is not a JSON array of JSON objects', coalesce(left(params::text, 80), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY SELECT pgsched.enqueue_many_v1(
        task_name,
        ARRAY(SELECT p.value FROM jsonb_array_elements(params) WITH ORDINALITY AS p(value, i) ORDER BY p.i),
        run_at, priority, tenant, trigger);
END $$;

--
-- Name: enqueue_v1(text, jsonb, timestamp with time zone, integer, text, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.enqueue_v1(task_name text, params jsonb DEFAULT NULL::jsonb, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, idempotency_key text DEFAULT NULL::text, tenant text DEFAULT NULL::text, trigger text DEFAULT 'api'::text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    enqueue_v1.tenant := pgsched_internal.caller_tenant_v1(enqueue_v1.tenant);
    IF enqueue_v1.trigger IN ('schedule', 'dag') THEN
        enqueue_v1.trigger := pgsched_internal.caller_trigger_v1(enqueue_v1.trigger);
    END IF;
    PERFORM pgsched_internal.task_share_v1(task_name, tenant);
    RETURN pgsched_internal.enqueue_v1(task_name, params, run_at, priority, idempotency_key, tenant, trigger);
END $$;

--
-- Name: enqueue_v2(text, jsonb, timestamp with time zone, integer, text, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.enqueue_v2(task_name text, params jsonb DEFAULT NULL::jsonb, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, idempotency_key text DEFAULT NULL::text, tenant text DEFAULT NULL::text, trigger text DEFAULT 'api'::text) RETURNS TABLE(execution_id bigint, deduplicated boolean, dedup_reason text, succeeded_execution_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    enqueue_v2.tenant := pgsched_internal.caller_tenant_v1(enqueue_v2.tenant);
    IF enqueue_v2.trigger IN ('schedule', 'dag') THEN
        enqueue_v2.trigger := pgsched_internal.caller_trigger_v1(enqueue_v2.trigger);
    END IF;
    PERFORM pgsched_internal.task_share_v1(task_name, tenant);
    RETURN QUERY SELECT * FROM pgsched_internal.enqueue_v2(task_name, params, run_at, priority,
                                                           idempotency_key, tenant, trigger);
END $$;

--
-- Name: execution_v1(bigint, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.execution_v1(execution_id bigint, tenant text DEFAULT NULL::text) RETURNS TABLE(id bigint, task text, state text, trigger text, attempt integer, scheduled_at timestamp with time zone, run_at timestamp with time zone, started_at timestamp with time zone, finished_at timestamp with time zone, exit_code integer, error text, result jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    execution_v1.tenant := pgsched_internal.caller_tenant_v1(execution_v1.tenant);
    RETURN QUERY
        SELECT x.id, k.name, x.state, x.trigger, x.attempt, x.scheduled_at, x.run_at, x.started_at,
               x.finished_at, x.exit_code, x.error, x.result
          FROM pgsched.execution_all x JOIN pgsched.task k ON k.id = x.task_id
         WHERE x.id = execution_v1.execution_id AND x.tenant = execution_v1.tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: no execution % in tenant %', execution_v1.execution_id,
            quote_literal(execution_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

--
-- Name: execution_v2(bigint, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.execution_v2(execution_id bigint, tenant text DEFAULT NULL::text) RETURNS TABLE(id bigint, task text, state text, trigger text, attempt integer, scheduled_at timestamp with time zone, run_at timestamp with time zone, started_at timestamp with time zone, finished_at timestamp with time zone, exit_code integer, error text, result jsonb, params jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    execution_v2.tenant := pgsched_internal.caller_tenant_v1(execution_v2.tenant);
    RETURN QUERY
        SELECT x.id, k.name, x.state, x.trigger, x.attempt, x.scheduled_at, x.run_at, x.started_at,
               x.finished_at, x.exit_code, x.error, x.result,
               CASE WHEN pgsched_internal.may_reveal_v1() THEN x.params
                    ELSE pgsched_internal.params_masked_v1(x.params, k.sensitive_params) END
          FROM pgsched.execution_all x JOIN pgsched.task k ON k.id = x.task_id
         WHERE x.id = execution_v2.execution_id AND x.tenant = execution_v2.tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: no execution % in tenant %', execution_v2.execution_id,
            quote_literal(execution_v2.tenant) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

--
-- Name: execution_v3(bigint, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.execution_v3(execution_id bigint, tenant text DEFAULT NULL::text) RETURNS TABLE(id bigint, task text, state text, trigger text, attempt integer, scheduled_at timestamp with time zone, run_at timestamp with time zone, started_at timestamp with time zone, finished_at timestamp with time zone, exit_code integer, error text, result jsonb, params jsonb, progress double precision, progress_message text, progress_at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    execution_v3.tenant := pgsched_internal.caller_tenant_v1(execution_v3.tenant);
    RETURN QUERY
        SELECT x.id, k.name, x.state, x.trigger, x.attempt, x.scheduled_at, x.run_at, x.started_at,
               x.finished_at, x.exit_code, x.error, x.result,
               CASE WHEN pgsched_internal.may_reveal_v1() THEN x.params
                    ELSE pgsched_internal.params_masked_v1(x.params, k.sensitive_params) END,
               x.progress, x.progress_message, x.progress_at
          FROM pgsched.execution_all x JOIN pgsched.task k ON k.id = x.task_id
         WHERE x.id = execution_v3.execution_id AND x.tenant = execution_v3.tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: no execution % in tenant %', execution_v3.execution_id,
            quote_literal(execution_v3.tenant) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

--
-- Name: lock_list_v1(text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.lock_list_v1(tenant text DEFAULT NULL::text) RETURNS TABLE(lock_tenant text, lock_name text, lock_key bigint, granted boolean, pid integer, waiting_since timestamp with time zone, application_name text, execution_id bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $_$
BEGIN
    lock_list_v1.tenant := pgsched_internal.caller_tenant_v1(lock_list_v1.tenant);
    RETURN QUERY
    SELECT n.tenant, n.name, n.key, l.granted, l.pid, l.waitstart, a.application_name::text, e.id
      FROM pg_catalog.pg_locks l
      JOIN pgsched_internal.lock_name n ON n.key = ((l.classid::bigint << 32) | l.objid::bigint)
      LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
      -- a worker's execution locks are held on a session named for the execution
      -- (pgsched/worker/execution_locks.py); shown when it is running in this tenant
      LEFT JOIN pgsched.execution e
             ON e.id = (substring(a.application_name FROM '^pgsched execution ([0-9]{1,18})$'))::bigint
            AND e.tenant = n.tenant AND e.state = 'running'
     WHERE l.locktype = 'advisory' AND l.objsubid = 1
       AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
       AND (lock_list_v1.tenant = '*' OR n.tenant = lock_list_v1.tenant)
     ORDER BY n.tenant, n.name, l.granted DESC, l.waitstart, l.pid;
END $_$;

--
-- Name: FUNCTION lock_list_v1(tenant text); Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON FUNCTION pgsched.lock_list_v1(tenant text) IS 'the locks of the caller''s tenant, held (granted) and waited for, with the session and execution';

--
-- Name: lock_release_v1(text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.lock_release_v1(name text, tenant text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    k bigint;
    quiet text := current_setting('client_min_messages');
    done boolean;
BEGIN
    lock_release_v1.tenant := pgsched_internal.caller_tenant_v1(lock_release_v1.tenant);
    k := pgsched_internal.lock_key_v1(lock_release_v1.tenant, lock_release_v1.name);
    IF NOT pgsched_internal.lock_held_v1(k) THEN
        RETURN false;
    END IF;
    -- a transaction's lock is not released early: pg_advisory_unlock says false, and warns
    PERFORM set_config('client_min_messages', 'error', true);
    done := pg_advisory_unlock(k);
    PERFORM set_config('client_min_messages', quiet, true);
    RETURN done;
END $$;

--
-- Name: FUNCTION lock_release_v1(name text, tenant text); Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON FUNCTION pgsched.lock_release_v1(name text, tenant text) IS 'release one hold of this session on the caller''s tenant''s lock NAME (session scope); whether it held one';

--
-- Name: lock_try_v1(text, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.lock_try_v1(name text, scope text DEFAULT 'session'::text, tenant text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    k bigint;
    got boolean;
BEGIN
    lock_try_v1.tenant := pgsched_internal.caller_tenant_v1(lock_try_v1.tenant);
    k := pgsched_internal.lock_key_v1(lock_try_v1.tenant, lock_try_v1.name);
    IF pgsched_internal.lock_scope_v1(scope) = 'session' THEN
        got := pg_try_advisory_lock(k);
    ELSE
        got := pg_try_advisory_xact_lock(k);
    END IF;
    IF got THEN
        PERFORM pgsched_internal.lock_named_v1(k, lock_try_v1.tenant, lock_try_v1.name, scope);
    END IF;
    RETURN got;
END $$;

--
-- Name: FUNCTION lock_try_v1(name text, scope text, tenant text); Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON FUNCTION pgsched.lock_try_v1(name text, scope text, tenant text) IS 'take the caller''s tenant''s lock NAME if free (scope session or transaction); whether it was got';

--
-- Name: lock_wait_v1(text, double precision, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.lock_wait_v1(name text, timeout_seconds double precision DEFAULT NULL::double precision, scope text DEFAULT 'session'::text, tenant text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    k bigint;
    got boolean := true;
    was text := current_setting('lock_timeout');
BEGIN
    lock_wait_v1.tenant := pgsched_internal.caller_tenant_v1(lock_wait_v1.tenant);
    k := pgsched_internal.lock_key_v1(lock_wait_v1.tenant, lock_wait_v1.name);
    PERFORM pgsched_internal.lock_scope_v1(scope);
    IF timeout_seconds IS NOT NULL AND NOT (timeout_seconds >= 0 AND timeout_seconds < 'Infinity') THEN
        RAISE EXCEPTION 'timeout_seconds: % is not a number of seconds >= 0 (NULL: no limit)', timeout_seconds
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF timeout_seconds = 0 THEN
        RETURN pgsched.lock_try_v1(name, scope, lock_wait_v1.tenant);
    END IF;
    -- lock_timeout bounds the wait (in ms; 0 is none), for this call only: set for the
    -- transaction, then set back (PostgreSQL manual, "Client Connection Defaults")
    PERFORM set_config('lock_timeout',
                       CASE WHEN timeout_seconds IS NULL THEN '0'
                            ELSE least(ceil(timeout_seconds * 1000), 2147483647)::bigint::text END, true);
    BEGIN
        IF scope = 'session' THEN
            PERFORM pg_advisory_lock(k);
        ELSE
            PERFORM pg_advisory_xact_lock(k);  -- kept by the transaction when this block ends
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        got := false;
    END;
    PERFORM set_config('lock_timeout', was, true);
    IF got THEN
        PERFORM pgsched_internal.lock_named_v1(k, lock_wait_v1.tenant, lock_wait_v1.name, scope);
    END IF;
    RETURN got;
END $$;

--
-- Name: FUNCTION lock_wait_v1(name text, timeout_seconds double precision, scope text, tenant text); Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON FUNCTION pgsched.lock_wait_v1(name text, timeout_seconds double precision, scope text, tenant text) IS 'take the caller''s tenant''s lock NAME, waiting up to timeout_seconds (NULL: no limit); whether it was got';

--
-- Name: pause_v1(text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.pause_v1(task_name text, tenant text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    pause_v1.tenant := pgsched_internal.caller_tenant_v1(pause_v1.tenant);
    UPDATE pgsched.task k SET enabled = false, updated_at = now()
     WHERE k.tenant = pause_v1.tenant AND k.name = pause_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(task_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN true;
END $$;

SET default_table_access_method = heap;

--
-- Name: queue; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.queue (
    tenant text NOT NULL,
    name text NOT NULL,
    max_running integer,
    rate_limit integer,
    rate_period_seconds double precision,
    paused_at timestamp with time zone,
    paused_by text,
    pause_reason text,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT queue_max_running_check CHECK ((max_running >= 0)),
    CONSTRAINT queue_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$'::text)),
    CONSTRAINT queue_pause_fields CHECK (((paused_at IS NOT NULL) OR ((paused_by IS NULL) AND (pause_reason IS NULL)))),
    CONSTRAINT queue_rate_both CHECK (((rate_limit IS NULL) = (rate_period_seconds IS NULL))),
    CONSTRAINT queue_rate_limit_check CHECK ((rate_limit >= 0)),
    CONSTRAINT queue_rate_period_check CHECK ((rate_period_seconds > (0)::double precision))
);

--
-- Name: TABLE queue; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON TABLE pgsched.queue IS 'a queue''s limits across every worker (max_running; rate_limit starts per rate_period_seconds) and its pause; a queue with no row has none';

--
-- Name: queue_pause_v1(text, text, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.queue_pause_v1(queue_name text, reason text DEFAULT NULL::text, tenant text DEFAULT NULL::text, by text DEFAULT NULL::text) RETURNS pgsched.queue
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    who text;
    r pgsched.queue;
BEGIN
    queue_pause_v1.tenant := pgsched_internal.caller_tenant_v1(queue_pause_v1.tenant);
    PERFORM pgsched_internal.limits_queue_check_v1(queue_pause_v1.tenant, queue_name);
    who := pgsched_internal.limits_by_v1(by);
    reason := nullif(btrim(reason), '');
    IF reason ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'reason: % must hold no control characters (newlines, escapes): it is shown on one line',
            quote_literal(left(reason, 40)) USING ERRCODE = 'invalid_parameter_value';
    ELSIF length(reason) > 500 THEN
        RAISE EXCEPTION 'reason: % must be at most 500 characters (it has %)', quote_literal(left(reason, 40) || '…'),
            length(reason) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgsched.queue AS q (tenant, name, paused_at, paused_by, pause_reason)
    VALUES (queue_pause_v1.tenant, queue_name, now(), who, reason)
    ON CONFLICT ON CONSTRAINT queue_pkey DO UPDATE
       SET paused_at = coalesce(q.paused_at, excluded.paused_at),
           paused_by = CASE WHEN q.paused_at IS NULL THEN excluded.paused_by ELSE q.paused_by END,
           pause_reason = coalesce(excluded.pause_reason, q.pause_reason),
           updated_at = now()
    RETURNING q.* INTO r;
    RETURN r;
END $$;

--
-- Name: queue_resume_v1(text, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.queue_resume_v1(queue_name text, tenant text DEFAULT NULL::text, by text DEFAULT NULL::text) RETURNS pgsched.queue
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    r pgsched.queue;
BEGIN
    queue_resume_v1.tenant := pgsched_internal.caller_tenant_v1(queue_resume_v1.tenant);
    PERFORM pgsched_internal.limits_queue_check_v1(queue_resume_v1.tenant, queue_name);
    PERFORM pgsched_internal.limits_by_v1(by);
    UPDATE pgsched.queue q
       SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, updated_at = now()
     WHERE q.tenant = queue_resume_v1.tenant AND q.name = queue_name AND q.paused_at IS NOT NULL;
    SELECT * INTO r FROM pgsched.queue q WHERE q.tenant = queue_resume_v1.tenant AND q.name = queue_name;
    IF NOT FOUND THEN
        r := ROW(queue_resume_v1.tenant, queue_name, NULL, NULL, NULL, NULL, NULL, NULL, now())::pgsched.queue;
    END IF;
    PERFORM pg_notify('pgsched_execution', queue_resume_v1.tenant);
    RETURN r;
END $$;

--
-- Name: queue_set_limits_v1(text, integer, integer, double precision, text[], text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.queue_set_limits_v1(queue_name text, max_running integer DEFAULT NULL::integer, rate_limit integer DEFAULT NULL::integer, rate_period_seconds double precision DEFAULT NULL::double precision, clear text[] DEFAULT '{}'::text[], tenant text DEFAULT NULL::text) RETURNS pgsched.queue
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    bad text;
    r pgsched.queue;
    was pgsched.queue;
BEGIN
    queue_set_limits_v1.tenant := pgsched_internal.caller_tenant_v1(queue_set_limits_v1.tenant);
    PERFORM pgsched_internal.limits_queue_check_v1(queue_set_limits_v1.tenant, queue_name);
    clear := coalesce(clear, '{}');
    SELECT c INTO bad FROM unnest(clear) AS c WHERE c IS NULL OR c NOT IN ('max_running', 'rate_limit') LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'clear: % is not a limit of a queue (max_running, rate_limit)',
            coalesce(quote_literal(bad), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_running IS NOT NULL AND max_running < 1 THEN
        RAISE EXCEPTION 'max_running: % must be an integer from 1 (NULL leaves it; clear => ''{max_running}'' removes it)',
            max_running USING ERRCODE = 'invalid_parameter_value';
    ELSIF rate_limit IS NOT NULL AND rate_limit < 1 THEN
        RAISE EXCEPTION 'rate_limit: % must be an integer from 1 (NULL leaves it; clear => ''{rate_limit}'' removes it)',
            rate_limit USING ERRCODE = 'invalid_parameter_value';
    ELSIF rate_period_seconds IS NOT NULL
          AND NOT (rate_period_seconds >= 0.001 AND rate_period_seconds <= 366 * 86400) THEN
        RAISE EXCEPTION 'rate_period_seconds: % must be a number of seconds from 0.001, at most 31622400 (a year)',
            rate_period_seconds USING ERRCODE = 'invalid_parameter_value';
    ELSIF max_running IS NOT NULL AND 'max_running' = ANY (clear) THEN
        RAISE EXCEPTION 'max_running: % given and cleared at once', max_running
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF (rate_limit IS NOT NULL OR rate_period_seconds IS NOT NULL) AND 'rate_limit' = ANY (clear) THEN
        RAISE EXCEPTION 'rate_limit: % per % s given and cleared at once', rate_limit, rate_period_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO was FROM pgsched.queue q
     WHERE q.tenant = queue_set_limits_v1.tenant AND q.name = queue_name FOR UPDATE;
    IF (coalesce(rate_limit, was.rate_limit) IS NULL) <> (coalesce(rate_period_seconds, was.rate_period_seconds) IS NULL)
       AND NOT 'rate_limit' = ANY (clear) THEN
        IF rate_limit IS NOT NULL THEN
            RAISE EXCEPTION 'rate_period_seconds: a rate limit of % needs a period (rate_period_seconds)', rate_limit
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RAISE EXCEPTION 'rate_limit: a period of % s needs a rate limit (rate_limit)', rate_period_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the row as it will be (a CHECK holds the row an INSERT proposes, before its conflict)
    max_running := CASE WHEN 'max_running' = ANY (clear) THEN NULL ELSE coalesce(max_running, was.max_running) END;
    rate_limit := CASE WHEN 'rate_limit' = ANY (clear) THEN NULL ELSE coalesce(rate_limit, was.rate_limit) END;
    rate_period_seconds := CASE WHEN 'rate_limit' = ANY (clear) THEN NULL
                                ELSE coalesce(rate_period_seconds, was.rate_period_seconds) END;
    INSERT INTO pgsched.queue AS q (tenant, name, max_running, rate_limit, rate_period_seconds)
    VALUES (queue_set_limits_v1.tenant, queue_name, max_running, rate_limit, rate_period_seconds)
    ON CONFLICT ON CONSTRAINT queue_pkey DO UPDATE
       SET max_running = excluded.max_running, rate_limit = excluded.rate_limit,
           rate_period_seconds = excluded.rate_period_seconds, updated_at = now()
    RETURNING q.* INTO r;
    PERFORM pg_notify('pgsched_execution', queue_set_limits_v1.tenant);
    RETURN r;
END $$;

--
-- Name: resume_v1(text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.resume_v1(task_name text, tenant text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    resume_v1.tenant := pgsched_internal.caller_tenant_v1(resume_v1.tenant);
    UPDATE pgsched.task k
       SET enabled = true, next_fire_at = CASE WHEN k.enabled OR k.schedule_kind = 'once' THEN k.next_fire_at END,
           updated_at = now()
     WHERE k.tenant = resume_v1.tenant AND k.name = resume_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(task_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN true;
END $$;

--
-- Name: secret_delete_v1(text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.secret_delete_v1(name text, tenant text DEFAULT NULL::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    secret_delete_v1.tenant := pgsched_internal.caller_tenant_v1(secret_delete_v1.tenant);
    PERFORM pgsched_internal.secret_writer_check_v1();
    PERFORM pgsched_internal.secret_check_v1(secret_delete_v1.tenant, secret_delete_v1.name);
    DELETE FROM pgsched_internal.secret s
     WHERE s.tenant = secret_delete_v1.tenant AND s.name = secret_delete_v1.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'secret: no secret % in tenant %', quote_literal(secret_delete_v1.name),
            quote_literal(secret_delete_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

--
-- Name: secret_list_v1(text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.secret_list_v1(tenant text DEFAULT NULL::text) RETURNS TABLE(secret_name text, key_id text, created_at timestamp with time zone, created_by text, updated_at timestamp with time zone, updated_by text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    t text := pgsched_internal.caller_tenant_v1(secret_list_v1.tenant);
BEGIN
    RETURN QUERY
        SELECT s.name, s.key_id, s.created_at, s.created_by, s.updated_at, s.updated_by
          FROM pgsched_internal.secret s
         WHERE s.tenant = t
         ORDER BY s.name;
END $$;

--
-- Name: secret_set_v1(text, bytea, bytea, text, text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.secret_set_v1(name text, ciphertext bytea, nonce bytea, key_id text, tenant text DEFAULT NULL::text, by text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $_$
DECLARE
    who text;
    created boolean;
BEGIN
    secret_set_v1.tenant := pgsched_internal.caller_tenant_v1(secret_set_v1.tenant);
    PERFORM pgsched_internal.secret_writer_check_v1();
    PERFORM pgsched_internal.secret_check_v1(secret_set_v1.tenant, secret_set_v1.name);
    who := pgsched_internal.limits_by_v1(by);
    IF ciphertext IS NULL OR octet_length(ciphertext) NOT BETWEEN 16 AND 65552 THEN
        RAISE EXCEPTION 'ciphertext: % bytes; a sealed value has 16 to 65552 (a value of at most 64 KiB and its tag)',
            coalesce(octet_length(ciphertext)::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    ELSIF nonce IS NULL OR octet_length(nonce) <> 12 THEN
        RAISE EXCEPTION 'nonce: % bytes; AES-GCM''s nonce has 12', coalesce(octet_length(nonce)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF key_id IS NULL OR key_id !~ '^[0-9a-f]{16}$' THEN
        RAISE EXCEPTION 'key_id: % must be 16 hex digits (pgsched/secret_keys.py key_id)',
            coalesce(quote_literal(left(key_id, 40)), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgsched_internal.secret AS s (tenant, name, ciphertext, nonce, key_id, created_by, updated_by)
    VALUES (secret_set_v1.tenant, secret_set_v1.name, secret_set_v1.ciphertext, secret_set_v1.nonce,
            secret_set_v1.key_id, who, who)
    ON CONFLICT ON CONSTRAINT secret_pkey DO UPDATE
       SET ciphertext = excluded.ciphertext, nonce = excluded.nonce, key_id = excluded.key_id,
           updated_at = now(), updated_by = excluded.updated_by
    RETURNING (s.xmax = 0) INTO created;
    RETURN created;
END $_$;

--
-- Name: task; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.task (
    id bigint NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    description text,
    schedule_kind text DEFAULT 'none'::text NOT NULL,
    schedule_expr text,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    schedule_anchor timestamp with time zone,
    handler_kind text NOT NULL,
    command text,
    argv text[],
    python_target text,
    env jsonb DEFAULT '{}'::jsonb NOT NULL,
    stdin text,
    run_as_user text,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    timeout_seconds double precision,
    max_attempts integer DEFAULT 1 NOT NULL,
    retry_policy text DEFAULT 'exponential'::text NOT NULL,
    retry_base_seconds double precision DEFAULT 10 NOT NULL,
    retry_max_seconds double precision DEFAULT 3600 NOT NULL,
    priority smallint DEFAULT 5 NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    next_fire_at timestamp with time zone,
    last_fire_at timestamp with time zone,
    source text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    no_retry_exit_codes integer[] DEFAULT '{}'::integer[] NOT NULL,
    no_retry_exceptions text[] DEFAULT '{}'::text[] NOT NULL,
    misfire_policy text DEFAULT 'once'::text NOT NULL,
    idempotent boolean DEFAULT false NOT NULL,
    missed_fires bigint DEFAULT 0 NOT NULL,
    tags text[] DEFAULT '{}'::text[] NOT NULL,
    missed_fires_seen bigint DEFAULT 0 NOT NULL,
    paused_at timestamp with time zone,
    paused_by text,
    pause_reason text,
    max_running integer,
    rate_limit integer,
    rate_period_seconds double precision,
    concurrency_key text,
    key_max_running integer,
    key_rate_limit integer,
    key_rate_period_seconds double precision,
    overlap_policy text DEFAULT 'allow'::text NOT NULL,
    unique_policy text DEFAULT 'none'::text NOT NULL,
    unique_period_seconds double precision,
    unique_scope text DEFAULT 'task'::text NOT NULL,
    windowed boolean GENERATED ALWAYS AS (((overlap_policy <> 'allow'::text) OR (unique_policy <> 'none'::text) OR (unique_period_seconds IS NOT NULL))) STORED,
    sensitive_params text[] DEFAULT '{}'::text[] NOT NULL,
    limit_cpu_seconds integer,
    limit_memory_bytes bigint,
    limit_nofile integer,
    limit_nproc integer,
    limit_fsize_bytes bigint,
    network boolean,
    python_isolation text,
    CONSTRAINT task_check1 CHECK (((schedule_kind = 'none'::text) = (schedule_expr IS NULL))),
    CONSTRAINT task_concurrency_key_check CHECK (((length(concurrency_key) >= 1) AND (length(concurrency_key) <= 200))),
    CONSTRAINT task_handler_check CHECK ((((handler_kind = 'shell'::text) AND (command IS NOT NULL)) OR ((handler_kind = 'argv'::text) AND (argv IS NOT NULL) AND (cardinality(argv) > 0)) OR ((handler_kind = 'python'::text) AND (python_target IS NOT NULL)) OR (handler_kind = 'dag'::text))),
    CONSTRAINT task_handler_kind_check CHECK ((handler_kind = ANY (ARRAY['shell'::text, 'argv'::text, 'python'::text, 'dag'::text]))),
    CONSTRAINT task_key_limits_need_key CHECK (((concurrency_key IS NOT NULL) OR ((key_max_running IS NULL) AND (key_rate_limit IS NULL)))),
    CONSTRAINT task_key_max_running_check CHECK ((key_max_running >= 0)),
    CONSTRAINT task_key_rate_both CHECK (((key_rate_limit IS NULL) = (key_rate_period_seconds IS NULL))),
    CONSTRAINT task_key_rate_limit_check CHECK ((key_rate_limit >= 0)),
    CONSTRAINT task_key_rate_period_check CHECK ((key_rate_period_seconds > (0)::double precision)),
    CONSTRAINT task_limit_cpu_seconds_check CHECK ((limit_cpu_seconds > 0)),
    CONSTRAINT task_limit_fsize_bytes_check CHECK ((limit_fsize_bytes > 0)),
    CONSTRAINT task_limit_memory_bytes_check CHECK ((limit_memory_bytes > 0)),
    CONSTRAINT task_limit_nofile_check CHECK ((limit_nofile > 0)),
    CONSTRAINT task_limit_nproc_check CHECK ((limit_nproc > 0)),
    CONSTRAINT task_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT task_max_running_check CHECK ((max_running >= 0)),
    CONSTRAINT task_misfire_policy_check CHECK ((misfire_policy = ANY (ARRAY['skip'::text, 'once'::text, 'all'::text]))),
    CONSTRAINT task_next_fire_after_last CHECK ((next_fire_at > last_fire_at)),
    CONSTRAINT task_overlap_policy_check CHECK ((overlap_policy = ANY (ARRAY['allow'::text, 'skip'::text, 'queue_one'::text]))),
    CONSTRAINT task_pause_only_when_paused CHECK (((NOT enabled) OR ((paused_at IS NULL) AND (paused_by IS NULL) AND (pause_reason IS NULL)))),
    CONSTRAINT task_paused_by_check CHECK ((paused_by = ANY (ARRAY['operator'::text, 'scheduler'::text]))),
    CONSTRAINT task_priority_check CHECK (((priority >= 1) AND (priority <= 10))),
    CONSTRAINT task_python_isolation_check CHECK ((python_isolation = ANY (ARRAY['process'::text, 'thread'::text]))),
    CONSTRAINT task_rate_both CHECK (((rate_limit IS NULL) = (rate_period_seconds IS NULL))),
    CONSTRAINT task_rate_limit_check CHECK ((rate_limit >= 0)),
    CONSTRAINT task_rate_period_check CHECK ((rate_period_seconds > (0)::double precision)),
    CONSTRAINT task_retry_base_seconds_check CHECK ((retry_base_seconds >= (0)::double precision)),
    CONSTRAINT task_retry_max_seconds_check CHECK ((retry_max_seconds >= (0)::double precision)),
    CONSTRAINT task_retry_policy_check CHECK ((retry_policy = ANY (ARRAY['fixed'::text, 'linear'::text, 'exponential'::text, 'exponential_jitter'::text]))),
    CONSTRAINT task_schedule_kind_check CHECK ((schedule_kind = ANY (ARRAY['cron'::text, 'interval'::text, 'once'::text, 'none'::text]))),
    CONSTRAINT task_timeout_seconds_check CHECK (((timeout_seconds IS NULL) OR (timeout_seconds > (0)::double precision))),
    CONSTRAINT task_unique_key_needs_key CHECK (((unique_scope = 'task'::text) OR (concurrency_key IS NOT NULL))),
    CONSTRAINT task_unique_period_check CHECK ((unique_period_seconds > (0)::double precision)),
    CONSTRAINT task_unique_policy_check CHECK ((unique_policy = ANY (ARRAY['none'::text, 'pending'::text]))),
    CONSTRAINT task_unique_scope_check CHECK ((unique_scope = ANY (ARRAY['task'::text, 'key'::text])))
);

--
-- Name: COLUMN task.overlap_policy; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.overlap_policy IS 'what a scheduler''s fire does while an execution of the task is live: allow, skip, queue_one (0022)';

--
-- Name: COLUMN task.unique_policy; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.unique_policy IS 'none, or pending: at most one pending execution of the unique_scope at a time (0022)';

--
-- Name: COLUMN task.unique_period_seconds; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.unique_period_seconds IS 'at most one enqueue of the unique_scope per this many seconds (debounce); NULL: none (0022)';

--
-- Name: COLUMN task.unique_scope; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.unique_scope IS 'what the unique window counts: the task, or the rendered concurrency key (0022)';

--
-- Name: COLUMN task.sensitive_params; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.sensitive_params IS 'params keys (any depth, any case) masked for viewers beside those whose name says secret (0031)';

--
-- Name: COLUMN task.limit_cpu_seconds; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.limit_cpu_seconds IS 'RLIMIT_CPU of its commands, seconds (NULL: the worker''s --limit-cpu)';

--
-- Name: COLUMN task.limit_memory_bytes; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.limit_memory_bytes IS 'RLIMIT_AS of its commands'' processes, bytes (NULL: the worker''s --limit-memory)';

--
-- Name: COLUMN task.limit_nofile; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.limit_nofile IS 'RLIMIT_NOFILE of its commands'' processes (NULL: the worker''s --limit-nofile)';

--
-- Name: COLUMN task.limit_nproc; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.limit_nproc IS 'RLIMIT_NPROC of its commands'' user (NULL: the worker''s --limit-nproc)';

--
-- Name: COLUMN task.limit_fsize_bytes; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.limit_fsize_bytes IS 'RLIMIT_FSIZE of its commands, bytes (NULL: the worker''s --limit-fsize)';

--
-- Name: COLUMN task.network; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.network IS 'whether its sandboxed commands may use the host''s network (NULL: the worker''s --allow-network)';

--
-- Name: COLUMN task.python_isolation; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.task.python_isolation IS 'where its Python handler runs: process or thread (NULL: the worker''s --python-isolation)';

--
-- Name: task_v1(text, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.task_v1(task_name text, tenant text DEFAULT NULL::text) RETURNS SETOF pgsched.task
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    task_v1.tenant := pgsched_internal.caller_tenant_v1(task_v1.tenant);
    RETURN QUERY
        SELECT s.* FROM pgsched.task t CROSS JOIN LATERAL pgsched_internal.shown_v1(t, t.sensitive_params) s
         WHERE t.tenant = task_v1.tenant AND t.name = task_v1.task_name AND t.deleted_at IS NULL;
END $$;

--
-- Name: tenant; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.tenant (
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    max_running integer DEFAULT 100,
    max_starts_per_hour integer DEFAULT 10000,
    max_compute_minutes_per_month bigint DEFAULT 50000,
    max_log_bytes bigint DEFAULT '100000000000'::bigint,
    weight integer DEFAULT 1 NOT NULL,
    alert_webhook text,
    CONSTRAINT tenant_alert_webhook_check CHECK (((alert_webhook ~ '^https?://[^/?#[:space:]]+'::text) AND (length(alert_webhook) <= 2000))),
    CONSTRAINT tenant_max_compute_minutes_check CHECK ((max_compute_minutes_per_month >= 0)),
    CONSTRAINT tenant_max_log_bytes_check CHECK ((max_log_bytes >= 0)),
    CONSTRAINT tenant_max_running_check CHECK ((max_running >= 0)),
    CONSTRAINT tenant_max_starts_per_hour_check CHECK ((max_starts_per_hour >= 0)),
    CONSTRAINT tenant_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'::text)),
    CONSTRAINT tenant_weight_check CHECK (((weight >= 1) AND (weight <= 100)))
);

--
-- Name: TABLE tenant; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON TABLE pgsched.tenant IS 'the tenants of this installation (pgsched tenant create|list|delete)';

--
-- Name: COLUMN tenant.max_running; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant.max_running IS 'executions of the tenant claimed at once, across every worker (NULL: no limit)';

--
-- Name: COLUMN tenant.max_starts_per_hour; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant.max_starts_per_hour IS 'executions the tenant''s claims may start in one clock hour, UTC (NULL: no limit)';

--
-- Name: COLUMN tenant.max_compute_minutes_per_month; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant.max_compute_minutes_per_month IS 'handler minutes of the tenant''s finished attempts in one calendar month, UTC (NULL: no limit)';

--
-- Name: COLUMN tenant.max_log_bytes; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant.max_log_bytes IS 'bytes of the tenant''s stored execution log lines (NULL: no limit)';

--
-- Name: COLUMN tenant.weight; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant.weight IS 'the tenant''s share of a claim against other tenants with ready work (1 to 100)';

--
-- Name: COLUMN tenant.alert_webhook; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant.alert_webhook IS 'where the tenant''s own alerts (quota) are POSTed; NULL: none (migration 0034)';

--
-- Name: tenant_set_quotas_v1(text, integer, integer, bigint, bigint, integer, text[]); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.tenant_set_quotas_v1(tenant text, max_running integer DEFAULT NULL::integer, max_starts_per_hour integer DEFAULT NULL::integer, max_compute_minutes_per_month bigint DEFAULT NULL::bigint, max_log_bytes bigint DEFAULT NULL::bigint, weight integer DEFAULT NULL::integer, clear text[] DEFAULT '{}'::text[]) RETURNS pgsched.tenant
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
#variable_conflict use_variable
DECLARE
    t text := tenant_set_quotas_v1.tenant;
    r pgsched.tenant;
    bad text;
    n bigint;
    f text;
BEGIN
    IF NOT (pgsched_internal.is_instance_v1()
            OR (pg_has_role(session_user, 'pgsched_web', 'MEMBER')
                AND NOT EXISTS (SELECT FROM pgsched.tenant_role m WHERE m.role_name = session_user)
                AND pgsched_internal.session_tenant_v1() = '*')) THEN
        RAISE EXCEPTION 'tenant: quotas are the installation''s to set; role % acts for %',
            quote_ident(session_user),
            coalesce('tenant ' || quote_literal(pgsched_internal.session_tenant_v1()) || ' only', 'no tenant')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'an installation-wide login (pgsched_instance or the owner) sets quotas';
    END IF;
    IF t IS NULL OR NOT EXISTS (SELECT FROM pgsched.tenant x WHERE x.name = t) THEN
        RAISE EXCEPTION 'tenant: no tenant %', coalesce(quote_literal(t), 'NULL') USING ERRCODE = 'no_data_found';
    END IF;
    clear := coalesce(clear, '{}');
    SELECT c INTO bad FROM unnest(clear) AS c
     WHERE c IS NULL OR c NOT IN ('max_running', 'max_starts_per_hour', 'max_compute_minutes_per_month', 'max_log_bytes')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'clear: % is not a quota that can be none (max_running, max_starts_per_hour, '
                        'max_compute_minutes_per_month, max_log_bytes)', coalesce(quote_literal(bad), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH f IN ARRAY ARRAY['max_running', 'max_starts_per_hour', 'max_compute_minutes_per_month', 'max_log_bytes'] LOOP
        n := CASE f WHEN 'max_running' THEN max_running WHEN 'max_starts_per_hour' THEN max_starts_per_hour
                    WHEN 'max_compute_minutes_per_month' THEN max_compute_minutes_per_month
                    ELSE max_log_bytes END;
        IF n < 0 THEN
            RAISE EXCEPTION '%: % must be an integer from 0 (NULL leaves it; clear => ''{%}'' removes it)', f, n, f
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF n IS NOT NULL AND f = ANY (clear) THEN
            RAISE EXCEPTION '%: % given and cleared at once', f, n USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF weight IS NOT NULL AND NOT weight BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'weight: % must be an integer from 1 to 100', weight USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE pgsched.tenant x
       SET max_running = CASE WHEN 'max_running' = ANY (clear) THEN NULL ELSE coalesce(max_running, x.max_running) END,
           max_starts_per_hour = CASE WHEN 'max_starts_per_hour' = ANY (clear) THEN NULL
                                      ELSE coalesce(max_starts_per_hour, x.max_starts_per_hour) END,
           max_compute_minutes_per_month = CASE WHEN 'max_compute_minutes_per_month' = ANY (clear) THEN NULL
                                                ELSE coalesce(max_compute_minutes_per_month,
                                                              x.max_compute_minutes_per_month) END,
           max_log_bytes = CASE WHEN 'max_log_bytes' = ANY (clear) THEN NULL ELSE coalesce(max_log_bytes, x.max_log_bytes) END,
           weight = coalesce(weight, x.weight)
     WHERE x.name = t
    RETURNING x.* INTO r;
    PERFORM pg_notify('pgsched_execution', t);
    RETURN r;
END $$;

--
-- Name: tenant_usage_v1(text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.tenant_usage_v1(tenant text DEFAULT NULL::text) RETURNS TABLE(name text, max_running integer, running bigint, max_starts_per_hour integer, hour_starts bigint, max_compute_minutes_per_month bigint, compute_minutes double precision, max_log_bytes bigint, log_bytes bigint, weight integer, over text[], measured_at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    t text := pgsched_internal.caller_tenant_v1(tenant_usage_v1.tenant);
BEGIN
    RETURN QUERY
        SELECT x.name, x.max_running,
               (SELECT count(*) FROM pgsched.execution e WHERE e.tenant = x.name AND e.state = 'running'),
               x.max_starts_per_hour,
               CASE WHEN u.hour_start = date_trunc('hour', now(), 'UTC') THEN u.hour_starts ELSE 0 END,
               x.max_compute_minutes_per_month,
               CASE WHEN u.month_start = date_trunc('month', now(), 'UTC') THEN u.compute_seconds / 60 ELSE 0 END,
               x.max_log_bytes, coalesce(u.log_bytes, 0), x.weight, coalesce(u.over, '{}'), u.measured_at
          FROM pgsched.tenant x LEFT JOIN pgsched.tenant_usage u ON u.tenant = x.name
         WHERE x.name = t;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant: no tenant %', quote_literal(t) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

--
-- Name: trigger_v1(text, jsonb, text); Type: FUNCTION; Schema: pgsched; Owner: -
--

CREATE FUNCTION pgsched.trigger_v1(task_name text, params jsonb DEFAULT NULL::jsonb, tenant text DEFAULT NULL::text) RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
    SELECT pgsched.enqueue_v1(task_name, params, NULL, NULL, NULL, tenant, 'manual');
$$;

--
-- Name: access_prune_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.access_prune_v1(OUT events bigint, OUT sessions bigint) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    DELETE FROM pgsched.audit_event
     WHERE at < now() - coalesce((pgsched_internal.setting_v1('audit_retention_days'))::float8, 90)
                        * interval '1 day';
    GET DIAGNOSTICS events = ROW_COUNT;
    DELETE FROM pgsched.web_session
     WHERE least(expires_at, coalesce(revoked_at, 'infinity')) < now() - interval '1 day';
    GET DIAGNOSTICS sessions = ROW_COUNT;
END $$;

--
-- Name: FUNCTION access_prune_v1(OUT events bigint, OUT sessions bigint); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.access_prune_v1(OUT events bigint, OUT sessions bigint) IS 'removes audit events past retention and web sessions ended over a day ago (migration 0019)';

--
-- Name: at_text_v1(timestamp with time zone); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.at_text_v1(at timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT format('%s UTC (in %s s)', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
                  greatest(ceil(extract(epoch FROM at - now())), 0)::bigint);
$$;

--
-- Name: FUNCTION at_text_v1(at timestamp with time zone); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.at_text_v1(at timestamp with time zone) IS 'a time of a pending reason: UTC, and in how many seconds by now() (migration 0033)';

--
-- Name: audit_record_v1(text, text, text, text, text, jsonb, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.audit_record_v1(tenant text, actor_kind text, actor text, action text, target text, detail jsonb, ip text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    cap integer := coalesce((pgsched_internal.setting_v1('audit_noisy_per_minute'))::integer, 600);
    made bigint;
BEGIN
    -- failed sign-ins and refusals, which anyone can cause as often as they like: at most
    -- cap a minute per action and tenant (a flood shows as that many rows, and fills nothing)
    IF action IN ('sign_in_failed', 'forbidden') AND (
           SELECT count(*) FROM (
               SELECT 1 FROM pgsched.audit_event e
                WHERE e.action = audit_record_v1.action
                  AND e.tenant_key = coalesce(audit_record_v1.tenant, '')
                  AND e.at > now() - interval '1 minute'
                LIMIT cap) recent) >= cap THEN
        RETURN NULL;
    END IF;
    INSERT INTO pgsched.audit_event AS e (tenant, actor_kind, actor, action, target, detail, ip)
    VALUES (audit_record_v1.tenant, audit_record_v1.actor_kind, audit_record_v1.actor,
            audit_record_v1.action, audit_record_v1.target, audit_record_v1.detail,
            audit_record_v1.ip)
    RETURNING e.id INTO made;
    RETURN made;
END $$;

--
-- Name: FUNCTION audit_record_v1(tenant text, actor_kind text, actor text, action text, target text, detail jsonb, ip text); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.audit_record_v1(tenant text, actor_kind text, actor text, action text, target text, detail jsonb, ip text) IS 'records one audit event (capped per minute for failed sign-ins and refusals); its id, or NULL when the cap left it out (migration 0019)';

--
-- Name: caller_tenant_v1(text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.caller_tenant_v1(asked text) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    own text;
BEGIN
    IF pgsched_internal.is_instance_v1() THEN
        RETURN coalesce(asked, nullif(nullif(current_setting('pgsched.tenant', true), ''), '*'), 'default');
    END IF;
    own := pgsched_internal.session_tenant_v1();
    IF own = '*' THEN
        RETURN coalesce(asked, 'default');
    ELSIF own IS NULL THEN
        RAISE EXCEPTION 'tenant: role % acts for no tenant', quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'pgsched tenant create NAME --login ROLE maps a login to its tenant';
    ELSIF asked IS NOT NULL AND asked <> own THEN
        RAISE EXCEPTION 'tenant: role % acts for tenant % only, not %', quote_ident(session_user),
            quote_literal(own), quote_literal(asked)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN own;
END $$;

--
-- Name: caller_trigger_v1(text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.caller_trigger_v1(asked text) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    IF asked IN ('schedule', 'dag') AND NOT pgsched_internal.is_instance_v1()
       AND NOT pg_has_role(session_user, 'pgsched_engine', 'MEMBER') THEN
        RAISE EXCEPTION 'trigger: % is pgsched''s own; an application enqueues with api, manual or insert',
            quote_literal(asked)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN asked;
END $$;

--
-- Name: claim_tenant_v1(text, text[], integer, timestamp with time zone); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.claim_tenant_v1(t text, queues text[], lim integer, at timestamp with time zone, OUT picks bigint[], OUT waited boolean, OUT free_at timestamp with time zone, OUT weight integer) RETURNS record
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    ten record;
    use record;
    g record;
    c record;
    budget bigint;
    hour_left bigint;
    closed text[] := '{}';
    open_queues text[];
    -- the scopes looked at: 'kind period name' → used (running, or starts in the window,
    -- plus what this claim took)
    sk text[] := '{}';
    su bigint[] := '{}';
    x_tasks bigint[] := '{}';
    x_keys text[] := '{}';
    ck text[];   -- this row's limits: kind, name, limit, period
    cn text[];
    cl bigint[];
    cp float8[];
    i int;
    j int;
    k text;
    ok boolean;
    skipped boolean;
    reads int := 0;
BEGIN
    picks := '{}';
    waited := false;
    SELECT * INTO ten FROM pgsched.tenant x WHERE x.name = t;
    weight := coalesce(ten.weight, 1);
    SELECT * INTO use FROM pgsched.tenant_usage u WHERE u.tenant = t;
    IF use.over IS NOT NULL AND use.over <> '{}' THEN
        waited := true;  -- a slow quota (compute, log bytes): the usage job lifts it
        RETURN;
    END IF;
    budget := lim;
    IF ten.max_starts_per_hour IS NOT NULL THEN
        hour_left := ten.max_starts_per_hour
                     - CASE WHEN use.hour_start = date_trunc('hour', at, 'UTC') THEN use.hour_starts ELSE 0 END;
        budget := least(budget, hour_left);
    END IF;
    IF ten.max_running IS NOT NULL AND budget > 0 THEN
        budget := least(budget, ten.max_running - (SELECT count(*) FROM pgsched.execution e
                                                    WHERE e.tenant = t AND e.state = 'running'));
    END IF;
    IF budget <= 0 THEN
        waited := true;
        IF hour_left <= 0 THEN
            free_at := date_trunc('hour', at, 'UTC') + interval '1 hour';
        END IF;
        RETURN;
    END IF;
    -- queues paused, or at a limit already, are not read
    FOR g IN SELECT g.name, g.paused_at, g.max_running, g.rate_limit, g.rate_period_seconds
               FROM pgsched.queue g WHERE g.tenant = t AND g.name = ANY (queues) LOOP
        IF g.paused_at IS NOT NULL THEN
            closed := closed || g.name;
            CONTINUE;
        END IF;
        IF g.max_running IS NOT NULL THEN
            k := 'queue_running 0 ' || g.name;
            sk := sk || k;
            su := su || pgsched_internal.limit_used_v1(t, 'queue_running', g.name, 0, at);
            IF su[cardinality(su)] >= g.max_running THEN
                closed := closed || g.name;
                waited := true;
                CONTINUE;
            END IF;
        END IF;
        IF g.rate_limit IS NOT NULL THEN
            k := 'queue_rate ' || g.rate_period_seconds || ' ' || g.name;
            sk := sk || k;
            su := su || pgsched_internal.limit_used_v1(t, 'queue_rate', g.name, g.rate_period_seconds, at);
            IF su[cardinality(su)] >= g.rate_limit THEN
                closed := closed || g.name;
                waited := true;
                free_at := least(free_at, pgsched_internal.limit_frees_at_v1(t, 'queue_rate', g.name,
                                                                              g.rate_period_seconds, at));
            END IF;
        END IF;
    END LOOP;
    open_queues := ARRAY(SELECT DISTINCT q FROM unnest(queues) AS q WHERE q <> ALL (closed));
    LOOP
        reads := reads + 1;
        skipped := false;
        FOR c IN
            SELECT f.id, f.queue, f.task_id, f.concurrency_key,
                   gq.max_running AS q_max, gq.rate_limit AS q_rate, gq.rate_period_seconds AS q_period,
                   -- 0022: a task whose overlap policy is queue_one runs one execution at a time
                   CASE WHEN k.overlap_policy = 'queue_one' THEN least(coalesce(k.max_running, 1), 1)
                        ELSE k.max_running END AS t_max, k.rate_limit AS t_rate, k.rate_period_seconds AS t_period,
                   k.key_max_running AS k_max, k.key_rate_limit AS k_rate, k.key_rate_period_seconds AS k_period
              FROM unnest(open_queues) AS a(queue)
             CROSS JOIN generate_series(1, 10) AS p(priority)  -- the table's CHECK: 1 to 10
             CROSS JOIN LATERAL (
                   SELECT e.id, e.queue, e.task_id, e.concurrency_key, e.priority, e.run_at
                     FROM pgsched.execution e
                    WHERE e.state = 'pending' AND e.tenant = t AND e.queue = a.queue
                      AND e.priority = p.priority AND e.run_at <= at
                      AND e.task_id <> ALL (x_tasks)
                      AND (e.concurrency_key IS NULL OR e.concurrency_key <> ALL (x_keys))
                      AND e.id <> ALL (picks)
                    ORDER BY e.run_at, e.id
                    LIMIT budget - cardinality(picks)
                      FOR UPDATE SKIP LOCKED) f
              JOIN pgsched.task k ON k.id = f.task_id
              LEFT JOIN pgsched.queue gq ON gq.tenant = t AND gq.name = f.queue
             ORDER BY f.priority, f.run_at, f.id
        LOOP
            EXIT WHEN cardinality(picks) >= budget;
            IF c.q_max IS NULL AND c.q_rate IS NULL AND c.t_max IS NULL AND c.t_rate IS NULL
               AND (c.concurrency_key IS NULL OR (c.k_max IS NULL AND c.k_rate IS NULL)) THEN
                picks := picks || c.id;  -- no limit but the tenant's
                CONTINUE;
            END IF;
            ck := '{}'; cn := '{}'; cl := '{}'; cp := '{}';
            IF c.q_max IS NOT NULL THEN
                ck := ck || 'queue_running'::text; cn := cn || c.queue; cl := cl || c.q_max::bigint; cp := cp || 0::float8;
            END IF;
            IF c.q_rate IS NOT NULL THEN
                ck := ck || 'queue_rate'::text; cn := cn || c.queue; cl := cl || c.q_rate::bigint; cp := cp || c.q_period;
            END IF;
            IF c.t_max IS NOT NULL THEN
                ck := ck || 'task_running'::text; cn := cn || c.task_id::text; cl := cl || c.t_max::bigint; cp := cp || 0::float8;
            END IF;
            IF c.t_rate IS NOT NULL THEN
                ck := ck || 'task_rate'::text; cn := cn || c.task_id::text; cl := cl || c.t_rate::bigint; cp := cp || c.t_period;
            END IF;
            IF c.concurrency_key IS NOT NULL AND c.k_max IS NOT NULL THEN
                ck := ck || 'key_running'::text; cn := cn || c.concurrency_key; cl := cl || c.k_max::bigint; cp := cp || 0::float8;
            END IF;
            IF c.concurrency_key IS NOT NULL AND c.k_rate IS NOT NULL THEN
                ck := ck || 'key_rate'::text; cn := cn || c.concurrency_key; cl := cl || c.k_rate::bigint; cp := cp || c.k_period;
            END IF;
            ok := true;
            FOR j IN 1 .. cardinality(ck) LOOP
                k := ck[j] || ' ' || cp[j] || ' ' || cn[j];
                i := array_position(sk, k);
                IF i IS NULL THEN
                    sk := sk || k;
                    su := su || pgsched_internal.limit_used_v1(t, ck[j], cn[j], cp[j], at);
                    i := cardinality(su);
                END IF;
                IF su[i] >= cl[j] THEN
                    ok := false;
                    IF ck[j] LIKE '%_rate' THEN
                        free_at := least(free_at, pgsched_internal.limit_frees_at_v1(t, ck[j], cn[j], cp[j], at));
                    END IF;
                    IF ck[j] LIKE 'task_%' THEN
                        x_tasks := x_tasks || c.task_id;
                    ELSIF ck[j] LIKE 'key_%' THEN
                        x_keys := x_keys || c.concurrency_key;
                    END IF;
                END IF;
            END LOOP;
            IF ok THEN
                picks := picks || c.id;
                FOR j IN 1 .. cardinality(ck) LOOP
                    i := array_position(sk, ck[j] || ' ' || cp[j] || ' ' || cn[j]);
                    su[i] := su[i] + 1;
                END LOOP;
            ELSE
                skipped := true;
                waited := true;
            END IF;
        END LOOP;
        EXIT WHEN cardinality(picks) >= budget OR NOT skipped OR reads >= 3;
    END LOOP;
    -- a tenant quota cut this claim short: what is due behind waits for it
    IF cardinality(picks) >= budget AND budget < lim THEN
        waited := true;
        IF hour_left <= budget THEN
            free_at := least(free_at, date_trunc('hour', at, 'UTC') + interval '1 hour');
        END IF;
    END IF;
END $$;

--
-- Name: concurrency_key_v1(text, jsonb); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.concurrency_key_v1(template text, params jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    out text := '';
    rest text := template;
    open int;
    close int;
BEGIN
    IF template IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(params) = 'object' THEN
        params := pgsched_internal.params_masked_v1(params, '{}');
    END IF;
    LOOP
        open := strpos(rest, '{');
        EXIT WHEN open = 0;
        close := strpos(substr(rest, open + 1), '}');
        EXIT WHEN close = 0;
        out := out || substr(rest, 1, open - 1)
                   || left(coalesce(CASE WHEN jsonb_typeof(params) = 'object'
                                         THEN params ->> substr(rest, open + 1, close - 1) END, ''),
                           500);  -- a key is cut at 500: a 10 MB param costs no more
        EXIT WHEN length(out) >= 500;
        rest := substr(rest, open + close + 1);
    END LOOP;
    RETURN left(out || rest, 500);
END $$;

--
-- Name: execution_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.execution_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: execution; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.execution (
    id bigint DEFAULT nextval('pgsched.execution_id_seq'::regclass) NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    task_id bigint NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    run_at timestamp with time zone NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    trigger text DEFAULT 'api'::text NOT NULL,
    priority smallint DEFAULT 5 NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    idempotency_key text,
    attempt integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 1 NOT NULL,
    worker_id bigint,
    leader_epoch bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    lease_id bigint,
    cancel_requested_at timestamp with time zone,
    lost_attempts integer DEFAULT 0 NOT NULL,
    budget_delay_seconds double precision,
    dag_run_id bigint,
    confirm_start boolean DEFAULT false NOT NULL,
    start_confirmed_at timestamp with time zone,
    backoff_from_attempt integer DEFAULT 0 NOT NULL,
    concurrency_key text,
    windowed boolean DEFAULT false NOT NULL,
    progress double precision,
    progress_message text,
    progress_at timestamp with time zone,
    CONSTRAINT execution_priority_check CHECK (((priority >= 1) AND (priority <= 10))),
    CONSTRAINT execution_progress_check CHECK (((progress >= (0)::double precision) AND (progress <= (1)::double precision))),
    CONSTRAINT execution_progress_message_check CHECK ((length(progress_message) <= 500)),
    CONSTRAINT execution_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text]))),
    CONSTRAINT execution_trigger_check CHECK ((trigger = ANY (ARRAY['schedule'::text, 'manual'::text, 'api'::text, 'insert'::text, 'dag'::text])))
)
WITH (fillfactor='70', autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_cost_delay='0', autovacuum_analyze_scale_factor='0.02');

--
-- Name: COLUMN execution.windowed; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.execution.windowed IS 'made for a task with an overlap policy or a unique window, which count it (0022)';

--
-- Name: dag_cancel_execution_v1(pgsched.execution, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_cancel_execution_v1(e pgsched.execution, why text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF e.state = 'pending' THEN
        PERFORM pgsched_internal.finish_v1(e, 'cancelled', why);
    ELSIF e.cancel_requested_at IS NULL THEN
        UPDATE pgsched.execution x SET cancel_requested_at = now() WHERE x.id = e.id;
        PERFORM pg_notify('pgsched_cancel', e.id::text);
    END IF;
END $$;

--
-- Name: dag_close_v1(bigint); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_close_v1(run_id bigint) RETURNS text
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    r pgsched.dag_run;
    bad integer;
    good integer;
    final text;
BEGIN
    SELECT * INTO r FROM pgsched.dag_run x WHERE x.id = dag_close_v1.run_id;
    IF r.state NOT IN ('running', 'failing', 'cancelling') THEN
        RETURN r.state;
    END IF;
    SELECT count(*) FILTER (WHERE n.state IN ('failed', 'cancelled', 'upstream_failed')),
           count(*) FILTER (WHERE n.state = 'succeeded')
      INTO bad, good
      FROM pgsched.dag_node_run n WHERE n.run_id = r.id;
    final := CASE WHEN r.state = 'cancelling' THEN 'cancelled'
                  WHEN r.state = 'failing' THEN 'failed'
                  WHEN bad = 0 THEN 'succeeded'
                  WHEN good > 0 THEN 'partially_succeeded'
                  ELSE 'failed' END;
    UPDATE pgsched.dag_run x SET state = final, finished_at = clock_timestamp() WHERE x.id = r.id;
    PERFORM pg_notify('pgsched_dag', r.id || ' ' || final);
    RETURN final;
END $$;

--
-- Name: dag_condition_v1(jsonb, jsonb); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_condition_v1(condition jsonb, result jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    path text[] := (string_to_array(condition->>'field', '.'))[3:];
    v jsonb := result #> path;
BEGIN
    IF condition ? 'equals' THEN
        RETURN coalesce(v = condition->'equals', false);
    ELSIF condition ? 'not_equals' THEN
        RETURN v IS DISTINCT FROM condition->'not_equals';
    ELSIF condition ? 'in' THEN
        RETURN v IS NOT NULL AND EXISTS (SELECT 1 FROM jsonb_array_elements(condition->'in') AS x(item) WHERE x.item = v);
    ELSIF condition ? 'exists' THEN
        RETURN (v IS NOT NULL AND v <> 'null'::jsonb) = (condition->>'exists')::boolean;
    END IF;
    RAISE EXCEPTION 'condition: % has no test (equals, not_equals, in, exists)', condition
        USING ERRCODE = 'invalid_parameter_value';
END $$;

--
-- Name: dag_decide_v1(text, text, integer, integer, integer, integer, integer); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_decide_v1(rule text, policy text, total integer, succeeded integer, failed integer, skipped integer, upstream_failed integer) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    all_done boolean := succeeded + failed + skipped + upstream_failed = total;
    failures integer := failed + upstream_failed;
BEGIN
    IF total = 0 THEN RETURN 'run'; END IF;
    IF policy = 'continue'
       AND rule IN ('all_success', 'one_success', 'none_failed', 'none_failed_min_one_success') THEN
        -- downstream of a failure runs: a failure counts as a success for these rules
        succeeded := succeeded + failed + upstream_failed;
        failures := 0;
    END IF;
    CASE rule
    WHEN 'all_success' THEN
        IF failures > 0 THEN RETURN 'upstream_failed'; END IF;
        IF skipped > 0 THEN RETURN 'skipped'; END IF;
        RETURN CASE WHEN succeeded = total THEN 'run' ELSE 'wait' END;
    WHEN 'all_failed' THEN
        IF succeeded > 0 OR skipped > 0 THEN RETURN 'skipped'; END IF;
        RETURN CASE WHEN all_done THEN 'run' ELSE 'wait' END;
    WHEN 'all_done' THEN
        RETURN CASE WHEN all_done THEN 'run' ELSE 'wait' END;
    WHEN 'one_success' THEN
        IF succeeded > 0 THEN RETURN 'run'; END IF;
        IF NOT all_done THEN RETURN 'wait'; END IF;
        RETURN CASE WHEN failures > 0 THEN 'upstream_failed' ELSE 'skipped' END;
    WHEN 'one_failed' THEN
        IF failures > 0 THEN RETURN 'run'; END IF;
        RETURN CASE WHEN all_done THEN 'skipped' ELSE 'wait' END;
    WHEN 'none_failed' THEN
        IF failures > 0 THEN RETURN 'upstream_failed'; END IF;
        RETURN CASE WHEN all_done THEN 'run' ELSE 'wait' END;
    WHEN 'none_failed_min_one_success' THEN
        IF failures > 0 THEN RETURN 'upstream_failed'; END IF;
        IF NOT all_done THEN RETURN 'wait'; END IF;
        RETURN CASE WHEN succeeded > 0 THEN 'run' ELSE 'skipped' END;
    ELSE
        NULL;  -- 0003 had no ELSE: an unknown rule raised CASE_NOT_FOUND, not the error below
    END CASE;
    RAISE EXCEPTION 'trigger_rule: % is not a trigger rule', quote_literal(rule)
        USING ERRCODE = 'invalid_parameter_value';
END $$;

--
-- Name: dag_run; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.dag_run (
    id bigint NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    dag_id bigint NOT NULL,
    state text DEFAULT 'running'::text NOT NULL,
    trigger text NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    failure_policy text NOT NULL,
    nodes integer NOT NULL,
    remaining integer NOT NULL,
    rerun_of bigint,
    leader_epoch bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    error text,
    CONSTRAINT dag_run_state_check CHECK ((state = ANY (ARRAY['running'::text, 'failing'::text, 'cancelling'::text, 'succeeded'::text, 'failed'::text, 'partially_succeeded'::text, 'cancelled'::text]))),
    CONSTRAINT dag_run_trigger_check CHECK ((trigger = ANY (ARRAY['schedule'::text, 'manual'::text, 'api'::text, 'rerun'::text])))
);

--
-- Name: dag_enqueue_v1(pgsched.dag_run, text[]); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_enqueue_v1(r pgsched.dag_run, ready text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    made record;
BEGIN
    FOR made IN
        INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                       queue, params, max_attempts, leader_epoch, dag_run_id)
        SELECT t.tenant, t.id, clock_timestamp(), clock_timestamp(), 'dag', t.priority, t.queue,
               t.params || r.params || CASE WHEN cardinality(n.upstream) = 0 THEN '{}'::jsonb ELSE
                   jsonb_build_object('upstream', (
                       SELECT coalesce(jsonb_object_agg(u.node_id, u.result), '{}'::jsonb)
                         FROM unnest(n.upstream) AS up(node_id)
                         JOIN pgsched.dag_node_run u ON u.run_id = r.id AND u.node_id = up.node_id
                        WHERE u.state = 'succeeded'))
               END,
               t.max_attempts, r.leader_epoch, r.id
          FROM unnest(ready) AS rd(node_id)
          JOIN pgsched.dag_node_run n ON n.run_id = r.id AND n.node_id = rd.node_id
          JOIN pgsched.task t ON t.id = n.task_id
        RETURNING id, task_id
    LOOP
        UPDATE pgsched.dag_node_run n
           SET state = 'queued', execution_id = made.id, queued_at = clock_timestamp()
         WHERE n.run_id = r.id AND n.task_id = made.task_id;
    END LOOP;
END $$;

--
-- Name: dag_execution_finished_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_execution_finished_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    r pgsched.dag_run;
    node text;
    node_state text := CASE NEW.state WHEN 'succeeded' THEN 'succeeded' WHEN 'skipped' THEN 'skipped'
                                      WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
BEGIN
    SELECT * INTO r FROM pgsched.dag_run x WHERE x.id = NEW.dag_run_id FOR UPDATE;
    IF NOT FOUND THEN RETURN NULL; END IF;
    UPDATE pgsched.dag_node_run n
       SET state = node_state, result = NEW.result, error = NEW.error, started_at = NEW.started_at,
           finished_at = NEW.finished_at
     WHERE n.run_id = r.id AND n.task_id = NEW.task_id AND n.execution_id = NEW.id AND n.state = 'queued'
    RETURNING n.node_id INTO node;
    IF node IS NULL THEN RETURN NULL; END IF;  -- already settled (a stopped run's node)
    IF r.state = 'running' AND r.failure_policy = 'fail_all' AND node_state IN ('failed', 'cancelled') THEN
        UPDATE pgsched.dag_run x SET state = 'failing',
               error = format('node %s %s; fail_all stops the run', node, node_state)
         WHERE x.id = r.id;
        PERFORM pgsched_internal.dag_stop_v1(r.id, format('cancelled: node %s %s (failure policy fail_all)', node, node_state));
    END IF;
    PERFORM pgsched_internal.dag_propagate_v1(r.id, ARRAY[node], true);
    RETURN NULL;
END $$;

--
-- Name: dag_lock_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_lock_v1(tenant text, name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1(
        'dag', pgsched_internal.caller_tenant_v1(dag_lock_v1.tenant) || ' ' || dag_lock_v1.name));
END $$;

--
-- Name: FUNCTION dag_lock_v1(tenant text, name text); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.dag_lock_v1(tenant text, name text) IS 'serialises applies of one DAG of the caller''s tenant, to the end of the transaction (0027)';

--
-- Name: dag_propagate_v1(bigint, text[], boolean); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_propagate_v1(run_id bigint, settled text[], counted boolean) RETURNS void
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    r pgsched.dag_run;
    queue text[] := settled;
    i integer := 1;
    src pgsched.dag_node_run;
    d pgsched.dag_node_run;
    cond pgsched.dag_node_run;
    down text;
    decision text;
    why text;
    ready text[] := '{}';
    done_now integer := CASE WHEN counted THEN cardinality(settled) ELSE 0 END;
BEGIN
    SELECT * INTO r FROM pgsched.dag_run x WHERE x.id = dag_propagate_v1.run_id;
    WHILE r.state = 'running' AND i <= cardinality(queue) LOOP
        SELECT * INTO src FROM pgsched.dag_node_run n
         WHERE n.run_id = r.id AND n.node_id = queue[i];
        i := i + 1;
        FOREACH down IN ARRAY src.downstream LOOP
            UPDATE pgsched.dag_node_run n
               SET n_succeeded = n.n_succeeded + (src.state = 'succeeded')::integer,
                   n_failed = n.n_failed + (src.state IN ('failed', 'cancelled'))::integer,
                   n_skipped = n.n_skipped + (src.state = 'skipped')::integer,
                   n_upstream_failed = n.n_upstream_failed + (src.state = 'upstream_failed')::integer
             WHERE n.run_id = r.id AND n.node_id = down
            RETURNING * INTO d;
            CONTINUE WHEN d.state <> 'waiting';
            decision := pgsched_internal.dag_decide_v1(d.trigger_rule, r.failure_policy, cardinality(d.upstream),
                                              d.n_succeeded, d.n_failed, d.n_skipped, d.n_upstream_failed);
            CONTINUE WHEN decision = 'wait';
            why := NULL;
            IF decision = 'run' AND d.condition IS NOT NULL THEN
                -- The condition's node is a direct upstream node (validated): an eager rule
                -- (one_success) may say run before it has ended; then wait for it.
                SELECT u.* INTO cond FROM pgsched.dag_node_run u
                 WHERE u.run_id = r.id AND u.node_id = split_part(d.condition->>'field', '.', 1);
                CONTINUE WHEN cond.state IN ('waiting', 'queued');
                IF NOT pgsched_internal.dag_condition_v1(d.condition, CASE WHEN cond.state = 'succeeded' THEN cond.result END) THEN
                    decision := 'skipped';
                    why := 'condition not met: ' || (d.condition - 'field')::text || ' on ' || (d.condition->>'field')
                           || CASE WHEN cond.state <> 'succeeded' THEN format(' (%s %s)', cond.node_id, cond.state) ELSE '' END;
                END IF;
            ELSIF decision = 'skipped' THEN
                why := format('trigger rule %s: upstream %s succeeded, %s failed, %s skipped, %s upstream_failed',
                              d.trigger_rule, d.n_succeeded, d.n_failed, d.n_skipped, d.n_upstream_failed);
            ELSIF decision = 'upstream_failed' THEN
                why := format('trigger rule %s: %s upstream node(s) failed', d.trigger_rule,
                              d.n_failed + d.n_upstream_failed);
            END IF;
            IF decision = 'run' THEN
                ready := ready || down;
            ELSE
                UPDATE pgsched.dag_node_run n SET state = decision, finished_at = clock_timestamp(), error = why
                 WHERE n.run_id = r.id AND n.node_id = down;
                queue := queue || down;
                done_now := done_now + 1;
            END IF;
        END LOOP;
    END LOOP;
    IF cardinality(ready) > 0 THEN
        PERFORM pgsched_internal.dag_enqueue_v1(r, ready);
    END IF;
    UPDATE pgsched.dag_run x SET remaining = x.remaining - done_now WHERE x.id = r.id
    RETURNING * INTO r;
    IF r.remaining <= 0 THEN
        PERFORM pgsched_internal.dag_close_v1(r.id);
    END IF;
END $$;

--
-- Name: dag_start_v1(bigint, text, timestamp with time zone, jsonb, bigint); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_start_v1(dag_id bigint, how text, scheduled timestamp with time zone, run_params jsonb, epoch bigint DEFAULT NULL::bigint) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    d pgsched.dag;
    r pgsched.dag_run;
BEGIN
    -- FOR SHARE: an apply of this DAG (which locks the row for update first) waits for
    -- this start, or this start for it; either way the run copies one whole version.
    SELECT * INTO d FROM pgsched.dag x WHERE x.id = dag_start_v1.dag_id AND x.deleted_at IS NULL FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dag: no DAG with id %', dag_start_v1.dag_id USING ERRCODE = 'no_data_found';
    END IF;
    IF run_params IS NOT NULL AND jsonb_typeof(run_params) <> 'object' THEN
        RAISE EXCEPTION 'params: % is not a JSON object', run_params USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgsched.dag_run AS x (tenant, dag_id, trigger, scheduled_at, params, failure_policy, nodes,
                                      remaining, leader_epoch)
    VALUES (d.tenant, d.id, how, scheduled, coalesce(run_params, '{}'::jsonb), d.failure_policy, 0, 0, epoch)
    ON CONFLICT (dag_id, scheduled_at) WHERE trigger = 'schedule' DO NOTHING
    RETURNING * INTO r;
    IF r.id IS NULL THEN RETURN NULL; END IF;
    -- Counts and roots come from the rows copied, never from a second read of the definition.
    INSERT INTO pgsched.dag_node_run (run_id, node_id, position, task_id, trigger_rule, condition,
                                      upstream, downstream)
    SELECT r.id, n.node_id, n.position, n.task_id, n.trigger_rule, n.condition, n.upstream, n.downstream
      FROM pgsched.dag_node n WHERE n.dag_id = d.id;
    UPDATE pgsched.dag_run x SET nodes = c.n, remaining = c.n
      FROM (SELECT count(*) AS n FROM pgsched.dag_node_run WHERE run_id = r.id) c
     WHERE x.id = r.id
    RETURNING x.* INTO r;
    PERFORM pgsched_internal.dag_enqueue_v1(r, ARRAY(
        SELECT n.node_id FROM pgsched.dag_node_run n WHERE n.run_id = r.id AND cardinality(n.upstream) = 0));
    RETURN r.id;
END $$;

--
-- Name: dag_stop_v1(bigint, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_stop_v1(run_id bigint, why text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    stopped integer;
    e pgsched.execution;
BEGIN
    UPDATE pgsched.dag_node_run n SET state = 'cancelled', finished_at = clock_timestamp(), error = why
     WHERE n.run_id = dag_stop_v1.run_id AND n.state = 'waiting';
    GET DIAGNOSTICS stopped = ROW_COUNT;
    UPDATE pgsched.dag_run x SET remaining = x.remaining - stopped WHERE x.id = dag_stop_v1.run_id;
    FOR e IN
        SELECT * FROM pgsched.execution x WHERE x.dag_run_id = dag_stop_v1.run_id
           FOR UPDATE SKIP LOCKED
    LOOP
        PERFORM pgsched_internal.dag_cancel_execution_v1(e, why);
    END LOOP;
    RETURN stopped;
END $$;

--
-- Name: dag_sweep_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.dag_sweep_v1() RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    e pgsched.execution;
    n integer := 0;
BEGIN
    FOR e IN
        SELECT x.* FROM pgsched.execution x
         WHERE x.dag_run_id IN (SELECT r.id FROM pgsched.dag_run r WHERE r.state IN ('failing', 'cancelling'))
           AND (x.state = 'pending' OR x.cancel_requested_at IS NULL)
           FOR UPDATE OF x SKIP LOCKED
    LOOP
        PERFORM pgsched_internal.dag_cancel_execution_v1(e, 'cancelled: the DAG run is stopping');
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

--
-- Name: definition_masked_v1(jsonb); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.definition_masked_v1(definition jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    d jsonb := definition;
BEGIN
    IF jsonb_typeof(d) <> 'object' THEN
        RETURN d;
    END IF;
    IF d ? 'env' THEN
        d := jsonb_set(d, '{env}', pgsched_internal.env_masked_v1(d -> 'env'));
    END IF;
    IF d ? 'params' THEN
        d := jsonb_set(d, '{params}', pgsched_internal.params_masked_v1(d -> 'params', '{}'));
    END IF;
    IF jsonb_typeof(d -> 'nodes') = 'array' THEN
        d := jsonb_set(d, '{nodes}', coalesce(
            (SELECT jsonb_agg(CASE WHEN jsonb_typeof(n.value) <> 'object' THEN n.value
                                   ELSE n.value
                                        || CASE WHEN n.value ? 'env' THEN jsonb_build_object(
                                               'env', pgsched_internal.env_masked_v1(n.value -> 'env'))
                                           ELSE '{}' END
                                        || CASE WHEN n.value ? 'params' THEN jsonb_build_object(
                                               'params', pgsched_internal.params_masked_v1(
                                                   n.value -> 'params', '{}'))
                                           ELSE '{}' END END
                              ORDER BY n.i)
               FROM jsonb_array_elements(d -> 'nodes') WITH ORDINALITY n(value, i)), '[]'));
    END IF;
    RETURN d;
END $$;

--
-- Name: derived_key_v1(bigint, jsonb, timestamp with time zone); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.derived_key_v1(task_id bigint, run_params jsonb, scheduled timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT 'auto:' || task_id || ':' || md5(run_params::text || '@' ||
           (extract(epoch FROM scheduled) * 1000000)::bigint);
$$;

--
-- Name: enqueue_many_v1(text, jsonb[], timestamp with time zone, integer, text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.enqueue_many_v1(task_name text, params jsonb[], run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, tenant text DEFAULT 'default'::text, trigger text DEFAULT 'api'::text) RETURNS SETOF bigint
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    t pgsched.task;
    fire_at timestamptz := coalesce(enqueue_many_v1.run_at, clock_timestamp());
    bad integer;
BEGIN
    SELECT * INTO t FROM pgsched.task k
     WHERE k.tenant = enqueue_many_v1.tenant AND k.name = enqueue_many_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(enqueue_many_v1.task_name),
            quote_literal(enqueue_many_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
    IF t.handler_kind = 'dag' THEN
        RAISE EXCEPTION 'task: % is a DAG; start a run with pgsched dag trigger or pgsched.dag_trigger_v1()',
            quote_literal(enqueue_many_v1.task_name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_many_v1.priority IS NOT NULL AND enqueue_many_v1.priority NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'priority: % is out of range 1-10', enqueue_many_v1.priority USING ERRCODE = 'check_violation';
    END IF;
    IF NOT isfinite(fire_at) OR fire_at < '1970-01-01 00:00:00+00' OR fire_at >= '9000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at: % is outside 1970 to 9000', enqueue_many_v1.run_at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_many_v1.trigger IS NULL OR enqueue_many_v1.trigger NOT IN ('api', 'manual', 'insert') THEN
        RAISE EXCEPTION 'trigger: % must be api, manual or insert', quote_nullable(enqueue_many_v1.trigger)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT min(i) INTO bad FROM unnest(enqueue_many_v1.params) WITH ORDINALITY AS p(value, i)
     WHERE p.value IS NOT NULL AND jsonb_typeof(p.value) <> 'object';
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'params[%]: % is not a JSON object', bad - 1, enqueue_many_v1.params[bad]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF t.idempotent OR t.windowed THEN
        RETURN QUERY SELECT pgsched.enqueue_v1(t.name, p.value, fire_at, enqueue_many_v1.priority, NULL, t.tenant,
                                               enqueue_many_v1.trigger)
                       FROM unnest(enqueue_many_v1.params) WITH ORDINALITY AS p(value, i) ORDER BY p.i;
        RETURN;
    END IF;
    RETURN QUERY
    WITH made AS (
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority, queue,
                                            params, max_attempts)
        SELECT t.tenant, t.id, fire_at, fire_at, enqueue_many_v1.trigger,
               coalesce(enqueue_many_v1.priority, t.priority), t.queue,
               t.params || coalesce(p.value, '{}'::jsonb), t.max_attempts
          FROM unnest(enqueue_many_v1.params) WITH ORDINALITY AS p(value, i)
         ORDER BY p.i
        RETURNING e.id
    )
    SELECT id FROM made ORDER BY id;  -- ids come from a sequence in insert order
END $$;

--
-- Name: enqueue_v1(text, jsonb, timestamp with time zone, integer, text, text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.enqueue_v1(task_name text, params jsonb DEFAULT NULL::jsonb, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, idempotency_key text DEFAULT NULL::text, tenant text DEFAULT 'default'::text, trigger text DEFAULT 'api'::text) RETURNS bigint
    LANGUAGE sql
    AS $$
    SELECT r.execution_id
      FROM pgsched_internal.enqueue_v2(task_name, params, run_at, priority, idempotency_key,
                                       tenant, trigger) r;
$$;

--
-- Name: enqueue_v2(text, jsonb, timestamp with time zone, integer, text, text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.enqueue_v2(task_name text, params jsonb DEFAULT NULL::jsonb, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, idempotency_key text DEFAULT NULL::text, tenant text DEFAULT 'default'::text, trigger text DEFAULT 'api'::text) RETURNS TABLE(execution_id bigint, deduplicated boolean, dedup_reason text, succeeded_execution_id bigint)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    t pgsched.task;
    new_id bigint;
    found_id bigint;
    fire_at timestamptz := coalesce(enqueue_v2.run_at, clock_timestamp());
    run_params jsonb;
    key text := enqueue_v2.idempotency_key;
    w record;
    ck text;
BEGIN
    SELECT * INTO t FROM pgsched.task k
     WHERE k.tenant = enqueue_v2.tenant AND k.name = enqueue_v2.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(enqueue_v2.task_name), quote_literal(enqueue_v2.tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    IF t.handler_kind = 'dag' THEN
        RAISE EXCEPTION 'task: % is a DAG; start a run with pgsched dag trigger or pgsched.dag_trigger_v1()',
            quote_literal(enqueue_v2.task_name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v2.priority IS NOT NULL AND enqueue_v2.priority NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'priority: % is out of range 1-10', enqueue_v2.priority USING ERRCODE = 'check_violation';
    END IF;
    IF NOT isfinite(fire_at) OR fire_at < '1970-01-01 00:00:00+00' OR fire_at >= '9000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at: % is outside 1970 to 9000', enqueue_v2.run_at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v2.trigger IS NULL OR enqueue_v2.trigger NOT IN ('api', 'manual', 'insert') THEN
        -- 'schedule' is the scheduler's alone: it is what makes a scheduled fire unique.
        RAISE EXCEPTION 'trigger: % must be api, manual or insert', quote_nullable(enqueue_v2.trigger)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v2.params IS NOT NULL AND jsonb_typeof(enqueue_v2.params) <> 'object' THEN
        RAISE EXCEPTION 'params: % is not a JSON object', enqueue_v2.params USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- as the CLI and the REST API check it: an empty key names nothing, and a long one would
    -- fail on the unique index (a B-tree entry is at most about 2.7 kB) with PostgreSQL's error
    IF key IS NOT NULL AND (key = '' OR length(key) > 200) THEN
        RAISE EXCEPTION 'idempotency_key: % must be text of 1 to 200 characters',
            quote_literal(left(key, 60) || CASE WHEN length(key) > 60 THEN '...' ELSE '' END)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    run_params := t.params || coalesce(enqueue_v2.params, '{}'::jsonb);
    IF t.windowed THEN  -- 0022: a unique window returns the execution that holds it
        SELECT * INTO w FROM pgsched_internal.window_check_v1(t, run_params, enqueue_v2.trigger);
        IF w.existing IS NOT NULL THEN
            RETURN QUERY SELECT w.existing, true, w.reason, NULL::bigint;
            RETURN;
        END IF;
        ck := pgsched_internal.concurrency_key_v1(t.concurrency_key, run_params);
    END IF;
    IF key IS NULL AND t.idempotent THEN
        key := pgsched_internal.derived_key_v1(t.id, run_params, fire_at);
    END IF;
    -- scheduled_at is the instant asked for (clock_timestamp(), not the transaction's now(),
    -- when none is); only schedule fires are unique on (task_id, scheduled_at).
    IF key IS NULL THEN  -- nothing to conflict on: a plain INSERT, not a speculative one
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                            queue, params, max_attempts, concurrency_key, windowed)
        VALUES (t.tenant, t.id, fire_at, fire_at, enqueue_v2.trigger, coalesce(enqueue_v2.priority, t.priority),
                t.queue, run_params, t.max_attempts, ck, t.windowed)
        RETURNING e.id INTO new_id;
        IF t.windowed THEN
            PERFORM pgsched_internal.window_enqueued_v1(t, run_params, new_id);
        END IF;
        RETURN QUERY SELECT new_id, false, NULL::text, NULL::bigint;
        RETURN;
    END IF;
    -- Each statement sees what committed before it (READ COMMITTED): a lost race is seen
    -- by the next round. Three rounds: a key whose executions keep ending unsucceeded
    -- between two statements of this loop is not waited for for ever.
    FOR tries IN 1..3 LOOP
        SELECT e.id INTO found_id FROM pgsched.execution e
         WHERE e.tenant = t.tenant AND e.task_id = t.id AND e.idempotency_key = key;
        IF FOUND THEN
            RETURN QUERY SELECT found_id, true, 'live'::text, NULL::bigint;
            RETURN;
        END IF;
        SELECT h.id INTO found_id FROM pgsched.execution_history h
         WHERE h.tenant = t.tenant AND h.task_id = t.id AND h.idempotency_key = key AND h.state = 'succeeded'
         LIMIT 1;
        IF FOUND THEN
            new_id := pgsched_internal.record_skipped_v1(t, fire_at, enqueue_v2.trigger, run_params, key, found_id);
            RETURN QUERY SELECT new_id, true, 'succeeded'::text, found_id;
            RETURN;
        END IF;
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                            queue, params, idempotency_key, max_attempts, concurrency_key,
                                            windowed)
        VALUES (t.tenant, t.id, fire_at, fire_at, enqueue_v2.trigger, coalesce(enqueue_v2.priority, t.priority),
                t.queue, run_params, key, t.max_attempts, ck, t.windowed)
        ON CONFLICT (tenant, task_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING e.id INTO new_id;
        IF new_id IS NOT NULL THEN
            IF t.windowed THEN
                PERFORM pgsched_internal.window_enqueued_v1(t, run_params, new_id);
            END IF;
            RETURN QUERY SELECT new_id, false, NULL::text, NULL::bigint;
            RETURN;
        END IF;
        -- lost a race on the key to a concurrent enqueue, which has committed: look again
    END LOOP;
    RAISE EXCEPTION 'idempotency_key: % of task % was taken and released three times while '
                    'this enqueue ran; try again', quote_literal(key), quote_literal(t.name)
        USING ERRCODE = 'serialization_failure';
END $$;

--
-- Name: mask_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.mask_v1() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN '••••••'::text;

--
-- Name: masked_value_v1(jsonb); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.masked_value_v1(value jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN ((jsonb_typeof(value) = 'string'::text) AND ((value #>> '{}'::text[]) ~ '^\{\{secret:[^{}]+\}\}$'::text)) THEN value ELSE to_jsonb(pgsched_internal.mask_v1()) END;

--
-- Name: env_masked_v1(jsonb); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.env_masked_v1(env jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN (jsonb_typeof(env) = 'object'::text) THEN COALESCE((SELECT jsonb_object_agg(e.key, pgsched_internal.masked_value_v1(e.value)) AS jsonb_object_agg FROM jsonb_each(env_masked_v1.env) e(key, value)), '{}'::jsonb) ELSE env END;

--
-- Name: execution_claim_v1(bigint, text[], text[], integer, timestamp with time zone, bigint[], bigint[]); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_claim_v1(p_worker_id bigint, p_queues text[], p_tenants text[], p_limit integer, p_now timestamp with time zone, p_known_task_ids bigint[], p_known_task_versions bigint[]) RETURNS TABLE(id bigint, tenant text, task_id bigint, scheduled_at timestamp with time zone, run_at timestamp with time zone, priority smallint, attempt integer, max_attempts integer, params text, started_at timestamp with time zone, trigger text, lease_id bigint, cancel_requested_at timestamp with time zone, dag_run_id bigint, confirm_start boolean, backoff_from_attempt integer, task_version bigint, task jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    -- the claim's instant: p_now is the installation's own (tests, benchmarks); a tenant's
    -- login claims at the database's now(), so it cannot move its hourly quota's window
    at timestamptz := CASE WHEN pgsched_internal.is_instance_v1() THEN coalesce(p_now, now()) ELSE now() END;
    served text[];
    own text;
    -- the candidates, in the order of their first tag: name, vtime as served from (raised
    -- to the system's virtual time), weight
    c_t text[];
    c_v float8[];
    c_w int[];
    sys_v float8;         -- the system's virtual time: the greatest start tag given so far
    next_c int := 1;      -- the next candidate not yet looked at
    -- the tenants taken in this claim (locked): name, vtime, weight, picks so far, done
    a_t text[] := '{}';
    a_v float8[] := '{}';
    a_w int[] := '{}';
    a_n int[] := '{}';
    a_done boolean[] := '{}';
    a_called boolean[] := '{}';
    a_waited boolean[] := '{}';
    a_free timestamptz[] := '{}';
    locked_v float8;
    wait_c int;           -- the first due candidate another claim held: waited for if need be
    allot int[];
    want int;
    got int := 0;
    round int := 0;
    i int;
    t text;
    share record;
    round_ids bigint[];
    round_tags float8[];
    moved int;
    all_ids bigint[] := '{}';
    all_tags float8[] := '{}';
BEGIN
    IF p_limit IS NULL OR p_limit <= 0 THEN
        RETURN;
    END IF;
    IF pgsched_internal.is_instance_v1() THEN
        served := p_tenants;
        PERFORM FROM pgsched.worker w WHERE w.id = p_worker_id AND w.state = 'running';
    ELSE
        own := pgsched_internal.session_tenant_v1();
        IF own IS NULL OR own = '*' OR NOT own = ANY (coalesce(p_tenants, ARRAY[own])) THEN
            RETURN;
        END IF;
        served := ARRAY[own];
        PERFORM FROM pgsched.worker w
         WHERE w.id = p_worker_id AND w.state = 'running' AND w.tenants = served;
    END IF;
    IF NOT FOUND THEN
        RETURN;  -- a worker declared dead claims nothing (its claims would only be rescued)
    END IF;
    -- for every tenant: those with anything pending, by a walk of execution_ready_tenant_idx
    IF served IS NULL THEN
        WITH RECURSIVE pending(tenant) AS (
            SELECT (SELECT e.tenant FROM pgsched.execution e WHERE e.state = 'pending'
                     ORDER BY e.tenant LIMIT 1)
            UNION ALL
            SELECT (SELECT e.tenant FROM pgsched.execution e WHERE e.state = 'pending' AND e.tenant > p.tenant
                     ORDER BY e.tenant LIMIT 1)
              FROM pending p WHERE p.tenant IS NOT NULL
        )
        SELECT array_agg(p.tenant) INTO served FROM pending p WHERE p.tenant IS NOT NULL;
    END IF;
    IF served IS NULL OR served = '{}' THEN
        RETURN;
    END IF;
    -- the system's virtual time (start-time fair queueing's v(t)): the start tag of the
    -- latest start. A tenant whose vtime is behind it (idle, held at a limit, new) is
    -- served from it: it shares from now on and is not owed what it missed. A tenant with
    -- work ready all along is never behind it (each claim takes the least tags).
    sys_v := coalesce((SELECT u.start_tag FROM pgsched.tenant_usage u ORDER BY u.start_tag DESC LIMIT 1), 0);
    SELECT array_agg(s.tenant ORDER BY s.v, s.last_claim_at NULLS FIRST, s.tenant),
           array_agg(s.v ORDER BY s.v, s.last_claim_at NULLS FIRST, s.tenant),
           array_agg(s.w ORDER BY s.v, s.last_claim_at NULLS FIRST, s.tenant)
      INTO c_t, c_v, c_w
      FROM (SELECT q.tenant, greatest(coalesce(u.vtime, 0), sys_v) AS v,
                   coalesce(x.weight, 1) AS w, u.last_claim_at
              FROM (SELECT DISTINCT unnest(served)) AS q(tenant)
              JOIN pgsched.tenant x ON x.name = q.tenant
              LEFT JOIN pgsched.tenant_usage u ON u.tenant = q.tenant) s;
    IF c_t IS NULL THEN
        RETURN;
    END IF;
    LOOP
        round := round + 1;
        want := p_limit - got;
        -- the next candidates with due work, up to what the claim still wants; each locked,
        -- or passed over when another claim holds it
        WHILE next_c <= cardinality(c_t)
              AND (SELECT count(*) FROM unnest(a_done) AS d WHERE NOT d) < want LOOP
            t := c_t[next_c];
            IF EXISTS (SELECT FROM unnest(p_queues) AS q(queue) CROSS JOIN generate_series(1, 10) AS p(priority)
                        CROSS JOIN LATERAL (  -- one descent per front (a semi-join would scan them all)
                              SELECT FROM pgsched.execution e
                               WHERE e.state = 'pending' AND e.tenant = t AND e.queue = q.queue
                                 AND e.priority = p.priority AND e.run_at <= at
                               ORDER BY e.run_at  -- the index's order
                               LIMIT 1) due) THEN
                -- locked, its vtime read again under the lock (another claim may have
                -- charged it since the read above)
                SELECT greatest(u.vtime, sys_v) INTO locked_v FROM pgsched.tenant_usage u
                 WHERE u.tenant = t FOR NO KEY UPDATE SKIP LOCKED;
                IF NOT FOUND AND NOT EXISTS (SELECT FROM pgsched.tenant_usage u WHERE u.tenant = t) THEN
                    INSERT INTO pgsched.tenant_usage (tenant) VALUES (t) ON CONFLICT DO NOTHING;
                    SELECT greatest(u.vtime, sys_v) INTO locked_v FROM pgsched.tenant_usage u
                     WHERE u.tenant = t FOR NO KEY UPDATE SKIP LOCKED;
                END IF;
                IF FOUND THEN
                    a_t := a_t || t; a_v := a_v || locked_v; a_w := a_w || c_w[next_c];
                    a_n := a_n || 0; a_done := a_done || false; a_called := a_called || false;
                    a_waited := a_waited || false; a_free := a_free || NULL::timestamptz;
                ELSE
                    wait_c := coalesce(wait_c, next_c);
                END IF;
            END IF;
            next_c := next_c + 1;
        END LOOP;
        -- nothing could be taken but a tenant another claim serves: wait for it (its claim
        -- commits in milliseconds), then take it, reading what that claim wrote
        IF round = 1 AND a_t = '{}' AND wait_c IS NOT NULL THEN
            t := c_t[wait_c];
            PERFORM FROM pgsched.tenant_usage u WHERE u.tenant = t FOR NO KEY UPDATE;
            a_t := ARRAY[t];
            a_v := ARRAY[(SELECT greatest(u.vtime, sys_v) FROM pgsched.tenant_usage u WHERE u.tenant = t)];
            a_w := ARRAY[c_w[wait_c]];
            a_n := '{0}'; a_done := '{f}'; a_called := '{f}'; a_waited := '{f}';
            a_free := ARRAY[NULL::timestamptz];
        END IF;
        EXIT WHEN NOT false = ANY (a_done);
        -- each open tenant's allotment: how many of the next `want` tags are its
        SELECT array_agg(coalesce(n.k, 0) ORDER BY o.i) INTO allot
          FROM generate_subscripts(a_t, 1) AS o(i)
          LEFT JOIN (SELECT s.i, count(*)::int AS k
                       FROM (SELECT o2.i FROM generate_subscripts(a_t, 1) AS o2(i)
                              CROSS JOIN generate_series(1, least(want, 20000 / cardinality(a_t) + 1)) AS g(k)
                              WHERE NOT a_done[o2.i]
                              ORDER BY a_v[o2.i] + (a_n[o2.i] + g.k - 1)::float8 / a_w[o2.i], o2.i
                              LIMIT want) s
                      GROUP BY s.i) n ON n.i = o.i;
        round_ids := '{}';
        round_tags := '{}';
        FOR i IN 1 .. cardinality(a_t) LOOP
            CONTINUE WHEN a_done[i] OR allot[i] = 0;
            share := pgsched_internal.claim_tenant_v1(a_t[i], p_queues, allot[i], at);
            round_ids := round_ids || share.picks;
            round_tags := round_tags || ARRAY(SELECT a_v[i] + (a_n[i] + r - 1)::float8 / a_w[i]
                                                FROM generate_series(1, cardinality(share.picks)) AS r);
            a_n[i] := a_n[i] + cardinality(share.picks);
            a_called[i] := true;
            IF cardinality(share.picks) < allot[i] THEN
                a_done[i] := true;
            END IF;
            a_waited[i] := a_waited[i] OR share.waited;
            a_free[i] := least(a_free[i], share.free_at);
        END LOOP;
        moved := 0;
        IF round_ids <> '{}' THEN
            -- the round's picks to running, counted before the next round's limits count
            WITH claimed AS (
                UPDATE pgsched.execution e
                   SET state = 'running', attempt = e.attempt + 1, worker_id = p_worker_id,
                       started_at = at, lease_id = nextval('pgsched.lease_id_seq'),
                       budget_delay_seconds = NULL, start_confirmed_at = NULL
                 -- by their ids as a list, so that every plan reads the primary key (0021)
                 WHERE e.id = ANY (round_ids)
                   AND EXISTS (SELECT 1 FROM pgsched.worker w WHERE w.id = p_worker_id AND w.state = 'running')
                RETURNING e.id, e.tenant, e.task_id, e.queue, e.concurrency_key
            ), counted AS (
                -- the tags this claim gave the tenant, from a_v (its vtime read under this
                -- claim's lock, which it still holds): the finish tag of its latest start is
                -- its vtime, that start's own tag its start_tag
                INSERT INTO pgsched.tenant_usage AS u (tenant, hour_start, hour_starts, last_claim_at,
                                                       vtime, start_tag)
                SELECT c.tenant, date_trunc('hour', at, 'UTC'), count(*), at,
                       max(a_v[o.i] + a_n[o.i]::float8 / a_w[o.i]),
                       max(a_v[o.i] + (a_n[o.i] - 1)::float8 / a_w[o.i])
                  FROM claimed c JOIN generate_subscripts(a_t, 1) AS o(i) ON a_t[o.i] = c.tenant
                 GROUP BY c.tenant
                ON CONFLICT (tenant) DO UPDATE
                   SET hour_starts = CASE WHEN u.hour_start = EXCLUDED.hour_start
                                          THEN u.hour_starts + EXCLUDED.hour_starts ELSE EXCLUDED.hour_starts END,
                       hour_start = EXCLUDED.hour_start, last_claim_at = EXCLUDED.last_claim_at,
                       vtime = EXCLUDED.vtime, start_tag = EXCLUDED.start_tag
            ), rated AS (
                INSERT INTO pgsched.rate_start (tenant, scope, name, started_at)
                SELECT c.tenant, 'queue', c.queue, at
                  FROM claimed c JOIN pgsched.queue g ON g.tenant = c.tenant AND g.name = c.queue
                 WHERE g.rate_limit IS NOT NULL
                UNION ALL
                SELECT c.tenant, 'task', c.task_id::text, at
                  FROM claimed c JOIN pgsched.task k ON k.id = c.task_id WHERE k.rate_limit IS NOT NULL
                UNION ALL
                SELECT c.tenant, 'key', c.concurrency_key, at
                  FROM claimed c JOIN pgsched.task k ON k.id = c.task_id
                 WHERE k.key_rate_limit IS NOT NULL AND c.concurrency_key IS NOT NULL
            )
            SELECT count(*) INTO moved FROM claimed;
            -- the worker's row decides for every pick at once: all moved, or none (declared dead)
            EXIT WHEN moved = 0;
            got := got + moved;
            all_ids := all_ids || round_ids;
            all_tags := all_tags || round_tags;
        END IF;
        EXIT WHEN got >= p_limit OR round >= 10
                  OR (NOT false = ANY (a_done) AND next_c > cardinality(c_t));
    END LOOP;
    -- a tenant asked that took nothing (a limit held it, or its due work went to another
    -- claim) moves one start behind the system's virtual time: it is not the first
    -- candidate of every claim while it waits (each would lock it, ask it, and spend a
    -- round on it), and it is owed nothing when its limit frees
    IF EXISTS (SELECT FROM unnest(a_called, a_n) AS u(called, n) WHERE u.called AND u.n = 0) THEN
        UPDATE pgsched.tenant_usage u SET vtime = greatest(u.vtime, sys_v + 1.0 / x.w)
          FROM unnest(a_t, a_called, a_n, a_w) AS x(t, called, n, w)
         WHERE u.tenant = x.t AND x.called AND x.n = 0;
    END IF;
    -- who waits for a limit: a finish wakes their workers (execution_limit_freed)
    IF true = ANY (a_waited) THEN
        INSERT INTO pgsched.limit_wait AS w (tenant, since, free_at)
        SELECT u.t, at, u.f FROM unnest(a_t, a_waited, a_free) AS u(t, waited, f) WHERE u.waited
        ON CONFLICT (tenant) DO UPDATE SET free_at = EXCLUDED.free_at
         WHERE w.free_at IS DISTINCT FROM EXCLUDED.free_at;
    END IF;
    -- a tenant asked and not held back by a limit waits for none (one locked and not asked,
    -- its allotment 0, keeps what it had)
    IF EXISTS (SELECT FROM pgsched.limit_wait w, unnest(a_t, a_called, a_waited) AS u(t, called, waited)
                WHERE w.tenant = u.t AND u.called AND NOT u.waited) THEN
        DELETE FROM pgsched.limit_wait w USING unnest(a_t, a_called, a_waited) AS u(t, called, waited)
         WHERE w.tenant = u.t AND u.called AND NOT u.waited;
    END IF;
    IF all_ids = '{}' THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT e.id, e.tenant, e.task_id, e.scheduled_at, e.run_at, e.priority, e.attempt, e.max_attempts,
           CASE WHEN jsonb_typeof(e.params) = 'object' THEN e.params::text ELSE '{}' END,
           e.started_at, e.trigger, e.lease_id, e.cancel_requested_at, e.dag_run_id,
           e.confirm_start, e.backoff_from_attempt, t.xmin::text::bigint AS task_version,
           CASE WHEN k.task_id IS NULL THEN jsonb_build_object(
               'task_name', t.name, 'handler_kind', t.handler_kind, 'command', t.command, 'argv', t.argv,
               'python_target', t.python_target, 'env', t.env, 'stdin', t.stdin,
               'timeout_seconds', t.timeout_seconds, 'retry_policy', t.retry_policy,
               'retry_base_seconds', t.retry_base_seconds, 'retry_max_seconds', t.retry_max_seconds,
               'no_retry_exit_codes', t.no_retry_exit_codes, 'no_retry_exceptions', t.no_retry_exceptions)
           END AS task
      FROM unnest(all_ids, all_tags) AS o(id, tag)
      JOIN pgsched.execution e ON e.id = o.id
      JOIN pgsched.task t ON t.id = e.task_id
      LEFT JOIN unnest(p_known_task_ids, p_known_task_versions) AS k(task_id, version)
             ON k.task_id = e.task_id AND k.version = t.xmin::text::bigint
     WHERE e.id = ANY (all_ids)
     ORDER BY o.tag, e.id;
END $$;

--
-- Name: FUNCTION execution_claim_v1(p_worker_id bigint, p_queues text[], p_tenants text[], p_limit integer, p_now timestamp with time zone, p_known_task_ids bigint[], p_known_task_versions bigint[]); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.execution_claim_v1(p_worker_id bigint, p_queues text[], p_tenants text[], p_limit integer, p_now timestamp with time zone, p_known_task_ids bigint[], p_known_task_versions bigint[]) IS 'claims ready executions for a worker, every limit held, tenants served by weighted fair queueing (migrations 0021, 0026)';

--
-- Name: execution_done_notify_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_done_notify_v1() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    ids text;
BEGIN
    SELECT string_agg(f.id::text, ',') INTO ids FROM finished f;
    IF ids IS NOT NULL THEN
        PERFORM pg_notify('pgsched_execution_done', CASE WHEN length(ids) > 7900 THEN '*' ELSE ids END);
    END IF;
    RETURN NULL;
END $$;

--
-- Name: execution_fire_changed_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_fire_changed_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    fired timestamptz;
BEGIN
    SELECT k.last_fire_at INTO fired FROM pgsched.task k WHERE k.id = NEW.task_id;
    IF NEW.scheduled_at <= fired THEN
        RAISE EXCEPTION 'execution: task_id % already fired through % (last_fire_at); execution % cannot '
                        'become its scheduled fire at %', NEW.task_id, fired, NEW.id, NEW.scheduled_at
            USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'scheduled_at';
    END IF;
    RETURN NEW;
END $$;

--
-- Name: execution_guard_period_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_guard_period_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    t pgsched.task;
    held bigint;
BEGIN
    SELECT * INTO t FROM pgsched.task k WHERE k.id = NEW.task_id AND k.unique_period_seconds IS NOT NULL;
    IF NOT FOUND OR pgsched_internal.is_instance_v1() THEN
        RETURN NULL;
    END IF;
    SELECT u.execution_id INTO held FROM pgsched.unique_period u
     WHERE u.tenant = t.tenant AND u.scope = t.unique_scope
       AND u.name = CASE t.unique_scope WHEN 'task' THEN t.id::text
                                        ELSE pgsched_internal.concurrency_key_v1(t.concurrency_key, NEW.params) END
       AND u.execution_id <> NEW.id
       AND u.enqueued_at > clock_timestamp() - make_interval(secs => t.unique_period_seconds);
    IF FOUND THEN
        RAISE EXCEPTION 'execution: task %: unique window: execution % of this statement was enqueued within % s; '
                        'an enqueue (pgsched.enqueue_v2, or INSERT INTO pgsched.run_request) returns that '
                        'execution instead', quote_literal(t.name), held, t.unique_period_seconds
            USING ERRCODE = 'unique_violation', TABLE = 'execution';
    END IF;
    PERFORM pgsched_internal.window_enqueued_v1(t, NEW.params, NEW.id);
    RETURN NULL;
END $$;

--
-- Name: execution_guard_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_guard_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    t pgsched.task;
    w record;
    what text;
BEGIN
    -- the installation's logins (the scheduler's fires, its workers' writes) pass first: the
    -- guard sits on every row they write, the top of the hour's burst among them
    IF pgsched_internal.is_instance_v1() THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NEW.state = 'pending' THEN
            -- an enqueue's own window: only a windowed task's rows made outside the enqueue
            -- (a raw INSERT); a DAG's next node, made by dag_enqueue_v1 as the worker's
            -- login when its upstream finishes, is its run's waiting node
            SELECT * INTO t FROM pgsched.task k WHERE k.id = NEW.task_id AND k.windowed;
            IF NOT FOUND THEN
                RETURN NEW;
            END IF;
            IF NEW.dag_run_id IS NOT NULL AND EXISTS (
                   SELECT FROM pgsched.dag_node_run n
                    WHERE n.run_id = NEW.dag_run_id AND n.task_id = NEW.task_id AND n.state = 'waiting') THEN
                RETURN NEW;
            END IF;
            SELECT * INTO w FROM pgsched_internal.window_check_v1(t, NEW.params, NEW.trigger);
            IF w.existing IS NOT NULL THEN
                RAISE EXCEPTION 'execution: task %: %; an enqueue (pgsched.enqueue_v2, or INSERT INTO '
                                'pgsched.run_request) returns that execution instead', quote_literal(t.name), w.why
                    USING ERRCODE = 'unique_violation', TABLE = 'execution';
            END IF;
            NEW.windowed := true;  -- the rows after it in this statement see it (BEFORE ROW)
            RETURN NEW;  -- its unique period starts once it is there (execution_guard_period)
        END IF;
        what := 'insert an execution in state ' || quote_literal(NEW.state);
    ELSIF NEW.state = 'running' AND OLD.state <> 'running' THEN
        what := 'move execution ' || NEW.id || ' to running';
    ELSIF NEW.task_id <> OLD.task_id THEN
        what := 'move execution ' || NEW.id || ' to another task';
    ELSIF OLD.windowed AND NOT NEW.windowed THEN
        what := 'unmark execution ' || NEW.id || ' from its task''s unique window';
    ELSE
        what := 'change the started_at, attempt, lease_id, queue or concurrency_key of running execution '
                || NEW.id;
    END IF;
    RAISE EXCEPTION 'execution: role % may not %: the claim (pgsched_internal.execution_claim_v1) starts '
                    'executions and the enqueue (pgsched.enqueue_v2) makes them, holding the tenant''s '
                    'quotas, limits and unique windows', quote_ident(session_user), what
        USING ERRCODE = 'insufficient_privilege', TABLE = 'execution';
END $$;

--
-- Name: FUNCTION execution_guard_v1(); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.execution_guard_v1() IS 'refuses a tenant''s login what only the claim and the enqueue may write on an execution (migration 0028)';

--
-- Name: execution_inserted_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_inserted_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    bad record;
BEGIN
    WITH wanted AS (SELECT n.task_id, n.tenant, min(n.scheduled_at) FILTER (WHERE n.trigger = 'schedule') AS first_fire
                      FROM new_executions n GROUP BY n.task_id, n.tenant),
         locked AS (SELECT k.id, k.tenant, k.name, k.last_fire_at FROM pgsched.task k
                     WHERE k.id IN (SELECT w.task_id FROM wanted w)
                       FOR KEY SHARE OF k)
    SELECT w.task_id, w.tenant, w.first_fire, l.id IS NULL AS missing, l.tenant <> w.tenant AS foreign,
           l.tenant AS task_tenant, l.name, l.last_fire_at INTO bad
      FROM wanted w LEFT JOIN locked l ON l.id = w.task_id
     WHERE l.id IS NULL OR l.tenant <> w.tenant OR w.first_fire <= l.last_fire_at
     ORDER BY l.id IS NULL DESC, l.tenant <> w.tenant DESC
     LIMIT 1;
    IF FOUND AND bad.missing THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', bad.task_id
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    ELSIF FOUND AND bad.foreign THEN
        RAISE EXCEPTION 'execution: task % belongs to tenant %, not %', quote_literal(bad.name),
            quote_literal(bad.task_tenant), quote_literal(bad.tenant)
            USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'tenant';
    ELSIF FOUND THEN  -- rare: looked at row by row, only now
        SELECT k.name, k.last_fire_at, n.scheduled_at AS first_fire INTO bad
          FROM new_executions n JOIN pgsched.task k ON k.id = n.task_id
         WHERE n.trigger = 'schedule' AND n.scheduled_at <= k.last_fire_at
           AND NOT EXISTS (SELECT FROM pgsched.execution_history h
                            WHERE h.id = n.id AND h.task_id = n.task_id AND h.scheduled_at = n.scheduled_at
                              AND h.created_at = n.created_at AND h.state = 'dead')
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'execution: task % already fired through % (last_fire_at); a scheduled fire at % '
                            'would run an instant that was dealt with', quote_literal(bad.name), bad.last_fire_at,
                            bad.first_fire
                USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'scheduled_at';
        END IF;
    END IF;
    -- one wake-up per tenant of the statement (nearly always one): workers of other tenants
    -- ignore it
    PERFORM pg_notify('pgsched_execution', t.tenant) FROM (SELECT DISTINCT n.tenant FROM new_executions n) t;
    RETURN NULL;
END $$;

--
-- Name: execution_keyed_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_keyed_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pgsched.task k WHERE k.concurrency_key IS NOT NULL) THEN
        RETURN NULL;  -- task_keyed_idx: one look when no task has a key
    END IF;
    UPDATE pgsched.execution e
       SET concurrency_key = pgsched_internal.concurrency_key_v1(k.concurrency_key, e.params)
      FROM new_executions n JOIN pgsched.task k ON k.id = n.task_id
     WHERE e.id = n.id AND k.concurrency_key IS NOT NULL AND e.concurrency_key IS NULL;
    RETURN NULL;
END $$;

--
-- Name: execution_limit_freed_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_limit_freed_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF EXISTS (SELECT FROM pgsched.limit_wait) THEN
        PERFORM pg_notify('pgsched_execution', w.tenant) FROM pgsched.limit_wait w;
    END IF;
    RETURN NULL;
END $$;

--
-- Name: execution_requeued_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_requeued_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF EXISTS (SELECT FROM pgsched.execution_history h WHERE h.id = NEW.id AND h.state = 'dead') THEN
        RAISE EXCEPTION 'execution: % is a scheduled fire of task_id % at % that is still in the dead-letter '
                        'queue; retry it from there (pgsched dlq retry %)', NEW.id, NEW.task_id, NEW.scheduled_at,
                        NEW.id
            USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'scheduled_at';
    END IF;
    RETURN NULL;
END $$;

--
-- Name: execution_task_recheck_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_task_recheck_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM FROM pgsched.task k WHERE k.id = NEW.task_id FOR KEY SHARE OF k;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', NEW.task_id
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    END IF;
    RETURN NULL;
END $$;

--
-- Name: execution_windowed_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.execution_windowed_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pgsched.task k WHERE k.windowed) THEN
        RETURN NULL;
    END IF;
    UPDATE pgsched.execution e SET windowed = true
      FROM new_executions n JOIN pgsched.task k ON k.id = n.task_id
     WHERE e.id = n.id AND k.windowed AND NOT n.windowed;
    RETURN NULL;
END $$;

--
-- Name: finish_v1(pgsched.execution, text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.finish_v1(e pgsched.execution, final_state text, why text) RETURNS void
    LANGUAGE sql
    AS $$
    DELETE FROM pgsched.execution WHERE id = e.id;
    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
        trigger, priority, queue, params, idempotency_key, attempt, max_attempts, worker_id,
        leader_epoch, created_at, started_at, finished_at, error, lost_attempts, dag_run_id)
    VALUES (e.id, e.tenant, e.task_id, e.scheduled_at, e.run_at, final_state, e.trigger,
            e.priority, e.queue, e.params, e.idempotency_key, e.attempt, e.max_attempts,
            e.worker_id, e.leader_epoch, e.created_at, e.started_at, clock_timestamp(), why,
            e.lost_attempts, e.dag_run_id);
$$;

--
-- Name: fire_windowed_v2(bigint[], timestamp with time zone[], bigint); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.fire_windowed_v2(task_ids bigint[], fire_ats timestamp with time zone[], epoch bigint, OUT made integer, OUT busy bigint[]) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    t pgsched.task;
    w record;
    made_id bigint;
BEGIN
    made := 0;
    busy := '{}';
    FOR i IN 1 .. coalesce(cardinality(task_ids), 0) LOOP
        CONTINUE WHEN task_ids[i] = ANY(busy);
        SELECT * INTO t FROM pgsched.task k WHERE k.id = task_ids[i];
        CONTINUE WHEN NOT FOUND OR t.handler_kind = 'dag'
                      OR (t.last_fire_at IS NOT NULL AND fire_ats[i] <= t.last_fire_at);
        CONTINUE WHEN EXISTS (SELECT FROM pgsched.execution e
                               WHERE e.task_id = t.id AND e.scheduled_at = fire_ats[i] AND e.trigger = 'schedule');
        IF NOT pgsched_internal.window_try_lock_v1(t, t.params) THEN
            busy := busy || t.id;
            CONTINUE;
        END IF;
        SELECT * INTO w FROM pgsched_internal.window_check_v1(t, t.params, 'schedule');
        IF w.existing IS NOT NULL THEN
            PERFORM pgsched_internal.record_window_skipped_v1(t, fire_ats[i], 'schedule', t.params, w.why, epoch);
            CONTINUE;
        END IF;
        made_id := NULL;
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority, queue,
                                            params, max_attempts, leader_epoch, idempotency_key,
                                            concurrency_key, windowed)
        VALUES (t.tenant, t.id, fire_ats[i], fire_ats[i], 'schedule', t.priority, t.queue, t.params,
                t.max_attempts, epoch,
                CASE WHEN t.idempotent THEN pgsched_internal.derived_key_v1(t.id, t.params, fire_ats[i]) END,
                pgsched_internal.concurrency_key_v1(t.concurrency_key, t.params), true)
        ON CONFLICT DO NOTHING
        RETURNING e.id INTO made_id;
        IF made_id IS NOT NULL THEN
            PERFORM pgsched_internal.window_enqueued_v1(t, t.params, made_id);
            made := made + 1;
        END IF;
    END LOOP;
END $$;

--
-- Name: FUNCTION fire_windowed_v2(task_ids bigint[], fire_ats timestamp with time zone[], epoch bigint, OUT made integer, OUT busy bigint[]); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.fire_windowed_v2(task_ids bigint[], fire_ats timestamp with time zone[], epoch bigint, OUT made integer, OUT busy bigint[]) IS 'the scheduler''s fires of windowed tasks, never waiting for a window lock: busy, the tasks left for a later tick (0027)';

--
-- Name: frees_text_v1(timestamp with time zone); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.frees_text_v1(at timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT format('; a start is free at %s UTC (in %s s)',
                  to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
                  greatest(ceil(extract(epoch FROM at - now())), 0)::bigint);
$$;

--
-- Name: FUNCTION frees_text_v1(at timestamp with time zone); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.frees_text_v1(at timestamp with time zone) IS 'the tail of a wait reason: when a start is free, UTC, and in how many seconds by now() (migration 0030)';

--
-- Name: internal_key_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.internal_key_v1(purpose text, name text DEFAULT ''::text) RETURNS bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    IF purpose IS NULL OR purpose NOT IN ('leader', 'term', 'usage', 'alert', 'rollup', 'retry budget',
                                          'window', 'dag') THEN
        RAISE EXCEPTION 'purpose: % is not a purpose of pgsched''s advisory locks', coalesce(quote_literal(purpose), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN hashtextextended('pgsched.internal ' || purpose || ' ' || coalesce(name, ''),
                            (SELECT s.seed FROM pgsched_internal.lock_seed s));
END $$;

--
-- Name: FUNCTION internal_key_v1(purpose text, name text); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.internal_key_v1(purpose text, name text) IS 'the advisory key of one of pgsched''s own locks, from the secret lock_seed: the installation''s alone (0027)';

--
-- Name: is_instance_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.is_instance_v1() RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
    SELECT NOT EXISTS (SELECT FROM pgsched.tenant_role m WHERE m.role_name = session_user)
       AND (pg_has_role(session_user, 'pgsched_instance', 'MEMBER')
            OR pg_has_role(session_user, 'pgsched_owner', 'MEMBER'));
$$;

--
-- Name: FUNCTION is_instance_v1(); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.is_instance_v1() IS 'whether this session''s login acts for the whole installation (superuser, owner or pgsched_instance, and in no tenant)';

--
-- Name: leader_sessions_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.leader_sessions_v1() RETURNS SETOF integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
    SELECT l.pid FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
       -- pg_locks lists every database's locks: never another install's leader
       AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND ((l.classid::bigint << 32) | l.objid::bigint) = pgsched_internal.internal_key_v1('leader');
$$;

--
-- Name: FUNCTION leader_sessions_v1(); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.leader_sessions_v1() IS 'the pids of the sessions holding the leader lock in this database (0027)';

--
-- Name: limit_frees_at_v1(text, text, text, double precision, timestamp with time zone); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.limit_frees_at_v1(t text, kind text, name text, period double precision, at timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(min(r.started_at), at) + make_interval(secs => period)
      FROM pgsched.rate_start r
     WHERE r.tenant = t AND r.scope = split_part(kind, '_', 1) AND r.name = limit_frees_at_v1.name
       AND r.started_at > at - make_interval(secs => period);
$$;

--
-- Name: limit_used_v1(text, text, text, double precision, timestamp with time zone); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.limit_used_v1(t text, kind text, name text, period double precision, at timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    n bigint;
    of_scope text := split_part(kind, '_', 1);
BEGIN
    IF kind = 'queue_running' THEN
        SELECT count(*) INTO n FROM pgsched.execution e
         WHERE e.tenant = t AND e.queue = limit_used_v1.name AND e.state = 'running';
    ELSIF kind = 'task_running' THEN
        SELECT count(*) INTO n FROM pgsched.execution e
         WHERE e.tenant = t AND e.task_id = limit_used_v1.name::bigint AND e.state = 'running';
    ELSIF kind = 'key_running' THEN
        SELECT count(*) INTO n FROM pgsched.execution e
         WHERE e.tenant = t AND e.concurrency_key = limit_used_v1.name AND e.state = 'running';
    ELSE
        DELETE FROM pgsched.rate_start r
         WHERE r.tenant = t AND r.scope = of_scope AND r.name = limit_used_v1.name
           AND r.started_at <= at - make_interval(secs => period * 2);
        SELECT count(*) INTO n FROM pgsched.rate_start r
         WHERE r.tenant = t AND r.scope = of_scope AND r.name = limit_used_v1.name
           AND r.started_at > at - make_interval(secs => period);
    END IF;
    RETURN n;
END $$;

--
-- Name: limits_by_v1(text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.limits_by_v1(by text) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $_$
BEGIN
    IF by IS NULL THEN
        RETURN 'login ' || session_user;
    END IF;
    IF NOT (pgsched_internal.is_instance_v1() OR pg_has_role(session_user, 'pgsched_web', 'MEMBER')) THEN
        RAISE EXCEPTION 'by: role % may not say who acts (%); leave by NULL to be recorded as login %',
            quote_ident(session_user), quote_literal(by), session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF by !~ '^[a-z]+ [^[:cntrl:]]{1,200}$' THEN
        RAISE EXCEPTION 'by: % must be a kind and a name, like ''user alice'' or ''token 12''', quote_literal(by)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN by;
END $_$;

--
-- Name: limits_queue_check_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.limits_queue_check_v1(t text, queue_name text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $_$
BEGIN
    IF queue_name IS NULL OR queue_name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' THEN
        RAISE EXCEPTION 'queue_name: % must be 1-64 characters: letters, digits and . _ - (starting with a letter or digit)',
            coalesce(quote_literal(queue_name), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM pgsched.tenant x WHERE x.name = t) THEN
        RAISE EXCEPTION 'tenant: no tenant %', quote_literal(t) USING ERRCODE = 'no_data_found';
    END IF;
END $_$;

--
-- Name: lock_held_v1(bigint); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.lock_held_v1(key bigint) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT EXISTS (SELECT FROM pg_catalog.pg_locks l
                    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                      AND l.pid = pg_backend_pid()
                      AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                                         WHERE d.datname = current_database())
                      AND ((l.classid::bigint << 32) | l.objid::bigint) = key);
$$;

--
-- Name: lock_key_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.lock_key_v1(tenant text, name text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF tenant IS NULL OR tenant = '*' THEN
        RAISE EXCEPTION 'tenant: a lock is one tenant''s; name the tenant, not %', coalesce(quote_literal(tenant), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF name IS NULL OR name = '' THEN
        RAISE EXCEPTION 'name: a lock needs a name' USING ERRCODE = 'invalid_parameter_value';
    ELSIF length(name) > 256 THEN
        RAISE EXCEPTION 'name: % (% characters) is longer than a lock name may be (256)',
            quote_literal(left(name, 60) || '…'), length(name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN hashtextextended('pgsched.lock ' || tenant || ' ' || name,
                            (SELECT s.seed FROM pgsched_internal.lock_seed s));
END $$;

--
-- Name: lock_named_v1(bigint, text, text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.lock_named_v1(key bigint, tenant text, name text, scope text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pgsched_internal.lock_record_v1(key, tenant, name);
EXCEPTION WHEN OTHERS THEN
    IF scope = 'session' THEN
        PERFORM pg_advisory_unlock(key);
    END IF;
    RAISE;
END $$;

--
-- Name: lock_record_v1(bigint, text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.lock_record_v1(key bigint, tenant text, name text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    last timestamptz;
BEGIN
    SELECT n.taken_at INTO last FROM pgsched_internal.lock_name n WHERE n.key = lock_record_v1.key;
    IF last > now() - interval '1 hour' THEN
        RETURN;
    ELSIF last IS NOT NULL THEN
        UPDATE pgsched_internal.lock_name n SET taken_at = now() WHERE n.key = lock_record_v1.key;
        RETURN;
    END IF;
    INSERT INTO pgsched_internal.lock_name (key, tenant, name) VALUES (key, tenant, name)
    ON CONFLICT ON CONSTRAINT lock_name_pkey DO UPDATE SET taken_at = now();
    IF EXISTS (SELECT FROM pgsched_internal.lock_name n WHERE n.taken_at < now() - interval '7 days') THEN
        DELETE FROM pgsched_internal.lock_name n
         WHERE n.key IN (SELECT o.key FROM pgsched_internal.lock_name o
                          WHERE o.taken_at < now() - interval '7 days'
                            AND NOT EXISTS (
                                SELECT FROM pg_catalog.pg_locks l
                                 WHERE l.locktype = 'advisory' AND l.objsubid = 1
                                   AND ((l.classid::bigint << 32) | l.objid::bigint) = o.key)
                          LIMIT 1000);
    END IF;
END $$;

--
-- Name: lock_scope_v1(text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.lock_scope_v1(scope text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF scope IS NULL OR scope NOT IN ('session', 'transaction') THEN
        RAISE EXCEPTION 'scope: % is not a lock scope; use session or transaction',
            coalesce(quote_literal(scope), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN scope;
END $$;

--
-- Name: may_reveal_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.may_reveal_v1() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN ((COALESCE(current_setting('pgsched.reveal'::text, true), ''::text) <> 'off'::text) AND (((current_setting('pgsched.reveal'::text, true) = 'on'::text) AND pg_has_role(SESSION_USER, 'pgsched_web'::name, 'MEMBER'::text)) OR pg_has_role(SESSION_USER, 'pgsched_secret_reader'::name, 'MEMBER'::text) OR pg_has_role(SESSION_USER, 'pgsched_engine'::name, 'MEMBER'::text) OR pg_has_role(SESSION_USER, 'pgsched_instance'::name, 'MEMBER'::text) OR pg_has_role(SESSION_USER, 'pgsched_owner'::name, 'MEMBER'::text)));

--
-- Name: params_masked_v1(jsonb, text[], integer); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.params_masked_v1(params jsonb, marked text[], depth integer DEFAULT 0) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    IF jsonb_typeof(params) NOT IN ('object', 'array') THEN
        RETURN params;
    ELSIF depth = 0 AND coalesce(cardinality(marked), 0) = 0
          AND params::text !~* 'passw(or)?d|secret|token|api_?key|credential|private_?key|auth|dsn' THEN
        RETURN params;
    ELSIF depth >= 32 THEN
        RETURN to_jsonb(pgsched_internal.mask_v1());
    ELSIF jsonb_typeof(params) = 'object' THEN
        RETURN coalesce((SELECT jsonb_object_agg(e.key,
                                   CASE WHEN pgsched_internal.sensitive_key_v1(e.key, marked)
                                        THEN pgsched_internal.masked_value_v1(e.value)
                                        ELSE pgsched_internal.params_masked_v1(e.value, marked, depth + 1) END)
                           FROM jsonb_each(params) e), '{}'::jsonb);
    END IF;
    RETURN coalesce((SELECT jsonb_agg(pgsched_internal.params_masked_v1(a.value, marked, depth + 1)
                                      ORDER BY a.i)
                       FROM jsonb_array_elements(params) WITH ORDINALITY a(value, i)), '[]'::jsonb);
END $$;

--
-- Name: partition_default_rows_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.partition_default_rows_v1(OUT execution_history bigint, OUT execution_attempt bigint, OUT execution_log bigint) RETURNS record
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
    SELECT (SELECT count(*) FROM pgsched.execution_history_default),
           (SELECT count(*) FROM pgsched.execution_attempt_default),
           (SELECT count(*) FROM pgsched.execution_log_default);
$$;

--
-- Name: partition_drop_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.partition_drop_v1(partition_name text, parent text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $_$
BEGIN
    IF parent NOT IN ('execution_history', 'execution_attempt', 'execution_log')
       OR partition_name !~ '_p[0-9]{8}$' THEN
        RAISE EXCEPTION 'partition: % is not a daily partition of pgsched history', partition_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('LOCK TABLE pgsched.%I IN ACCESS EXCLUSIVE MODE', partition_name);
    IF pgsched_internal.partition_is_live_v1(partition_name, parent) THEN
        RETURN false;
    END IF;
    IF parent = 'execution_log' THEN
        EXECUTE format('INSERT INTO pgsched.usage_delta (tenant, log_bytes) '
                       'SELECT tenant, -sum(octet_length(line)) FROM pgsched.%I GROUP BY 1',
                       partition_name);
    END IF;
    EXECUTE format('ALTER TABLE pgsched.%I DETACH PARTITION pgsched.%I', parent, partition_name);
    EXECUTE format('DROP TABLE pgsched.%I', partition_name);
    RETURN true;
END $_$;

--
-- Name: partition_ensure_v1(date, integer); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.partition_ensure_v1(from_day date, days integer) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    parent text;
    key text;
    d date;
    part text;
    lo timestamptz;
    hi timestamptz;
BEGIN
    FOR parent, key IN VALUES ('execution_history', 'finished_at'),
                              ('execution_attempt', 'started_at'),
                              ('execution_log', 'logged_at') LOOP
        FOR i IN 0 .. days - 1 LOOP
            d := from_day + i;
            part := parent || '_p' || to_char(d, 'YYYYMMDD');
            CONTINUE WHEN to_regclass(format('pgsched.%I', part)) IS NOT NULL;
            lo := d::timestamp AT TIME ZONE 'UTC';
            hi := (d + 1)::timestamp AT TIME ZONE 'UTC';
            EXECUTE format('CREATE TABLE pgsched.%I (LIKE pgsched.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                           part, parent);
            EXECUTE format('WITH moved AS (DELETE FROM pgsched.%I WHERE %I >= %L AND %I < %L RETURNING *) '
                           'INSERT INTO pgsched.%I SELECT * FROM moved',
                           parent || '_default', key, lo, key, hi, part);
            EXECUTE format('ALTER TABLE pgsched.%I ATTACH PARTITION pgsched.%I FOR VALUES FROM (%L) TO (%L)',
                           parent, part, lo, hi);
            RETURN NEXT part;
        END LOOP;
    END LOOP;
END $$;

--
-- Name: partition_expired_v1(timestamp with time zone); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.partition_expired_v1(cutoff timestamp with time zone) RETURNS TABLE(partition_name text, parent text, live boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $_$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.relname::text AS name, p.relname::text AS parent_name
          FROM pg_inherits i
          JOIN pg_class c ON c.oid = i.inhrelid
          JOIN pg_class p ON p.oid = i.inhparent
          JOIN pg_namespace n ON n.oid = p.relnamespace
         WHERE n.nspname = 'pgsched'
           AND p.relname IN ('execution_history', 'execution_attempt', 'execution_log')
           AND c.relname ~ '_p[0-9]{8}$'
         ORDER BY c.relname
    LOOP
        CONTINUE WHEN (to_date(right(r.name, 8), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' > cutoff;
        partition_name := r.name;
        parent := r.parent_name;
        live := pgsched_internal.partition_is_live_v1(r.name, r.parent_name);
        RETURN NEXT;
    END LOOP;
END $_$;

--
-- Name: partition_is_live_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.partition_is_live_v1(partition_name text, parent text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    live boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgsched.%I x JOIN pgsched.execution e ON e.id = x.%I)',
                   partition_name, CASE WHEN parent = 'execution_history' THEN 'id' ELSE 'execution_id' END)
       INTO live;
    RETURN live;
END $$;

--
-- Name: pending_reason_v1(pgsched.execution); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.pending_reason_v1(e pgsched.execution) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    reason text;
BEGIN
    IF e.state <> 'pending' THEN
        RETURN NULL;
    END IF;
    IF e.run_at > now() THEN
        IF e.attempt >= 1 THEN
            RETURN format('attempt %s failed; attempt %s waits out its retry backoff until %s',
                          e.attempt, e.attempt + 1, pgsched_internal.at_text_v1(e.run_at))
                   || CASE WHEN e.budget_delay_seconds > 0
                           THEN format(' (%s s of it for the retry budget)',
                                       ceil(e.budget_delay_seconds)::bigint)
                           ELSE '' END;
        END IF;
        RETURN 'due at ' || pgsched_internal.at_text_v1(e.run_at);
    END IF;
    reason := pgsched_internal.wait_reason_v1(e);
    IF reason IS NOT NULL THEN
        RETURN reason;
    END IF;
    IF NOT pgsched_internal.queue_served_v1(e.tenant, e.queue) THEN
        RETURN format('no running worker serves queue %s of tenant %s', e.queue, e.tenant);
    END IF;
    RETURN NULL;
END;
$$;

--
-- Name: FUNCTION pending_reason_v1(e pgsched.execution); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.pending_reason_v1(e pgsched.execution) IS 'why a pending execution has not started: its backoff, its due time, a limit (wait_reason_v1), or no worker serving its queue; NULL when none holds (migration 0033)';

--
-- Name: period_text_v1(double precision); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.period_text_v1(seconds double precision) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE
        WHEN seconds >= 86400 AND seconds::numeric % 86400 = 0 THEN (seconds / 86400)::bigint || 'd'
        WHEN seconds >= 3600 AND seconds::numeric % 3600 = 0 THEN (seconds / 3600)::bigint || 'h'
        WHEN seconds >= 60 AND seconds::numeric % 60 = 0 THEN (seconds / 60)::bigint || 'm'
        WHEN seconds::numeric % 1 = 0 THEN seconds::bigint || 's'
        ELSE seconds || 's' END;
$$;

--
-- Name: FUNCTION period_text_v1(seconds double precision); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.period_text_v1(seconds double precision) IS 'a rate period in its largest whole unit: 60 is 1m, 3600 1h, 90 90s (migration 0030)';

--
-- Name: queue_served_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.queue_served_v1(t text, q text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
    SELECT CASE
        WHEN pgsched_internal.is_instance_v1()
             OR pgsched_internal.session_tenant_v1() IN (t, '*')
        THEN EXISTS (SELECT FROM pgsched.worker w
                      WHERE w.state = 'running'
                        AND now() - w.last_heartbeat_at <= 3 * w.heartbeat_interval * interval '1 second'
                        AND q = ANY (w.queues)
                        AND (w.tenants IS NULL OR t = ANY (w.tenants)))
    END;
$$;

--
-- Name: FUNCTION queue_served_v1(t text, q text); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.queue_served_v1(t text, q text) IS 'whether a live worker (running, heartbeat within 3 intervals) serves queue q of tenant t; NULL when the session may not ask about t (migration 0033)';

--
-- Name: record_skipped_v1(pgsched.task, timestamp with time zone, text, jsonb, text, bigint); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.record_skipped_v1(t pgsched.task, scheduled timestamp with time zone, how text, run_params jsonb, key text, succeeded_id bigint) RETURNS bigint
    LANGUAGE sql
    AS $$
    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
        trigger, priority, queue, params, idempotency_key, attempt, max_attempts, created_at,
        finished_at, error)
    VALUES (nextval('pgsched.execution_id_seq'), t.tenant, t.id, scheduled, scheduled, 'skipped',
            how, t.priority, t.queue, run_params, key, 0, t.max_attempts, now(), clock_timestamp(),
            format('idempotency key %s already succeeded in execution %s', quote_literal(key), succeeded_id))
    RETURNING id;
$$;

--
-- Name: record_window_skipped_v1(pgsched.task, timestamp with time zone, text, jsonb, text, bigint); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.record_window_skipped_v1(t pgsched.task, scheduled timestamp with time zone, how text, run_params jsonb, why text, epoch bigint) RETURNS bigint
    LANGUAGE sql
    AS $$
    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
        trigger, priority, queue, params, attempt, max_attempts, leader_epoch, created_at,
        finished_at, error)
    VALUES (nextval('pgsched.execution_id_seq'), t.tenant, t.id, scheduled, scheduled, 'skipped',
            how, t.priority, t.queue, run_params, 0, t.max_attempts, epoch, now(), clock_timestamp(), why)
    RETURNING id;
$$;

--
-- Name: rescue_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.rescue_v1() RETURNS TABLE(execution_id bigint, worker_id bigint, outcome text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    e pgsched.execution;
    holder_alive boolean;
    dead_after integer := (pgsched_internal.setting_v1('worker_dead_after_heartbeats'))::integer;
    max_lost integer := (pgsched_internal.setting_v1('max_lost_attempts'))::integer;
    lost text;
    why text;
BEGIN
    UPDATE pgsched.worker w SET state = 'dead', stopped_at = now(), running = 0
     WHERE w.state = 'running'
       AND w.last_heartbeat_at < now() - dead_after * w.heartbeat_interval * interval '1 second';
    FOR e IN
        SELECT x.*
          FROM pgsched.execution x
          LEFT JOIN pgsched.worker w ON w.id = x.worker_id
         WHERE x.state = 'running'
           AND (w.id IS NULL OR w.state <> 'running'
                OR (w.held IS NOT NULL AND w.held_prev_at IS NOT NULL AND x.started_at < w.held_prev_at
                    AND NOT (x.id = ANY (coalesce(w.held, '{}')))))
           FOR UPDATE OF x SKIP LOCKED
    LOOP
        execution_id := e.id;
        worker_id := e.worker_id;
        holder_alive := EXISTS (SELECT 1 FROM pgsched.worker w WHERE w.id = e.worker_id AND w.state = 'running');
        lost := CASE
            WHEN holder_alive THEN format('worker %s, alive, no longer reports attempt %s as its own (a claim '
                                          'whose reply it never received)', e.worker_id, e.attempt)
            ELSE format('worker %s was lost (no heartbeat) while running attempt %s', e.worker_id, e.attempt)
        END;
        IF e.cancel_requested_at IS NOT NULL THEN
            INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state,
                                                   started_at, finished_at, error, lease_id)
            VALUES (e.id, e.attempt, e.tenant, e.worker_id, 'lost',
                    coalesce(e.start_confirmed_at, e.started_at, now()), now(), lost, e.lease_id);
            PERFORM pgsched_internal.finish_v1(e, 'cancelled', lost || '; cancel was requested');
            outcome := 'cancelled';
        ELSIF e.confirm_start AND e.start_confirmed_at IS NULL THEN
            -- Its start had to be recorded before it ran, and was not: it never started.
            UPDATE pgsched.execution x
               SET state = 'pending', attempt = x.attempt - 1, worker_id = NULL, started_at = NULL,
                   lease_id = NULL
             WHERE x.id = e.id;
            outcome := 'unclaimed';
        ELSIF e.confirm_start THEN
            e.lost_attempts := e.lost_attempts + 1;
            why := format('%s (started at %s)', lost, e.start_confirmed_at);
            INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state,
                                                   started_at, finished_at, error, lease_id)
            VALUES (e.id, e.attempt, e.tenant, e.worker_id, 'lost', e.start_confirmed_at, now(), why,
                    e.lease_id);
            IF e.lost_attempts >= max_lost THEN
                PERFORM pgsched_internal.finish_v1(e, 'dead', why || format('; lost %s times, so it is dead', e.lost_attempts));
                outcome := 'dead';
            ELSE
                UPDATE pgsched.execution x
                   SET state = 'pending', run_at = now(), worker_id = NULL, lease_id = NULL,
                       started_at = NULL, start_confirmed_at = NULL, lost_attempts = e.lost_attempts,
                       max_attempts = x.max_attempts + 1
                 WHERE x.id = e.id;
                outcome := 'requeued';
            END IF;
        ELSE
            why := lost || ', whose start was not recorded: it may have waited unstarted in the worker''s '
                   'buffer, so this loss does not count toward max_lost_attempts; its next worker records '
                   'the start before running it';
            INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state,
                                                   started_at, finished_at, error, lease_id)
            VALUES (e.id, e.attempt, e.tenant, e.worker_id, 'lost', coalesce(e.started_at, now()), now(),
                    why, e.lease_id);
            UPDATE pgsched.execution x
               SET state = 'pending', run_at = now(), worker_id = NULL, lease_id = NULL,
                   started_at = NULL, start_confirmed_at = NULL, confirm_start = true,
                   max_attempts = x.max_attempts + 1
             WHERE x.id = e.id;
            outcome := 'requeued';
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

--
-- Name: retry_budget_lock_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.retry_budget_lock_v1() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1(
        'retry budget', CASE WHEN pgsched_internal.is_instance_v1() THEN ''
                             ELSE coalesce(pgsched_internal.session_tenant_v1(), '') END));
END $$;

--
-- Name: FUNCTION retry_budget_lock_v1(); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.retry_budget_lock_v1() IS 'the retry budget''s lock, per tenant of the caller, to the end of the transaction (0027)';

--
-- Name: retry_slot_v1(timestamp with time zone); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.retry_slot_v1(proposed_at timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql
    AS $$
DECLARE
    started integer;
    allowed integer;
    slot timestamptz := proposed_at;
    minute timestamptz;
    used integer;
BEGIN
    PERFORM pgsched_internal.retry_budget_lock_v1();  -- the retry budget, one caller at a time
    SELECT count(*) INTO started FROM pgsched.execution_attempt a
     WHERE a.started_at > now() - interval '1 minute';
    allowed := greatest((pgsched_internal.setting_v1('retry_budget_min_per_minute'))::integer,
                        floor((pgsched_internal.setting_v1('retry_budget_ratio'))::float8 * started)::integer);
    FOR i IN 1..60 LOOP
        minute := date_trunc('minute', slot);
        SELECT count(*) INTO used FROM pgsched.execution x
         WHERE x.attempt > 0
           AND ((x.state = 'pending' AND x.run_at >= minute AND x.run_at < minute + interval '1 minute')
             OR (x.state = 'running' AND x.attempt > 1
                 AND x.started_at >= minute AND x.started_at < minute + interval '1 minute'));
        used := used + (SELECT count(*) FROM pgsched.execution_attempt a
                         WHERE a.attempt > 1 AND a.started_at >= minute
                           AND a.started_at < minute + interval '1 minute');
        EXIT WHEN used < allowed;
        slot := minute + interval '1 minute';
    END LOOP;
    RETURN slot;
END $$;

--
-- Name: run_request_insert_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.run_request_insert_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    r record;
BEGIN
    IF NEW.task IS NULL THEN
        RAISE EXCEPTION 'task: a run request needs a task name' USING ERRCODE = 'not_null_violation';
    END IF;
    SELECT * INTO r FROM pgsched.enqueue_v2(NEW.task, NEW.params, NEW.run_at, NEW.priority,
                                            NEW.idempotency_key, NEW.tenant, 'insert');
    NEW.tenant := pgsched_internal.caller_tenant_v1(NEW.tenant);
    NEW.execution_id := r.execution_id;
    NEW.deduplicated := r.deduplicated;
    NEW.dedup_reason := r.dedup_reason;
    NEW.succeeded_execution_id := r.succeeded_execution_id;
    RETURN NEW;
END $$;

--
-- Name: secret_check_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.secret_check_v1(t text, secret_name text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $_$
BEGIN
    IF secret_name IS NULL OR secret_name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' THEN
        RAISE EXCEPTION 'name: % must be 1-64 characters: letters, digits and . _ - (starting with a letter or digit)',
            coalesce(quote_literal(left(secret_name, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM pgsched.tenant x WHERE x.name = t) THEN
        RAISE EXCEPTION 'tenant: no tenant %', quote_literal(t) USING ERRCODE = 'no_data_found';
    END IF;
END $_$;

--
-- Name: secret_fetch_v1(text, text[]); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.secret_fetch_v1(tenant text, names text[]) RETURNS TABLE(secret_name text, ciphertext bytea, nonce bytea, key_id text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    t text := pgsched_internal.caller_tenant_v1(secret_fetch_v1.tenant);
BEGIN
    IF NOT (pgsched_internal.is_instance_v1() OR pg_has_role(session_user, 'pgsched_engine', 'MEMBER')) THEN
        RAISE EXCEPTION 'secret: role % is no worker''s; only engine logins fetch sealed secrets',
            quote_ident(session_user) USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY
        SELECT s.name, s.ciphertext, s.nonce, s.key_id
          FROM pgsched_internal.secret s
         WHERE s.tenant = t AND s.name = ANY (names);
END $$;

--
-- Name: secret_writer_check_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.secret_writer_check_v1() RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF NOT (pgsched_internal.is_instance_v1()
            OR pg_has_role(session_user, 'pgsched_engine', 'MEMBER')
            OR pg_has_role(session_user, 'pgsched_web', 'MEMBER')) THEN
        RAISE EXCEPTION 'secret: role % is an application''s; setting and deleting secrets is for the tenant''s engine login, the web admin or the installation',
            quote_ident(session_user) USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

--
-- Name: secure_0029_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.secure_0029_v1() RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    o record;
    web_only boolean;
    secured boolean;
    refs text;
BEGIN
    EXECUTE 'ALTER SCHEMA pgsched OWNER TO pgsched_owner';
    EXECUTE 'ALTER SCHEMA pgsched_internal OWNER TO pgsched_owner';
    FOR o IN SELECT c.oid::regclass AS rel, c.relkind, c.relname::text AS name, c.relispartition
               FROM pg_class c
              WHERE c.relnamespace IN ('pgsched'::regnamespace, 'pgsched_internal'::regnamespace)
                AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
                AND NOT (c.relkind = 'S' AND EXISTS (SELECT FROM pg_depend d  -- an identity's or a serial's
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
                AND pg_get_userbyid(c.relowner) <> 'pgsched_owner'
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO pgsched_owner',
                       CASE o.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW'
                                      WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END, o.rel);
    END LOOP;
    FOR o IN SELECT p.oid::regprocedure AS fn, p.prokind
               FROM pg_proc p
              WHERE p.pronamespace IN ('pgsched'::regnamespace, 'pgsched_internal'::regnamespace)
                AND pg_get_userbyid(p.proowner) <> 'pgsched_owner'
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO pgsched_owner',
                       CASE o.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, o.fn);
    END LOOP;
    FOR o IN SELECT t.oid::regtype AS ty FROM pg_type t
              WHERE t.typnamespace IN ('pgsched'::regnamespace, 'pgsched_internal'::regnamespace)
                AND t.typtype IN ('e', 'd', 'c') AND t.typrelid = 0
                AND pg_get_userbyid(t.typowner) <> 'pgsched_owner'
    LOOP
        EXECUTE format('ALTER TYPE %s OWNER TO pgsched_owner', o.ty);
    END LOOP;

    REVOKE ALL ON SCHEMA pgsched, pgsched_internal FROM PUBLIC;
    GRANT USAGE ON SCHEMA pgsched TO pgsched_engine, pgsched_web, pgsched_app;
    GRANT USAGE ON SCHEMA pgsched_internal TO pgsched_engine, pgsched_web;

    REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgsched, pgsched_internal FROM PUBLIC;
    GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgsched TO pgsched_engine, pgsched_web, pgsched_app;
    GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgsched_internal TO pgsched_engine, pgsched_web;
    REVOKE EXECUTE ON FUNCTION pgsched_internal.secure_v1(),
                               pgsched_internal.tenant_login_v1(text, text, text, text),
                               pgsched_internal.tenant_drop_login_v1(text, text)
        FROM pgsched_engine, pgsched_web;
    -- A definer function of the engine's does what row-level security would not let its
    -- caller do (partitions, the audit log's writes and prune): the installation's alone
    -- (and the audit log's writes the web's), not a tenant's engine login's. The helpers
    -- that say who the caller is are everyone's.
    FOR o IN SELECT p.oid::regprocedure AS fn, p.proname::text AS name
               FROM pg_proc p
              WHERE p.pronamespace = 'pgsched_internal'::regnamespace AND p.prosecdef
                AND p.proname NOT IN ('session_tenant_v1', 'is_instance_v1', 'caller_tenant_v1',
                                      'caller_trigger_v1', 'execution_claim_v1',
                                      -- 0027: locks an engine or web login takes for its own
                                      -- tenant, and who holds the leader lock (never a key)
                                      'dag_lock_v1', 'retry_budget_lock_v1', 'leader_sessions_v1',
                                      'window_lock_v1',
                                      -- 0029: checks its caller itself (an engine login of
                                      -- the tenant asked for, or the installation)
                                      'secret_fetch_v1')
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM pgsched_engine, pgsched_web', o.fn);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO pgsched_instance', o.fn);
        IF o.name = 'audit_record_v1' THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO pgsched_web', o.fn);
        END IF;
    END LOOP;

    REVOKE ALL ON ALL TABLES IN SCHEMA pgsched, pgsched_internal FROM PUBLIC;
    REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgsched, pgsched_internal FROM PUBLIC;
    -- nextval for everyone who inserts; reading or setting a sequence (how busy another
    -- tenant is; exhausting an id) is the installation's
    REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgsched FROM pgsched_engine, pgsched_web;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgsched TO pgsched_engine, pgsched_web;
    GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA pgsched TO pgsched_instance;
    FOR o IN SELECT c.oid::regclass AS rel, c.relname::text AS name, c.relkind,
                    EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant'
                                                         AND NOT a.attisdropped) AS has_tenant,
                    c.relrowsecurity
               FROM pg_class c
              WHERE c.relnamespace = 'pgsched'::regnamespace AND c.relkind IN ('r', 'p', 'v')
                AND NOT c.relispartition
    LOOP
        IF o.name = 'run_request' THEN
            EXECUTE format('GRANT SELECT, INSERT ON %s TO pgsched_engine, pgsched_web, pgsched_app', o.rel);
            CONTINUE;
        END IF;
        web_only := o.name LIKE 'web\_%' OR o.name = 'api_token';
        IF o.relkind = 'v' THEN
            EXECUTE format('GRANT SELECT ON %s TO pgsched_engine, pgsched_web', o.rel);
        ELSIF web_only THEN
            EXECUTE format('REVOKE ALL ON %s FROM pgsched_engine, pgsched_app', o.rel);
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO pgsched_web', o.rel);
        ELSIF o.name IN ('tenant', 'tenant_role', 'schema_migration') THEN
            -- who acts for which tenant, and which migrations ran, are the owner's to write
            -- (pgsched tenant, pgsched migrate): a tenant's engine login that could write the
            -- map could put itself in another tenant
            EXECUTE format('REVOKE ALL ON %s FROM pgsched_engine, pgsched_web, pgsched_app', o.rel);
            EXECUTE format('GRANT SELECT ON %s TO pgsched_engine, pgsched_web', o.rel);
        ELSIF (NOT o.has_tenant AND NOT o.relrowsecurity) OR o.name IN ('leader', 'scheduler_node') THEN
            -- the installation's own rows (settings, leadership, the state of the roll-up and
            -- of alerting): an engine login reads them; writing them is an installation-wide
            -- login's (the scheduler's) or the web's
            EXECUTE format('REVOKE ALL ON %s FROM pgsched_engine', o.rel);
            EXECUTE format('GRANT SELECT ON %s TO pgsched_engine', o.rel);
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO pgsched_web, pgsched_instance', o.rel);
        ELSE
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO pgsched_engine, pgsched_web', o.rel);
        END IF;
        -- the workers: a tenant's engine login sees and changes the rows of its tenant's
        -- workers alone (worker.tenants, 0020), so that it cannot declare another's dead
        IF o.name = 'worker' AND NOT o.relrowsecurity AND EXISTS (
               SELECT FROM pg_attribute a WHERE a.attrelid = o.rel AND a.attname = 'tenants') THEN
            EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', o.rel);
            EXECUTE format('CREATE POLICY tenant_rows ON %s TO pgsched_engine '
                           'USING (tenants = ARRAY[(SELECT pgsched_internal.session_tenant_v1())]) '
                           'WITH CHECK (tenants = ARRAY[(SELECT pgsched_internal.session_tenant_v1())])',
                           o.rel);
            EXECUTE format('CREATE POLICY web_rows ON %s TO pgsched_web USING (true) WITH CHECK (true)', o.rel);
            EXECUTE format('CREATE POLICY instance_rows ON %s TO pgsched_instance USING (true) WITH CHECK (true)', o.rel);
            CONTINUE;
        END IF;
        secured := o.relrowsecurity;
        IF o.relkind <> 'v' AND o.has_tenant AND NOT web_only
           AND o.name NOT IN ('leader', 'worker', 'scheduler_node') AND NOT o.relrowsecurity THEN
            secured := true;
            EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', o.rel);
            -- a row written names only rows of its own tenant: its task, execution, DAG, run
            -- (under row-level security a tenant's login sees no other tenant's)
            refs := '';
            IF EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = o.rel AND a.attname = 'task_id') THEN
                refs := refs || ' AND (task_id IS NULL OR EXISTS (SELECT FROM pgsched.task k WHERE k.id = task_id))';
            END IF;
            IF EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = o.rel AND a.attname = 'execution_id') THEN
                refs := refs || ' AND (EXISTS (SELECT FROM pgsched.execution e WHERE e.id = execution_id)'
                             || ' OR EXISTS (SELECT FROM pgsched.execution_history h WHERE h.id = execution_id))';
            END IF;
            IF EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = o.rel AND a.attname = 'dag_id') THEN
                refs := refs || ' AND EXISTS (SELECT FROM pgsched.dag d WHERE d.id = dag_id)';
            END IF;
            EXECUTE format('CREATE POLICY tenant_rows ON %s TO pgsched_engine '
                           'USING (tenant = (SELECT pgsched_internal.session_tenant_v1())) '
                           'WITH CHECK (tenant = (SELECT pgsched_internal.session_tenant_v1())%s)', o.rel, refs);
            EXECUTE format('CREATE POLICY web_rows ON %s TO pgsched_web '
                           'USING ((SELECT pgsched_internal.session_tenant_v1()) IN (tenant, ''*'')) '
                           'WITH CHECK ((SELECT pgsched_internal.session_tenant_v1()) IN (tenant, ''*''))', o.rel);
        END IF;
        IF secured AND NOT EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = o.rel AND p.polname = 'instance_rows') THEN
            EXECUTE format('CREATE POLICY instance_rows ON %s TO pgsched_instance USING (true) WITH CHECK (true)', o.rel);
        END IF;
    END LOOP;
END $$;

--
-- Name: FUNCTION secure_0029_v1(); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.secure_0029_v1() IS 'gives pgsched_owner every object and sets the grants and row-level security (migrations 0018, 0021, 0027)';

--
-- Name: secure_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.secure_v1() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pgsched_internal.secure_0029_v1();
    REVOKE EXECUTE ON FUNCTION pgsched_internal.secure_v1(), pgsched_internal.secure_0029_v1()
        FROM PUBLIC, pgsched_engine, pgsched_web;
    -- 0033: answers only for the caller's own tenant, and only whether a worker serves
    GRANT EXECUTE ON FUNCTION pgsched_internal.queue_served_v1(text, text)
        TO pgsched_engine, pgsched_web;
    -- 0034: the web sets the webhook of the tenant it acts for
    GRANT EXECUTE ON FUNCTION pgsched_internal.tenant_alert_webhook_set_v1(text, text) TO pgsched_web;
END $$;

--
-- Name: FUNCTION secure_v1(); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.secure_v1() IS 'ownership, grants and row-level security of every pgsched object (0029), and the definers opened to engine and web logins since (0033); run at the end of each migration';

--
-- Name: sensitive_key_v1(text, text[]); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.sensitive_key_v1(key text, marked text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((key ~* 'passw(or)?d|secret|token|api_?key|credential|private_?key|auth|dsn'::text) OR (lower(key) IN (SELECT lower(m.m) AS lower FROM unnest(sensitive_key_v1.marked) m(m))));

--
-- Name: session_tenant_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.session_tenant_v1() RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
    SELECT coalesce(
        (SELECT m.tenant FROM pgsched.tenant_role m WHERE m.role_name = session_user),
        CASE WHEN pg_has_role(session_user, 'pgsched_web', 'MEMBER')
             THEN nullif(current_setting('pgsched.tenant', true), '') END);
$$;

--
-- Name: FUNCTION session_tenant_v1(); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.session_tenant_v1() IS 'the tenant this session acts for: its login''s (tenant_role), else for a web login the pgsched.tenant setting (''*'': every tenant), else NULL (none)';

--
-- Name: setting_v1(text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.setting_v1(setting_name text) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    SELECT value FROM pgsched.setting WHERE name = setting_name;
$$;

--
-- Name: shown_v1(anyelement, text[]); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.shown_v1(r anyelement, marked text[] DEFAULT '{}'::text[]) RETURNS anyelement
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
DECLARE
    j jsonb;
    masked jsonb := '{}';
BEGIN
    IF pgsched_internal.may_reveal_v1() THEN
        RETURN r;
    END IF;
    j := to_jsonb(r);
    IF j ? 'env' THEN
        masked := jsonb_build_object('env', pgsched_internal.env_masked_v1(j -> 'env'));
    END IF;
    IF j ? 'params' THEN
        masked := masked || jsonb_build_object('params',
                                               pgsched_internal.params_masked_v1(j -> 'params', marked));
    END IF;
    IF j ? 'definition' THEN
        masked := masked || jsonb_build_object('definition',
                                               pgsched_internal.definition_masked_v1(j -> 'definition'));
    END IF;
    RETURN jsonb_populate_record(r, masked);
END $$;

--
-- Name: stats_add_v1(bigint[], bigint[]); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.stats_add_v1(a bigint[], b bigint[]) RETURNS bigint[]
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE
        ARRAY(SELECT x + y FROM unnest(a, b) AS u(x, y)) END;
$$;

--
-- Name: stats_rollup_v1(integer); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.stats_rollup_v1(keep_hours integer DEFAULT 48) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
DECLARE
    since timestamptz;
    final timestamptz;
    lat text;
    dur text;
    written integer;
BEGIN
    PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1('rollup'));  -- one at a time
    SELECT dirty_from INTO since FROM pgsched.stats_rollup_state;
    since := coalesce(since, date_trunc('hour', now() - interval '24 hours'));
    SELECT string_agg(format('count(*) FILTER (WHERE lat <= %s)', b), ', ' ORDER BY i)
      INTO lat FROM pgsched.stats_bucket, unnest(bounds) WITH ORDINALITY AS u(b, i) WHERE kind = 'latency';
    SELECT string_agg(format('count(*) FILTER (WHERE dur <= %s)', b), ', ' ORDER BY i)
      INTO dur FROM pgsched.stats_bucket, unnest(bounds) WITH ORDINALITY AS u(b, i) WHERE kind = 'duration';
    DELETE FROM pgsched.stats_hourly WHERE hour >= since;
    EXECUTE format(
        'INSERT INTO pgsched.stats_hourly (hour, tenant, task_id, state, executions, started, retries,
                                           latency_sum, duration_sum, latency_le, duration_le)
         SELECT date_trunc(''hour'', finished_at), tenant, task_id, state, count(*), count(lat),
                coalesce(sum(greatest(attempt - 1, 0)), 0),
                coalesce(sum(lat), 0), coalesce(sum(dur), 0), ARRAY[%s]::bigint[], ARRAY[%s]::bigint[]
           FROM (SELECT finished_at, tenant, task_id, state, attempt,
                        extract(epoch FROM started_at - run_at)::float8 AS lat,
                        extract(epoch FROM finished_at - started_at)::float8 AS dur
                   FROM pgsched.execution_history WHERE finished_at >= $1) h
          GROUP BY 1, 2, 3, 4', lat, dur) USING since;
    GET DIAGNOSTICS written = ROW_COUNT;
    final := date_trunc('hour', now() - interval '5 minutes');
    WITH closed AS (
        SELECT tenant, task_id, state, sum(executions) AS executions, sum(started) AS started,
               sum(retries) AS retries, sum(latency_sum) AS latency_sum, sum(duration_sum) AS duration_sum,
               pgsched_internal.stats_sum_v1(latency_le) AS latency_le, pgsched_internal.stats_sum_v1(duration_le) AS duration_le
          FROM pgsched.stats_hourly WHERE hour >= since AND hour < final
         GROUP BY 1, 2, 3
    )
    INSERT INTO pgsched.stats_total AS t SELECT * FROM closed
    ON CONFLICT (tenant, task_id, state) DO UPDATE
       SET executions = t.executions + EXCLUDED.executions, started = t.started + EXCLUDED.started,
           retries = t.retries + EXCLUDED.retries,
           latency_sum = t.latency_sum + EXCLUDED.latency_sum,
           duration_sum = t.duration_sum + EXCLUDED.duration_sum,
           latency_le = pgsched_internal.stats_add_v1(t.latency_le, EXCLUDED.latency_le),
           duration_le = pgsched_internal.stats_add_v1(t.duration_le, EXCLUDED.duration_le);
    -- at least a day: the dashboard's last day reads these hours
    DELETE FROM pgsched.stats_hourly
     WHERE hour < date_trunc('hour', now()) - make_interval(hours => greatest(keep_hours, 24));
    INSERT INTO pgsched.stats_rollup_state (singleton, dirty_from, rolled_at)
    VALUES (true, greatest(final, since), now())
    ON CONFLICT (singleton) DO UPDATE SET dirty_from = EXCLUDED.dirty_from, rolled_at = EXCLUDED.rolled_at;
    RETURN written;
END $_$;

--
-- Name: task_key_unmarked_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.task_key_unmarked_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    place text;
BEGIN
    SELECT m[1] INTO place
      FROM regexp_matches(NEW.concurrency_key, '\{([^{}]*)\}', 'g') AS m
     WHERE lower(m[1]) IN (SELECT lower(k) FROM unnest(NEW.sensitive_params) AS k)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'concurrency_key: % names the param %, which task % marks sensitive (sensitive_params): its value would be the key every viewer reads; key on another param',
            quote_literal(NEW.concurrency_key), quote_literal(place), quote_literal(NEW.name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;

--
-- Name: task_last_fire_forward_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.task_last_fire_forward_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'task %: last_fire_at cannot move back from % to % (the fires up to it were dealt with)',
        quote_literal(OLD.name), OLD.last_fire_at, coalesce(NEW.last_fire_at::text, 'NULL')
        USING ERRCODE = 'check_violation', TABLE = 'task', COLUMN = 'last_fire_at';
END $$;

--
-- Name: task_marks_kept_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.task_marks_kept_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT pgsched_internal.may_reveal_v1()
       AND EXISTS (SELECT FROM unnest(OLD.sensitive_params) o(k)
                    WHERE lower(o.k) <> ALL (SELECT lower(n.k)
                                               FROM unnest(NEW.sensitive_params) n(k))) THEN
        RAISE EXCEPTION 'sensitive_params: % drops a mark of task %; only a session that reads sensitive values may unmark one (the reveal permission, pgsched user update --may-reveal)',
            to_jsonb(NEW.sensitive_params), quote_literal(OLD.name)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;

--
-- Name: task_notify_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.task_notify_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('pgsched_task', '');
    RETURN NULL;
END $$;

--
-- Name: task_pause_track_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.task_pause_track_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.enabled THEN
        NEW.paused_at := NULL;
        NEW.paused_by := NULL;
        NEW.pause_reason := NULL;
    ELSIF NEW.deleted_at IS NULL THEN
        NEW.paused_at := coalesce(NEW.paused_at, now());
        NEW.paused_by := coalesce(NEW.paused_by, 'operator');
    END IF;
    RETURN NEW;
END $$;

--
-- Name: task_referenced_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.task_referenced_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    named bigint;
    changed boolean := true;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        IF TG_OP = 'DELETE' THEN  -- old_tasks exists only here: a statement is planned when run
            changed := EXISTS (SELECT FROM old_tasks);
        END IF;
    END IF;
    IF changed AND current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'task: rows are deleted, renumbered or truncated only in READ COMMITTED, not %: '
                        'a stricter snapshot cannot see executions that name them (pgsched task delete '
                        'soft-deletes a task instead)', current_setting('transaction_isolation')
            USING ERRCODE = 'feature_not_supported', TABLE = 'task';
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        SELECT e.task_id INTO named FROM pgsched.execution e LIMIT 1;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT e.task_id INTO named FROM pgsched.execution e WHERE e.task_id = OLD.id LIMIT 1;
    ELSE
        SELECT e.task_id INTO named FROM pgsched.execution e
         WHERE e.task_id IN (SELECT o.id FROM old_tasks o) LIMIT 1;
    END IF;
    IF FOUND THEN
        RAISE EXCEPTION 'task: % is still named by executions (soft-delete it: pgsched task delete)', named
            USING ERRCODE = 'foreign_key_violation', TABLE = 'task', COLUMN = 'id';
    END IF;
    RETURN NULL;
END $$;

--
-- Name: task_share_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.task_share_v1(task_name text, tenant text) RETURNS void
    LANGUAGE sql
    AS $$
    SELECT NULL::void FROM (SELECT 1 FROM pgsched.task k
                             WHERE k.tenant = task_share_v1.tenant AND k.name = task_share_v1.task_name
                               AND k.deleted_at IS NULL
                               FOR KEY SHARE) locked
$$;

--
-- Name: task_windowed_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.task_windowed_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE pgsched.execution e SET windowed = true WHERE e.task_id = NEW.id AND NOT e.windowed;
    RETURN NULL;
END $$;

--
-- Name: tenant_alert_webhook_set_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.tenant_alert_webhook_set_v1(t text, url text) RETURNS pgsched.tenant
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
DECLARE
    r pgsched.tenant;
BEGIN
    IF NOT (pgsched_internal.is_instance_v1() OR pgsched_internal.session_tenant_v1() IN (t, '*')) THEN
        RAISE EXCEPTION 'tenant: this login may not set the alert webhook of tenant %', quote_literal(t)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE pgsched.tenant SET alert_webhook = url WHERE name = t RETURNING * INTO r;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant: no tenant %', quote_literal(t) USING ERRCODE = 'no_data_found';
    END IF;
    RETURN r;
END $$;

--
-- Name: FUNCTION tenant_alert_webhook_set_v1(t text, url text); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.tenant_alert_webhook_set_v1(t text, url text) IS 'set (NULL: remove) where tenant t''s own alerts are POSTed: the installation, or the web acting for t (migration 0034)';

--
-- Name: tenant_drop_login_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.tenant_drop_login_v1(role_name text, tenant text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pgsched.tenant_role m
                    WHERE m.role_name = tenant_drop_login_v1.role_name AND m.tenant = tenant_drop_login_v1.tenant) THEN
        RAISE EXCEPTION 'login: role % does not act for tenant %', quote_ident(role_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    DELETE FROM pgsched.tenant_role m WHERE m.role_name = tenant_drop_login_v1.role_name;
    -- its sessions end with it (a worker on it would go on, refused everything)
    BEGIN
        PERFORM pg_terminate_backend(a.pid) FROM pg_stat_activity a
         WHERE a.usename = tenant_drop_login_v1.role_name AND a.pid <> pg_backend_pid();
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE WARNING 'login %: its open sessions go on until they end (% may not end them)',
            quote_ident(role_name), current_user;
    END;
    EXECUTE format('DROP ROLE IF EXISTS %I', role_name);
END $$;

--
-- Name: tenant_login_v1(text, text, text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.tenant_login_v1(role_name text, tenant text, purpose text, password text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    made boolean := false;
    other text;
BEGIN
    IF purpose NOT IN ('app', 'engine', 'web') THEN
        RAISE EXCEPTION 'purpose: % is not one of app, engine, web', quote_literal(purpose)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM pgsched.tenant t WHERE t.name = tenant_login_v1.tenant) THEN
        RAISE EXCEPTION 'tenant: no tenant named %', quote_literal(tenant) USING ERRCODE = 'no_data_found';
    END IF;
    SELECT m.tenant INTO other FROM pgsched.tenant_role m WHERE m.role_name = tenant_login_v1.role_name;
    IF other IS NOT NULL AND other <> tenant THEN
        RAISE EXCEPTION 'login: role % already acts for tenant %', quote_ident(role_name), quote_literal(other)
            USING ERRCODE = 'unique_violation';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = tenant_login_v1.role_name) THEN
        EXECUTE format('CREATE ROLE %I LOGIN', role_name);
        made := true;
    ELSIF EXISTS (SELECT FROM pg_roles r WHERE r.rolname = tenant_login_v1.role_name
                     AND (r.rolsuper OR r.rolbypassrls))
          OR pg_has_role(role_name, 'pgsched_owner', 'MEMBER')
          OR pg_has_role(role_name, 'pgsched_instance', 'MEMBER') THEN
        RAISE EXCEPTION 'login: role % acts for the whole installation; a tenant''s login must not',
            quote_ident(role_name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('GRANT %I TO %I', 'pgsched_' || purpose, role_name);
    IF password IS NOT NULL THEN
        EXECUTE format('ALTER ROLE %I PASSWORD %L', role_name, password);
    END IF;
    INSERT INTO pgsched.tenant_role (role_name, tenant, purpose)
    VALUES (role_name, tenant, purpose)
    ON CONFLICT ON CONSTRAINT tenant_role_pkey DO UPDATE SET purpose = EXCLUDED.purpose;
    RETURN made;
END $$;

--
-- Name: tenant_register_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.tenant_register_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $_$
BEGIN
    INSERT INTO pgsched.tenant (name)
    SELECT DISTINCT n.tenant FROM new_rows n
     WHERE n.tenant ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'
       AND NOT EXISTS (SELECT FROM pgsched.tenant t WHERE t.name = n.tenant)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $_$;

--
-- Name: tenant_usage_row_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.tenant_usage_row_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO pgsched.tenant_usage (tenant) SELECT n.name FROM new_tenants n ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

--
-- Name: usage_left_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.usage_left_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO pgsched.usage_delta (tenant, month_start, compute_seconds)
    SELECT o.tenant, date_trunc('month', statement_timestamp(), 'UTC'),
           sum(greatest(extract(epoch FROM statement_timestamp() - o.started_at), 0))
      FROM old_executions o
     WHERE o.state = 'running' AND o.started_at IS NOT NULL
     GROUP BY 1;
    RETURN NULL;
END $$;

--
-- Name: usage_log_added_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.usage_log_added_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO pgsched.usage_delta (tenant, log_bytes)
    SELECT n.tenant, sum(octet_length(n.line)) FROM new_lines n GROUP BY 1;
    RETURN NULL;
END $$;

--
-- Name: usage_log_removed_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.usage_log_removed_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO pgsched.usage_delta (tenant, log_bytes)
    SELECT o.tenant, -sum(octet_length(o.line)) FROM old_lines o GROUP BY 1;
    RETURN NULL;
END $$;

--
-- Name: usage_requeued_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.usage_requeued_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO pgsched.usage_delta (tenant, month_start, compute_seconds)
    VALUES (OLD.tenant, date_trunc('month', statement_timestamp(), 'UTC'),
            greatest(extract(epoch FROM statement_timestamp() - OLD.started_at), 0));
    RETURN NULL;
END $$;

--
-- Name: wait_reason_v1(pgsched.execution); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.wait_reason_v1(e pgsched.execution) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    ten record;
    use record;
    g record;
    k record;
    n bigint;
BEGIN
    IF e.state <> 'pending' OR e.run_at > now() THEN
        RETURN NULL;
    END IF;
    SELECT * INTO ten FROM pgsched.tenant x WHERE x.name = e.tenant;
    SELECT * INTO use FROM pgsched.tenant_usage u WHERE u.tenant = e.tenant;
    IF 'compute_minutes' = ANY (use.over) THEN
        RETURN format('tenant %s is over its quota of %s compute minutes this month', e.tenant,
                      ten.max_compute_minutes_per_month);
    ELSIF 'log_bytes' = ANY (use.over) THEN
        RETURN format('tenant %s is over its quota of %s stored log bytes', e.tenant, ten.max_log_bytes);
    END IF;
    IF ten.max_starts_per_hour IS NOT NULL AND use.hour_start = date_trunc('hour', now(), 'UTC')
       AND use.hour_starts >= ten.max_starts_per_hour THEN
        RETURN format('tenant %s started its quota of %s executions this hour (UTC)', e.tenant,
                      ten.max_starts_per_hour)
               || pgsched_internal.frees_text_v1(date_trunc('hour', now(), 'UTC') + interval '1 hour');
    END IF;
    IF ten.max_running IS NOT NULL THEN
        SELECT count(*) INTO n FROM pgsched.execution x WHERE x.tenant = e.tenant AND x.state = 'running';
        IF n >= ten.max_running THEN
            RETURN format('tenant %s runs its quota of %s executions at once', e.tenant, ten.max_running);
        END IF;
    END IF;
    SELECT * INTO g FROM pgsched.queue q WHERE q.tenant = e.tenant AND q.name = e.queue;
    IF g.paused_at IS NOT NULL THEN
        RETURN format('queue %s is paused%s', e.queue, coalesce(': ' || g.pause_reason, ''));
    END IF;
    IF g.max_running IS NOT NULL THEN
        SELECT count(*) INTO n FROM pgsched.execution x
         WHERE x.tenant = e.tenant AND x.queue = e.queue AND x.state = 'running';
        IF n >= g.max_running THEN
            RETURN format('queue %s runs its limit of %s at once (max_running)', e.queue, g.max_running);
        END IF;
    END IF;
    IF g.rate_limit IS NOT NULL THEN
        SELECT count(*) INTO n FROM pgsched.rate_start r
         WHERE r.tenant = e.tenant AND r.scope = 'queue' AND r.name = e.queue
           AND r.started_at > now() - make_interval(secs => g.rate_period_seconds);
        IF n >= g.rate_limit THEN
            RETURN format('queue %s started its rate limit of %s per %s', e.queue, g.rate_limit,
                          pgsched_internal.period_text_v1(g.rate_period_seconds))
                   || pgsched_internal.frees_text_v1(pgsched_internal.limit_frees_at_v1(
                          e.tenant, 'queue_rate', e.queue, g.rate_period_seconds, now()));
        END IF;
    END IF;
    SELECT * INTO k FROM pgsched.task t WHERE t.id = e.task_id;
    IF k.overlap_policy = 'queue_one' AND coalesce(k.max_running, 1) >= 1 THEN  -- 0022
        SELECT count(*) INTO n FROM pgsched.execution x
         WHERE x.tenant = e.tenant AND x.task_id = e.task_id AND x.state = 'running';
        IF n >= 1 THEN
            RETURN format('task %s runs one execution at a time (overlap policy queue_one)', k.name);
        END IF;
    END IF;
    IF k.max_running IS NOT NULL THEN
        SELECT count(*) INTO n FROM pgsched.execution x
         WHERE x.tenant = e.tenant AND x.task_id = e.task_id AND x.state = 'running';
        IF n >= k.max_running THEN
            RETURN format('task %s runs its limit of %s at once (max_running)', k.name, k.max_running);
        END IF;
    END IF;
    IF k.rate_limit IS NOT NULL THEN
        SELECT count(*) INTO n FROM pgsched.rate_start r
         WHERE r.tenant = e.tenant AND r.scope = 'task' AND r.name = e.task_id::text
           AND r.started_at > now() - make_interval(secs => k.rate_period_seconds);
        IF n >= k.rate_limit THEN
            RETURN format('task %s started its rate limit of %s per %s', k.name, k.rate_limit,
                          pgsched_internal.period_text_v1(k.rate_period_seconds))
                   || pgsched_internal.frees_text_v1(pgsched_internal.limit_frees_at_v1(
                          e.tenant, 'task_rate', e.task_id::text, k.rate_period_seconds, now()));
        END IF;
    END IF;
    IF e.concurrency_key IS NOT NULL AND k.key_max_running IS NOT NULL THEN
        SELECT count(*) INTO n FROM pgsched.execution x
         WHERE x.tenant = e.tenant AND x.concurrency_key = e.concurrency_key AND x.state = 'running';
        IF n >= k.key_max_running THEN
            RETURN format('key %s runs its limit of %s at once (key_max_running)', e.concurrency_key,
                          k.key_max_running);
        END IF;
    END IF;
    IF e.concurrency_key IS NOT NULL AND k.key_rate_limit IS NOT NULL THEN
        SELECT count(*) INTO n FROM pgsched.rate_start r
         WHERE r.tenant = e.tenant AND r.scope = 'key' AND r.name = e.concurrency_key
           AND r.started_at > now() - make_interval(secs => k.key_rate_period_seconds);
        IF n >= k.key_rate_limit THEN
            RETURN format('key %s started its rate limit of %s per %s', e.concurrency_key,
                          k.key_rate_limit, pgsched_internal.period_text_v1(k.key_rate_period_seconds))
                   || pgsched_internal.frees_text_v1(pgsched_internal.limit_frees_at_v1(
                          e.tenant, 'key_rate', e.concurrency_key, k.key_rate_period_seconds, now()));
        END IF;
    END IF;
    RETURN NULL;
END $$;

--
-- Name: webhook_execution_finished_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.webhook_execution_finished_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    a pgsched.task_alerting;
    body jsonb;
BEGIN
    SELECT * INTO a FROM pgsched.task_alerting WHERE task_id = NEW.task_id;
    IF NOT FOUND OR (a.on_failure IS NULL AND a.on_dlq IS NULL) THEN RETURN NULL; END IF;
    body := jsonb_build_object(
        'task', (SELECT name FROM pgsched.task WHERE id = NEW.task_id), 'tenant', NEW.tenant,
        'execution_id', NEW.id, 'state', NEW.state, 'attempt', NEW.attempt,
        'scheduled_at', NEW.scheduled_at, 'started_at', NEW.started_at, 'finished_at', NEW.finished_at,
        'exit_code', NEW.exit_code, 'error', left(NEW.error, 2000));
    IF a.on_failure IS NOT NULL THEN
        INSERT INTO pgsched.webhook_delivery (tenant, task_id, event, url, payload)
        VALUES (NEW.tenant, NEW.task_id, 'failure', a.on_failure, body || '{"event": "failure"}');
    END IF;
    IF NEW.state = 'dead' AND a.on_dlq IS NOT NULL THEN
        INSERT INTO pgsched.webhook_delivery (tenant, task_id, event, url, payload)
        VALUES (NEW.tenant, NEW.task_id, 'dlq', a.on_dlq, body || '{"event": "dlq"}');
    END IF;
    RETURN NULL;
END $$;

--
-- Name: window_check_v1(pgsched.task, jsonb, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.window_check_v1(t pgsched.task, run_params jsonb, how text, OUT existing bigint, OUT reason text, OUT why text) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    key text := pgsched_internal.concurrency_key_v1(t.concurrency_key, run_params);
    scope_name text;
    live_state text;
    last record;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'task %: its overlap policy and unique window are checked in READ COMMITTED only, '
                        'not in % (run this enqueue in a READ COMMITTED transaction)',
            quote_literal(t.name), current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    -- the task's lock for its overlap policy and a task scope; enqueues of a key scope
    -- with different keys need not wait for each other (task first, then key: one order)
    IF t.overlap_policy <> 'allow' OR t.unique_scope = 'task' THEN
        PERFORM pgsched_internal.window_lock_v1(t.tenant, 'task ' || t.id);
    END IF;
    IF t.unique_scope = 'key' THEN
        PERFORM pgsched_internal.window_lock_v1(t.tenant, 'key ' || key);
    END IF;
    IF how = 'schedule' AND t.overlap_policy = 'skip' THEN
        SELECT e.id, e.state INTO existing, live_state FROM pgsched.execution e
         WHERE e.task_id = t.id AND e.windowed ORDER BY e.state DESC, e.id LIMIT 1;  -- running first
        IF existing IS NOT NULL THEN
            reason := 'overlap_skip';
            why := format('overlap policy skip: execution %s of this task is %s', existing, live_state);
            RETURN;
        END IF;
    ELSIF how = 'schedule' AND t.overlap_policy = 'queue_one' THEN
        SELECT e.id INTO existing FROM pgsched.execution e
         WHERE e.task_id = t.id AND e.windowed AND e.state = 'pending' ORDER BY e.id LIMIT 1;
        IF existing IS NOT NULL THEN
            reason := 'overlap_queue_one';
            why := format('overlap policy queue_one: execution %s of this task already waits', existing);
            RETURN;
        END IF;
    END IF;
    IF t.unique_policy = 'pending' THEN
        IF t.unique_scope = 'task' THEN
            SELECT e.id INTO existing FROM pgsched.execution e
             WHERE e.task_id = t.id AND e.windowed AND e.state = 'pending'
             ORDER BY e.id LIMIT 1 FOR SHARE;
        ELSE
            SELECT e.id INTO existing FROM pgsched.execution e
             WHERE e.tenant = t.tenant AND e.concurrency_key = key AND e.windowed AND e.state = 'pending'
             ORDER BY e.id LIMIT 1 FOR SHARE;
        END IF;
        IF existing IS NOT NULL THEN
            reason := 'unique_pending';
            why := format('unique window: execution %s of this %s is pending', existing,
                          CASE t.unique_scope WHEN 'task' THEN 'task' ELSE 'key ' || quote_literal(key) END);
            RETURN;
        END IF;
    END IF;
    IF t.unique_period_seconds IS NOT NULL THEN
        scope_name := CASE t.unique_scope WHEN 'task' THEN t.id::text ELSE key END;
        SELECT u.execution_id, u.enqueued_at INTO last FROM pgsched.unique_period u
         WHERE u.tenant = t.tenant AND u.scope = t.unique_scope AND u.name = scope_name;
        IF last.execution_id IS NOT NULL
           AND last.enqueued_at > clock_timestamp() - make_interval(secs => t.unique_period_seconds) THEN
            existing := last.execution_id;
            reason := 'unique_period';
            why := format('unique window: execution %s of this %s was enqueued at %s, within %s s', existing,
                          CASE t.unique_scope WHEN 'task' THEN 'task' ELSE 'key ' || quote_literal(key) END,
                          last.enqueued_at, t.unique_period_seconds);
            RETURN;
        END IF;
    END IF;
END $$;

--
-- Name: window_enqueued_v1(pgsched.task, jsonb, bigint); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.window_enqueued_v1(t pgsched.task, run_params jsonb, made bigint) RETURNS void
    LANGUAGE sql
    AS $$
    INSERT INTO pgsched.unique_period AS u (tenant, scope, name, execution_id, enqueued_at)
    SELECT t.tenant, t.unique_scope,
           CASE t.unique_scope WHEN 'task' THEN t.id::text
                               ELSE pgsched_internal.concurrency_key_v1(t.concurrency_key, run_params) END,
           made, clock_timestamp()
     WHERE t.unique_period_seconds IS NOT NULL
    ON CONFLICT (tenant, scope, name) DO UPDATE SET execution_id = excluded.execution_id,
                                                    enqueued_at = excluded.enqueued_at;
$$;

--
-- Name: window_lock_v1(text, text); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.window_lock_v1(tenant text, what text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1(
        'window', pgsched_internal.caller_tenant_v1(window_lock_v1.tenant) || ' ' || window_lock_v1.what));
END $$;

--
-- Name: FUNCTION window_lock_v1(tenant text, what text); Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON FUNCTION pgsched_internal.window_lock_v1(tenant text, what text) IS 'a unique window''s or overlap policy''s lock of the caller''s tenant, to the end of the transaction (0028)';

--
-- Name: window_try_lock_v1(pgsched.task, jsonb); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.window_try_lock_v1(t pgsched.task, run_params jsonb) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF (t.overlap_policy <> 'allow' OR t.unique_scope = 'task')
       AND NOT pg_try_advisory_xact_lock(pgsched_internal.internal_key_v1('window', t.tenant || ' task ' || t.id)) THEN
        RETURN false;
    END IF;
    IF t.unique_scope = 'key' THEN
        RETURN pg_try_advisory_xact_lock(pgsched_internal.internal_key_v1(
            'window', t.tenant || ' key ' || pgsched_internal.concurrency_key_v1(t.concurrency_key, run_params)));
    END IF;
    RETURN true;
END $$;

--
-- Name: worker_prune_v1(); Type: FUNCTION; Schema: pgsched_internal; Owner: -
--

CREATE FUNCTION pgsched_internal.worker_prune_v1() RETURNS bigint
    LANGUAGE sql
    AS $$
    WITH gone AS (
        DELETE FROM pgsched.worker w
         WHERE w.state <> 'running'
           AND w.stopped_at < now() - (pgsched_internal.setting_v1('worker_retention_days'))::float8 * interval '1 day'
           AND NOT EXISTS (SELECT 1 FROM pgsched.execution x WHERE x.worker_id = w.id AND x.state = 'running')
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;

--
-- Name: stats_sum_v1(bigint[]); Type: AGGREGATE; Schema: pgsched_internal; Owner: -
--

CREATE AGGREGATE pgsched_internal.stats_sum_v1(bigint[]) (
    SFUNC = pgsched_internal.stats_add_v1,
    STYPE = bigint[]
);

--
-- Name: alert; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.alert (
    id bigint NOT NULL,
    tenant text NOT NULL,
    task_id bigint,
    kind text NOT NULL,
    opened_at timestamp with time zone DEFAULT now() NOT NULL,
    resolved_at timestamp with time zone,
    details jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT alert_kind_check CHECK ((kind = ANY (ARRAY['missed_schedule'::text, 'failure_rate'::text, 'quota'::text]))),
    CONSTRAINT alert_quota_has_no_task CHECK (((kind = 'quota'::text) = (task_id IS NULL))),
    CONSTRAINT alert_quota_named CHECK (((kind <> 'quota'::text) OR (details ? 'quota'::text)))
);

--
-- Name: alert_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.alert_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: alert_id_seq; Type: SEQUENCE OWNED BY; Schema: pgsched; Owner: -
--

ALTER SEQUENCE pgsched.alert_id_seq OWNED BY pgsched.alert.id;

--
-- Name: alert_state; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.alert_state (
    singleton boolean DEFAULT true NOT NULL,
    checked_at timestamp with time zone NOT NULL,
    CONSTRAINT alert_state_singleton_check CHECK (singleton)
);

--
-- Name: api_token; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.api_token (
    id bigint NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    role text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    token_sha256 bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone,
    expires_at timestamp with time zone,
    instance boolean DEFAULT false NOT NULL,
    may_reveal boolean DEFAULT false NOT NULL,
    CONSTRAINT api_token_role_check CHECK ((role = ANY (ARRAY['viewer'::text, 'operator'::text, 'admin'::text]))),
    CONSTRAINT api_token_token_sha256_check CHECK ((length(token_sha256) = 32))
);

--
-- Name: COLUMN api_token.may_reveal; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.api_token.may_reveal IS 'the web reads env values and sensitive params for this token (pgsched.reveal, 0031, 0036)';

--
-- Name: api_token_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.api_token ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME pgsched.api_token_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: audit_event; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.audit_event (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    tenant text,
    actor_kind text NOT NULL,
    actor text DEFAULT ''::text NOT NULL,
    action text NOT NULL,
    target text DEFAULT ''::text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    ip text,
    tenant_key text GENERATED ALWAYS AS (COALESCE(tenant, ''::text)) STORED,
    CONSTRAINT audit_event_action_check CHECK ((action ~ '^[a-z_]{1,40}$'::text)),
    CONSTRAINT audit_event_actor_check CHECK ((length(actor) <= 200)),
    CONSTRAINT audit_event_actor_kind_check CHECK ((actor_kind = ANY (ARRAY['token'::text, 'user'::text, 'cli'::text, 'anonymous'::text]))),
    CONSTRAINT audit_event_target_check CHECK ((length(target) <= 500))
);

--
-- Name: audit_event_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.audit_event ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME pgsched.audit_event_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: dag; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.dag (
    id bigint NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    description text,
    failure_policy text DEFAULT 'skip_downstream'::text NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    task_id bigint NOT NULL,
    definition jsonb NOT NULL,
    source text,
    version integer DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT dag_failure_policy_check CHECK ((failure_policy = ANY (ARRAY['skip_downstream'::text, 'fail_all'::text, 'continue'::text])))
);

--
-- Name: dag_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.dag_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: dag_id_seq; Type: SEQUENCE OWNED BY; Schema: pgsched; Owner: -
--

ALTER SEQUENCE pgsched.dag_id_seq OWNED BY pgsched.dag.id;

--
-- Name: dag_node; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.dag_node (
    dag_id bigint NOT NULL,
    node_id text NOT NULL,
    "position" integer NOT NULL,
    task_id bigint NOT NULL,
    trigger_rule text DEFAULT 'all_success'::text NOT NULL,
    condition jsonb,
    upstream text[] DEFAULT '{}'::text[] NOT NULL,
    downstream text[] DEFAULT '{}'::text[] NOT NULL,
    definition jsonb NOT NULL,
    CONSTRAINT dag_node_trigger_rule_check CHECK ((trigger_rule = ANY (ARRAY['all_success'::text, 'all_done'::text, 'all_failed'::text, 'one_success'::text, 'one_failed'::text, 'none_failed'::text, 'none_failed_min_one_success'::text])))
);

--
-- Name: dag_node_run; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.dag_node_run (
    run_id bigint NOT NULL,
    node_id text NOT NULL,
    "position" integer NOT NULL,
    task_id bigint NOT NULL,
    state text DEFAULT 'waiting'::text NOT NULL,
    trigger_rule text NOT NULL,
    condition jsonb,
    upstream text[] NOT NULL,
    downstream text[] NOT NULL,
    n_succeeded integer DEFAULT 0 NOT NULL,
    n_failed integer DEFAULT 0 NOT NULL,
    n_skipped integer DEFAULT 0 NOT NULL,
    n_upstream_failed integer DEFAULT 0 NOT NULL,
    execution_id bigint,
    result jsonb,
    error text,
    queued_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    kept boolean DEFAULT false NOT NULL,
    CONSTRAINT dag_node_run_state_check CHECK ((state = ANY (ARRAY['waiting'::text, 'queued'::text, 'succeeded'::text, 'failed'::text, 'skipped'::text, 'upstream_failed'::text, 'cancelled'::text])))
)
WITH (fillfactor='80');

--
-- Name: dag_run_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.dag_run_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: dag_run_id_seq; Type: SEQUENCE OWNED BY; Schema: pgsched; Owner: -
--

ALTER SEQUENCE pgsched.dag_run_id_seq OWNED BY pgsched.dag_run.id;

--
-- Name: execution_history; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.execution_history (
    id bigint NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    task_id bigint NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    run_at timestamp with time zone NOT NULL,
    state text NOT NULL,
    trigger text NOT NULL,
    priority smallint NOT NULL,
    queue text NOT NULL,
    params jsonb NOT NULL,
    idempotency_key text,
    attempt integer NOT NULL,
    max_attempts integer NOT NULL,
    worker_id bigint,
    leader_epoch bigint,
    created_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone NOT NULL,
    exit_code integer,
    error text,
    result jsonb,
    lost_attempts integer DEFAULT 0 NOT NULL,
    dag_run_id bigint,
    progress double precision,
    progress_message text,
    progress_at timestamp with time zone,
    CONSTRAINT execution_history_state_check CHECK ((state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'skipped'::text, 'dead'::text])))
)
PARTITION BY RANGE (finished_at);

--
-- Name: execution_all; Type: VIEW; Schema: pgsched; Owner: -
--

CREATE VIEW pgsched.execution_all WITH (security_invoker='true') AS
 SELECT execution.id,
    execution.tenant,
    execution.task_id,
    execution.scheduled_at,
    execution.run_at,
    execution.state,
    execution.trigger,
    execution.priority,
    execution.queue,
    execution.params,
    execution.idempotency_key,
    execution.attempt,
    execution.max_attempts,
    execution.worker_id,
    execution.leader_epoch,
    execution.created_at,
    execution.started_at,
    NULL::timestamp with time zone AS finished_at,
    NULL::integer AS exit_code,
    NULL::text AS error,
    NULL::jsonb AS result,
    execution.lost_attempts,
    execution.cancel_requested_at,
    execution.budget_delay_seconds,
    execution.dag_run_id,
    execution.progress,
    execution.progress_message,
    execution.progress_at
   FROM pgsched.execution
UNION ALL
 SELECT h.id,
    h.tenant,
    h.task_id,
    h.scheduled_at,
    h.run_at,
    h.state,
    h.trigger,
    h.priority,
    h.queue,
    h.params,
    h.idempotency_key,
    h.attempt,
    h.max_attempts,
    h.worker_id,
    h.leader_epoch,
    h.created_at,
    h.started_at,
    h.finished_at,
    h.exit_code,
    h.error,
    h.result,
    h.lost_attempts,
    NULL::timestamp with time zone AS cancel_requested_at,
    NULL::double precision AS budget_delay_seconds,
    h.dag_run_id,
    h.progress,
    h.progress_message,
    h.progress_at
   FROM pgsched.execution_history h;

--
-- Name: execution_attempt; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.execution_attempt (
    execution_id bigint NOT NULL,
    attempt integer NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    worker_id bigint,
    state text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    exit_code integer,
    error text,
    lease_id bigint,
    error_type text,
    next_run_at timestamp with time zone,
    budget_delay_seconds double precision,
    CONSTRAINT execution_attempt_state_check CHECK ((state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'lost'::text])))
)
PARTITION BY RANGE (started_at);

--
-- Name: execution_attempt_default; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.execution_attempt_default (
    execution_id bigint CONSTRAINT execution_attempt_execution_id_not_null NOT NULL,
    attempt integer CONSTRAINT execution_attempt_attempt_not_null NOT NULL,
    tenant text DEFAULT 'default'::text CONSTRAINT execution_attempt_tenant_not_null NOT NULL,
    worker_id bigint,
    state text CONSTRAINT execution_attempt_state_not_null NOT NULL,
    started_at timestamp with time zone CONSTRAINT execution_attempt_started_at_not_null NOT NULL,
    finished_at timestamp with time zone CONSTRAINT execution_attempt_finished_at_not_null NOT NULL,
    exit_code integer,
    error text,
    lease_id bigint,
    error_type text,
    next_run_at timestamp with time zone,
    budget_delay_seconds double precision,
    CONSTRAINT execution_attempt_state_check CHECK ((state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'lost'::text])))
);

--
-- Name: execution_history_default; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.execution_history_default (
    id bigint CONSTRAINT execution_history_id_not_null NOT NULL,
    tenant text DEFAULT 'default'::text CONSTRAINT execution_history_tenant_not_null NOT NULL,
    task_id bigint CONSTRAINT execution_history_task_id_not_null NOT NULL,
    scheduled_at timestamp with time zone CONSTRAINT execution_history_scheduled_at_not_null NOT NULL,
    run_at timestamp with time zone CONSTRAINT execution_history_run_at_not_null NOT NULL,
    state text CONSTRAINT execution_history_state_not_null NOT NULL,
    trigger text CONSTRAINT execution_history_trigger_not_null NOT NULL,
    priority smallint CONSTRAINT execution_history_priority_not_null NOT NULL,
    queue text CONSTRAINT execution_history_queue_not_null NOT NULL,
    params jsonb CONSTRAINT execution_history_params_not_null NOT NULL,
    idempotency_key text,
    attempt integer CONSTRAINT execution_history_attempt_not_null NOT NULL,
    max_attempts integer CONSTRAINT execution_history_max_attempts_not_null NOT NULL,
    worker_id bigint,
    leader_epoch bigint,
    created_at timestamp with time zone CONSTRAINT execution_history_created_at_not_null NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone CONSTRAINT execution_history_finished_at_not_null NOT NULL,
    exit_code integer,
    error text,
    result jsonb,
    lost_attempts integer DEFAULT 0 CONSTRAINT execution_history_lost_attempts_not_null NOT NULL,
    dag_run_id bigint,
    progress double precision,
    progress_message text,
    progress_at timestamp with time zone,
    CONSTRAINT execution_history_state_check CHECK ((state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'skipped'::text, 'dead'::text])))
);

--
-- Name: execution_log; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.execution_log (
    execution_id bigint NOT NULL,
    attempt integer NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    seq integer NOT NULL,
    stream text NOT NULL,
    logged_at timestamp with time zone NOT NULL,
    line text NOT NULL,
    CONSTRAINT execution_log_stream_check CHECK ((stream = ANY (ARRAY['stdout'::text, 'stderr'::text, 'system'::text])))
)
PARTITION BY RANGE (logged_at);

--
-- Name: execution_log_default; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.execution_log_default (
    execution_id bigint CONSTRAINT execution_log_execution_id_not_null NOT NULL,
    attempt integer CONSTRAINT execution_log_attempt_not_null NOT NULL,
    tenant text DEFAULT 'default'::text CONSTRAINT execution_log_tenant_not_null NOT NULL,
    seq integer CONSTRAINT execution_log_seq_not_null NOT NULL,
    stream text CONSTRAINT execution_log_stream_not_null NOT NULL,
    logged_at timestamp with time zone CONSTRAINT execution_log_logged_at_not_null NOT NULL,
    line text CONSTRAINT execution_log_line_not_null NOT NULL,
    CONSTRAINT execution_log_stream_check CHECK ((stream = ANY (ARRAY['stdout'::text, 'stderr'::text, 'system'::text])))
);

--
-- Name: leader; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.leader (
    singleton boolean DEFAULT true NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    epoch bigint NOT NULL,
    holder text NOT NULL,
    elected_at timestamp with time zone NOT NULL,
    last_tick_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    CONSTRAINT leader_singleton_check CHECK (singleton)
);

--
-- Name: lease_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.lease_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: limit_wait; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.limit_wait (
    tenant text NOT NULL,
    since timestamp with time zone NOT NULL,
    free_at timestamp with time zone
);

--
-- Name: rate_start; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.rate_start (
    tenant text NOT NULL,
    scope text NOT NULL,
    name text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    CONSTRAINT rate_start_scope_check CHECK ((scope = ANY (ARRAY['queue'::text, 'task'::text, 'key'::text])))
);

--
-- Name: run_request; Type: VIEW; Schema: pgsched; Owner: -
--

CREATE VIEW pgsched.run_request AS
 SELECT NULL::text AS task,
    NULL::jsonb AS params,
    NULL::timestamp with time zone AS run_at,
    NULL::integer AS priority,
    NULL::text AS idempotency_key,
    'default'::text AS tenant,
    NULL::bigint AS execution_id,
    NULL::boolean AS deduplicated,
    NULL::text AS dedup_reason,
    NULL::bigint AS succeeded_execution_id
  WHERE false;

--
-- Name: scheduler_node; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.scheduler_node (
    id bigint NOT NULL,
    name text NOT NULL,
    hostname text NOT NULL,
    pid integer NOT NULL,
    role text DEFAULT 'standby'::text NOT NULL,
    epoch bigint,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    stopped_at timestamp with time zone,
    clock_offset_seconds double precision,
    clock_round_trip_seconds double precision,
    CONSTRAINT scheduler_node_role_check CHECK ((role = ANY (ARRAY['leader'::text, 'standby'::text, 'stopped'::text])))
);

--
-- Name: scheduler_node_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.scheduler_node_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: scheduler_node_id_seq; Type: SEQUENCE OWNED BY; Schema: pgsched; Owner: -
--

ALTER SEQUENCE pgsched.scheduler_node_id_seq OWNED BY pgsched.scheduler_node.id;

--
-- Name: schema_migration; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.schema_migration (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: setting; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.setting (
    name text NOT NULL,
    value jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: stats_bucket; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.stats_bucket (
    kind text NOT NULL,
    bounds double precision[] NOT NULL,
    CONSTRAINT stats_bucket_kind_check CHECK ((kind = ANY (ARRAY['latency'::text, 'duration'::text])))
);

--
-- Name: stats_hourly; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.stats_hourly (
    hour timestamp with time zone NOT NULL,
    tenant text NOT NULL,
    task_id bigint NOT NULL,
    state text NOT NULL,
    executions bigint NOT NULL,
    started bigint NOT NULL,
    retries bigint NOT NULL,
    latency_sum double precision NOT NULL,
    duration_sum double precision NOT NULL,
    latency_le bigint[] NOT NULL,
    duration_le bigint[] NOT NULL
);

--
-- Name: stats_rollup_state; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.stats_rollup_state (
    singleton boolean DEFAULT true NOT NULL,
    dirty_from timestamp with time zone NOT NULL,
    rolled_at timestamp with time zone NOT NULL,
    CONSTRAINT stats_rollup_state_singleton_check CHECK (singleton)
);

--
-- Name: stats_total; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.stats_total (
    tenant text NOT NULL,
    task_id bigint NOT NULL,
    state text NOT NULL,
    executions bigint NOT NULL,
    started bigint NOT NULL,
    retries bigint NOT NULL,
    latency_sum double precision NOT NULL,
    duration_sum double precision NOT NULL,
    latency_le bigint[] NOT NULL,
    duration_le bigint[] NOT NULL
);

--
-- Name: task_alerting; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.task_alerting (
    task_id bigint NOT NULL,
    on_failure text,
    on_dlq text,
    on_missed text,
    missed_after_seconds double precision,
    failure_rate double precision,
    failure_window_seconds double precision,
    failure_min_executions integer,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT task_alerting_failure_min_executions_check CHECK ((failure_min_executions >= 1)),
    CONSTRAINT task_alerting_failure_rate_check CHECK (((failure_rate >= (0)::double precision) AND (failure_rate <= (1)::double precision))),
    CONSTRAINT task_alerting_failure_window_seconds_check CHECK ((failure_window_seconds > (0)::double precision)),
    CONSTRAINT task_alerting_missed_after_seconds_check CHECK ((missed_after_seconds > (0)::double precision)),
    CONSTRAINT task_alerting_on_dlq_check CHECK ((on_dlq ~ '^https?://'::text)),
    CONSTRAINT task_alerting_on_failure_check CHECK ((on_failure ~ '^https?://'::text)),
    CONSTRAINT task_alerting_on_missed_check CHECK ((on_missed ~ '^https?://'::text))
);

--
-- Name: task_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.task_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: task_id_seq; Type: SEQUENCE OWNED BY; Schema: pgsched; Owner: -
--

ALTER SEQUENCE pgsched.task_id_seq OWNED BY pgsched.task.id;

--
-- Name: tenant_role; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.tenant_role (
    role_name name NOT NULL,
    tenant text NOT NULL,
    purpose text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_role_purpose_check CHECK ((purpose = ANY (ARRAY['app'::text, 'engine'::text, 'web'::text])))
);

--
-- Name: TABLE tenant_role; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON TABLE pgsched.tenant_role IS 'a login role -> the one tenant its sessions act for (its group role is the purpose)';

--
-- Name: tenant_usage; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.tenant_usage (
    tenant text NOT NULL,
    hour_start timestamp with time zone,
    hour_starts bigint DEFAULT 0 NOT NULL,
    last_claim_at timestamp with time zone,
    month_start timestamp with time zone,
    compute_seconds double precision DEFAULT 0 NOT NULL,
    log_bytes bigint DEFAULT 0 NOT NULL,
    over text[] DEFAULT '{}'::text[] NOT NULL,
    measured_at timestamp with time zone,
    alerted text[] DEFAULT '{}'::text[] NOT NULL,
    vtime double precision DEFAULT 0 NOT NULL,
    start_tag double precision DEFAULT 0 NOT NULL
);

--
-- Name: TABLE tenant_usage; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON TABLE pgsched.tenant_usage IS 'a tenant''s use against its quotas: starts this hour (claims), compute this month and log bytes (the leader''s usage job), the slow quotas exceeded (over)';

--
-- Name: COLUMN tenant_usage.alerted; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant_usage.alerted IS 'the quotas the tenant has an open quota alert for (reached; resolved below 80 % of the quota)';

--
-- Name: COLUMN tenant_usage.vtime; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant_usage.vtime IS 'the tenant''s virtual time in the fair share: the finish tag of its latest start (each start 1/weight after the one before, from at least the system''s virtual time; migration 0026)';

--
-- Name: COLUMN tenant_usage.start_tag; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.tenant_usage.start_tag IS 'the start tag of the tenant''s latest start; the greatest of all is the system''s virtual time';

--
-- Name: unique_period; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.unique_period (
    tenant text NOT NULL,
    scope text NOT NULL,
    name text NOT NULL,
    execution_id bigint NOT NULL,
    enqueued_at timestamp with time zone NOT NULL,
    CONSTRAINT unique_period_scope_check CHECK ((scope = ANY (ARRAY['task'::text, 'key'::text])))
);

--
-- Name: TABLE unique_period; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON TABLE pgsched.unique_period IS 'the last execution enqueued per task (name: its id) or key of tasks with a unique period (0022)';

--
-- Name: usage_delta; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.usage_delta (
    tenant text NOT NULL,
    month_start timestamp with time zone,
    compute_seconds double precision DEFAULT 0 NOT NULL,
    log_bytes bigint DEFAULT 0 NOT NULL
);

--
-- Name: TABLE usage_delta; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON TABLE pgsched.usage_delta IS 'compute seconds and log bytes written since the usage job last counted them (it deletes what it adds to tenant_usage)';

--
-- Name: web_key; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.web_key (
    name text NOT NULL,
    value text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT web_key_value_check CHECK ((length(value) >= 32))
);

--
-- Name: web_session; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.web_session (
    id_sha256 bytea NOT NULL,
    tenant text NOT NULL,
    token_id bigint,
    username text,
    csrf text NOT NULL,
    ip text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT web_session_check CHECK ((num_nonnulls(token_id, username) = 1)),
    CONSTRAINT web_session_csrf_check CHECK ((length(csrf) >= 32)),
    CONSTRAINT web_session_id_sha256_check CHECK ((length(id_sha256) = 32))
);

--
-- Name: web_user; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.web_user (
    username text NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    role text NOT NULL,
    password_hash text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    instance boolean DEFAULT false NOT NULL,
    may_reveal boolean DEFAULT false NOT NULL,
    CONSTRAINT web_user_role_check CHECK ((role = ANY (ARRAY['viewer'::text, 'operator'::text, 'admin'::text]))),
    CONSTRAINT web_user_username_check CHECK (((length(username) >= 1) AND (length(username) <= 200)))
);

--
-- Name: COLUMN web_user.may_reveal; Type: COMMENT; Schema: pgsched; Owner: -
--

COMMENT ON COLUMN pgsched.web_user.may_reveal IS 'the web reads env values and sensitive params for this user (pgsched.reveal, 0031, 0036)';

--
-- Name: webhook_delivery; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.webhook_delivery (
    id bigint NOT NULL,
    tenant text NOT NULL,
    task_id bigint,
    event text NOT NULL,
    url text NOT NULL,
    payload jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    gave_up_at timestamp with time zone,
    last_error text,
    CONSTRAINT webhook_delivery_event_check CHECK ((event = ANY (ARRAY['failure'::text, 'dlq'::text, 'missed_schedule'::text, 'failure_rate'::text, 'quota'::text])))
);

--
-- Name: webhook_delivery_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.webhook_delivery_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: webhook_delivery_id_seq; Type: SEQUENCE OWNED BY; Schema: pgsched; Owner: -
--

ALTER SEQUENCE pgsched.webhook_delivery_id_seq OWNED BY pgsched.webhook_delivery.id;

--
-- Name: worker; Type: TABLE; Schema: pgsched; Owner: -
--

CREATE TABLE pgsched.worker (
    id bigint NOT NULL,
    tenant text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    hostname text NOT NULL,
    pid integer NOT NULL,
    queues text[] NOT NULL,
    concurrency integer NOT NULL,
    heartbeat_interval double precision DEFAULT 5 NOT NULL,
    state text DEFAULT 'running'::text NOT NULL,
    running integer DEFAULT 0 NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    last_heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    stopped_at timestamp with time zone,
    clock_offset_seconds double precision,
    clock_round_trip_seconds double precision,
    held bigint[],
    held_at timestamp with time zone,
    held_prev_at timestamp with time zone,
    claimer_stalled_since timestamp with time zone,
    tenants text[],
    CONSTRAINT worker_state_check CHECK ((state = ANY (ARRAY['running'::text, 'stopped'::text, 'dead'::text])))
);

--
-- Name: worker_id_seq; Type: SEQUENCE; Schema: pgsched; Owner: -
--

CREATE SEQUENCE pgsched.worker_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: worker_id_seq; Type: SEQUENCE OWNED BY; Schema: pgsched; Owner: -
--

ALTER SEQUENCE pgsched.worker_id_seq OWNED BY pgsched.worker.id;

--
-- Name: lock_name; Type: TABLE; Schema: pgsched_internal; Owner: -
--

CREATE TABLE pgsched_internal.lock_name (
    key bigint NOT NULL,
    tenant text NOT NULL,
    name text NOT NULL,
    taken_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: TABLE lock_name; Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON TABLE pgsched_internal.lock_name IS 'the name and tenant of a lock key (lock_list_v1); taken_at: when last recorded (within an hour)';

--
-- Name: lock_seed; Type: TABLE; Schema: pgsched_internal; Owner: -
--

CREATE TABLE pgsched_internal.lock_seed (
    one boolean DEFAULT true NOT NULL,
    seed bigint NOT NULL,
    CONSTRAINT lock_seed_one_check CHECK (one)
);

--
-- Name: TABLE lock_seed; Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON TABLE pgsched_internal.lock_seed IS 'the hash seed of lock keys (lock_key_v1): secret, so another tenant cannot compute a key';

--
-- Name: secret; Type: TABLE; Schema: pgsched_internal; Owner: -
--

CREATE TABLE pgsched_internal.secret (
    tenant text NOT NULL,
    name text NOT NULL,
    ciphertext bytea NOT NULL,
    nonce bytea NOT NULL,
    key_id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by text NOT NULL,
    CONSTRAINT secret_ciphertext_check CHECK (((octet_length(ciphertext) >= 16) AND (octet_length(ciphertext) <= 65552))),
    CONSTRAINT secret_key_id_check CHECK ((key_id ~ '^[0-9a-f]{16}$'::text)),
    CONSTRAINT secret_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'::text)),
    CONSTRAINT secret_nonce_check CHECK ((octet_length(nonce) = 12))
);

--
-- Name: TABLE secret; Type: COMMENT; Schema: pgsched_internal; Owner: -
--

COMMENT ON TABLE pgsched_internal.secret IS 'secrets sealed with a key the database never holds (AES-256-GCM, tenant and name as associated data); reached through secret_set_v1, secret_list_v1, secret_delete_v1, secret_fetch_v1';

--
-- Name: execution_attempt_default; Type: TABLE ATTACH; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.execution_attempt ATTACH PARTITION pgsched.execution_attempt_default DEFAULT;

--
-- Name: execution_history_default; Type: TABLE ATTACH; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.execution_history ATTACH PARTITION pgsched.execution_history_default DEFAULT;

--
-- Name: execution_log_default; Type: TABLE ATTACH; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.execution_log ATTACH PARTITION pgsched.execution_log_default DEFAULT;

--
-- Name: alert id; Type: DEFAULT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.alert ALTER COLUMN id SET DEFAULT nextval('pgsched.alert_id_seq'::regclass);

--
-- Name: dag id; Type: DEFAULT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag ALTER COLUMN id SET DEFAULT nextval('pgsched.dag_id_seq'::regclass);

--
-- Name: dag_run id; Type: DEFAULT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_run ALTER COLUMN id SET DEFAULT nextval('pgsched.dag_run_id_seq'::regclass);

--
-- Name: scheduler_node id; Type: DEFAULT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.scheduler_node ALTER COLUMN id SET DEFAULT nextval('pgsched.scheduler_node_id_seq'::regclass);

--
-- Name: task id; Type: DEFAULT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.task ALTER COLUMN id SET DEFAULT nextval('pgsched.task_id_seq'::regclass);

--
-- Name: webhook_delivery id; Type: DEFAULT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.webhook_delivery ALTER COLUMN id SET DEFAULT nextval('pgsched.webhook_delivery_id_seq'::regclass);

--
-- Name: worker id; Type: DEFAULT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.worker ALTER COLUMN id SET DEFAULT nextval('pgsched.worker_id_seq'::regclass);

--
-- Name: alert alert_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.alert
    ADD CONSTRAINT alert_pkey PRIMARY KEY (id);

--
-- Name: alert_state alert_state_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.alert_state
    ADD CONSTRAINT alert_state_pkey PRIMARY KEY (singleton);

--
-- Name: api_token api_token_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.api_token
    ADD CONSTRAINT api_token_pkey PRIMARY KEY (id);

--
-- Name: api_token api_token_token_sha256_key; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.api_token
    ADD CONSTRAINT api_token_token_sha256_key UNIQUE (token_sha256);

--
-- Name: audit_event audit_event_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.audit_event
    ADD CONSTRAINT audit_event_pkey PRIMARY KEY (id);

--
-- Name: dag_node dag_node_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_node
    ADD CONSTRAINT dag_node_pkey PRIMARY KEY (dag_id, node_id);

--
-- Name: dag_node_run dag_node_run_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_node_run
    ADD CONSTRAINT dag_node_run_pkey PRIMARY KEY (run_id, node_id);

--
-- Name: dag dag_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag
    ADD CONSTRAINT dag_pkey PRIMARY KEY (id);

--
-- Name: dag_run dag_run_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_run
    ADD CONSTRAINT dag_run_pkey PRIMARY KEY (id);

--
-- Name: execution_attempt execution_attempt_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.execution_attempt
    ADD CONSTRAINT execution_attempt_pkey PRIMARY KEY (execution_id, attempt, started_at);

--
-- Name: execution_attempt_default execution_attempt_default_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.execution_attempt_default
    ADD CONSTRAINT execution_attempt_default_pkey PRIMARY KEY (execution_id, attempt, started_at);

--
-- Name: execution_history execution_history_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.execution_history
    ADD CONSTRAINT execution_history_pkey PRIMARY KEY (id, finished_at);

--
-- Name: execution_history_default execution_history_default_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.execution_history_default
    ADD CONSTRAINT execution_history_default_pkey PRIMARY KEY (id, finished_at);

--
-- Name: execution execution_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.execution
    ADD CONSTRAINT execution_pkey PRIMARY KEY (id);

--
-- Name: leader leader_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.leader
    ADD CONSTRAINT leader_pkey PRIMARY KEY (singleton);

--
-- Name: limit_wait limit_wait_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.limit_wait
    ADD CONSTRAINT limit_wait_pkey PRIMARY KEY (tenant);

--
-- Name: queue queue_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.queue
    ADD CONSTRAINT queue_pkey PRIMARY KEY (tenant, name);

--
-- Name: scheduler_node scheduler_node_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.scheduler_node
    ADD CONSTRAINT scheduler_node_pkey PRIMARY KEY (id);

--
-- Name: schema_migration schema_migration_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.schema_migration
    ADD CONSTRAINT schema_migration_pkey PRIMARY KEY (version);

--
-- Name: setting setting_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.setting
    ADD CONSTRAINT setting_pkey PRIMARY KEY (name);

--
-- Name: stats_bucket stats_bucket_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.stats_bucket
    ADD CONSTRAINT stats_bucket_pkey PRIMARY KEY (kind);

--
-- Name: stats_hourly stats_hourly_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.stats_hourly
    ADD CONSTRAINT stats_hourly_pkey PRIMARY KEY (hour, tenant, task_id, state);

--
-- Name: stats_rollup_state stats_rollup_state_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.stats_rollup_state
    ADD CONSTRAINT stats_rollup_state_pkey PRIMARY KEY (singleton);

--
-- Name: stats_total stats_total_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.stats_total
    ADD CONSTRAINT stats_total_pkey PRIMARY KEY (tenant, task_id, state);

--
-- Name: task_alerting task_alerting_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.task_alerting
    ADD CONSTRAINT task_alerting_pkey PRIMARY KEY (task_id);

--
-- Name: task task_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.task
    ADD CONSTRAINT task_pkey PRIMARY KEY (id);

--
-- Name: tenant tenant_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.tenant
    ADD CONSTRAINT tenant_pkey PRIMARY KEY (name);

--
-- Name: tenant_role tenant_role_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.tenant_role
    ADD CONSTRAINT tenant_role_pkey PRIMARY KEY (role_name);

--
-- Name: tenant_usage tenant_usage_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.tenant_usage
    ADD CONSTRAINT tenant_usage_pkey PRIMARY KEY (tenant);

--
-- Name: unique_period unique_period_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.unique_period
    ADD CONSTRAINT unique_period_pkey PRIMARY KEY (tenant, scope, name);

--
-- Name: web_key web_key_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.web_key
    ADD CONSTRAINT web_key_pkey PRIMARY KEY (name);

--
-- Name: web_session web_session_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.web_session
    ADD CONSTRAINT web_session_pkey PRIMARY KEY (id_sha256);

--
-- Name: web_user web_user_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.web_user
    ADD CONSTRAINT web_user_pkey PRIMARY KEY (username);

--
-- Name: webhook_delivery webhook_delivery_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.webhook_delivery
    ADD CONSTRAINT webhook_delivery_pkey PRIMARY KEY (id);

--
-- Name: worker worker_pkey; Type: CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.worker
    ADD CONSTRAINT worker_pkey PRIMARY KEY (id);

--
-- Name: lock_name lock_name_pkey; Type: CONSTRAINT; Schema: pgsched_internal; Owner: -
--

ALTER TABLE ONLY pgsched_internal.lock_name
    ADD CONSTRAINT lock_name_pkey PRIMARY KEY (key);

--
-- Name: lock_seed lock_seed_pkey; Type: CONSTRAINT; Schema: pgsched_internal; Owner: -
--

ALTER TABLE ONLY pgsched_internal.lock_seed
    ADD CONSTRAINT lock_seed_pkey PRIMARY KEY (one);

--
-- Name: secret secret_pkey; Type: CONSTRAINT; Schema: pgsched_internal; Owner: -
--

ALTER TABLE ONLY pgsched_internal.secret
    ADD CONSTRAINT secret_pkey PRIMARY KEY (tenant, name);

--
-- Name: alert_open_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX alert_open_key ON pgsched.alert USING btree (task_id, kind) WHERE (resolved_at IS NULL);

--
-- Name: alert_open_quota_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX alert_open_quota_key ON pgsched.alert USING btree (tenant, ((details ->> 'quota'::text))) WHERE ((kind = 'quota'::text) AND (resolved_at IS NULL));

--
-- Name: alert_tenant_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX alert_tenant_idx ON pgsched.alert USING btree (tenant, opened_at DESC);

--
-- Name: api_token_tenant_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX api_token_tenant_idx ON pgsched.api_token USING btree (tenant, id);

--
-- Name: audit_event_at_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX audit_event_at_idx ON pgsched.audit_event USING btree (at);

--
-- Name: audit_event_noisy_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX audit_event_noisy_idx ON pgsched.audit_event USING btree (action, tenant_key, at) WHERE (action = ANY (ARRAY['sign_in_failed'::text, 'forbidden'::text]));

--
-- Name: audit_event_tenant_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX audit_event_tenant_idx ON pgsched.audit_event USING btree (tenant, id);

--
-- Name: dag_node_run_task_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX dag_node_run_task_key ON pgsched.dag_node_run USING btree (run_id, task_id);

--
-- Name: dag_run_dag_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX dag_run_dag_idx ON pgsched.dag_run USING btree (dag_id, id DESC);

--
-- Name: dag_run_fire_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX dag_run_fire_key ON pgsched.dag_run USING btree (dag_id, scheduled_at) WHERE (trigger = 'schedule'::text);

--
-- Name: dag_run_open_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX dag_run_open_idx ON pgsched.dag_run USING btree (id) WHERE (state = ANY (ARRAY['running'::text, 'failing'::text, 'cancelling'::text]));

--
-- Name: dag_task_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX dag_task_key ON pgsched.dag USING btree (task_id);

--
-- Name: dag_tenant_name_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX dag_tenant_name_key ON pgsched.dag USING btree (tenant, name) WHERE (deleted_at IS NULL);

--
-- Name: execution_attempt_started_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_attempt_started_idx ON ONLY pgsched.execution_attempt USING btree (started_at);

--
-- Name: execution_attempt_default_started_at_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_attempt_default_started_at_idx ON pgsched.execution_attempt_default USING btree (started_at);

--
-- Name: execution_cancel_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_cancel_idx ON pgsched.execution USING btree (worker_id) WHERE ((state = 'running'::text) AND (cancel_requested_at IS NOT NULL));

--
-- Name: execution_dag_run_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_dag_run_idx ON pgsched.execution USING btree (dag_run_id) WHERE (dag_run_id IS NOT NULL);

--
-- Name: execution_fire_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX execution_fire_key ON pgsched.execution USING btree (task_id, scheduled_at) WHERE (trigger = 'schedule'::text);

--
-- Name: execution_history_dead_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_dead_idx ON ONLY pgsched.execution_history USING btree (finished_at) WHERE (state = 'dead'::text);

--
-- Name: execution_history_dead_tenant_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_dead_tenant_idx ON ONLY pgsched.execution_history USING btree (tenant, finished_at) WHERE (state = 'dead'::text);

--
-- Name: execution_history_finished_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_finished_idx ON ONLY pgsched.execution_history USING btree (finished_at DESC);

--
-- Name: execution_history_default_finished_at_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_default_finished_at_idx ON pgsched.execution_history_default USING btree (finished_at DESC);

--
-- Name: execution_history_default_finished_at_idx1; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_default_finished_at_idx1 ON pgsched.execution_history_default USING btree (finished_at) WHERE (state = 'dead'::text);

--
-- Name: execution_history_state_id_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_state_id_idx ON ONLY pgsched.execution_history USING btree (state, id) WHERE (state <> 'succeeded'::text);

--
-- Name: execution_history_default_state_id_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_default_state_id_idx ON pgsched.execution_history_default USING btree (state, id) WHERE (state <> 'succeeded'::text);

--
-- Name: execution_history_task_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_task_idx ON ONLY pgsched.execution_history USING btree (task_id, scheduled_at DESC);

--
-- Name: execution_history_default_task_id_scheduled_at_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_default_task_id_scheduled_at_idx ON pgsched.execution_history_default USING btree (task_id, scheduled_at DESC);

--
-- Name: execution_history_default_tenant_finished_at_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_default_tenant_finished_at_idx ON pgsched.execution_history_default USING btree (tenant, finished_at) WHERE (state = 'dead'::text);

--
-- Name: execution_history_succeeded_key_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_succeeded_key_idx ON ONLY pgsched.execution_history USING btree (tenant, task_id, idempotency_key) WHERE ((idempotency_key IS NOT NULL) AND (state = 'succeeded'::text));

--
-- Name: execution_history_default_tenant_task_id_idempotency_key_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_default_tenant_task_id_idempotency_key_idx ON pgsched.execution_history_default USING btree (tenant, task_id, idempotency_key) WHERE ((idempotency_key IS NOT NULL) AND (state = 'succeeded'::text));

--
-- Name: execution_history_worker_id_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_worker_id_idx ON ONLY pgsched.execution_history USING btree (worker_id, id);

--
-- Name: execution_history_default_worker_id_id_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_history_default_worker_id_id_idx ON pgsched.execution_history_default USING btree (worker_id, id);

--
-- Name: execution_log_execution_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_log_execution_idx ON ONLY pgsched.execution_log USING btree (execution_id, attempt, seq);

--
-- Name: execution_log_default_execution_id_attempt_seq_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_log_default_execution_id_attempt_seq_idx ON pgsched.execution_log_default USING btree (execution_id, attempt, seq);

--
-- Name: execution_ready_tenant_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_ready_tenant_idx ON pgsched.execution USING btree (tenant, queue, priority, run_at, id) WHERE (state = 'pending'::text);

--
-- Name: execution_retry_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_retry_idx ON pgsched.execution USING btree (run_at) WHERE ((state = 'pending'::text) AND (attempt > 0));

--
-- Name: execution_running_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_running_idx ON pgsched.execution USING btree (tenant, queue, task_id) WHERE (state = 'running'::text);

--
-- Name: execution_running_key_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_running_key_idx ON pgsched.execution USING btree (tenant, concurrency_key) WHERE ((state = 'running'::text) AND (concurrency_key IS NOT NULL));

--
-- Name: execution_task_idempotency_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX execution_task_idempotency_key ON pgsched.execution USING btree (tenant, task_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);

--
-- Name: execution_windowed_key_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_windowed_key_idx ON pgsched.execution USING btree (tenant, concurrency_key) WHERE (windowed AND (state = 'pending'::text) AND (concurrency_key IS NOT NULL));

--
-- Name: execution_windowed_task_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_windowed_task_idx ON pgsched.execution USING btree (task_id, state) WHERE windowed;

--
-- Name: execution_worker_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX execution_worker_idx ON pgsched.execution USING btree (worker_id) WHERE (state = 'running'::text);

--
-- Name: rate_start_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX rate_start_idx ON pgsched.rate_start USING btree (tenant, scope, name, started_at);

--
-- Name: stats_hourly_task_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX stats_hourly_task_idx ON pgsched.stats_hourly USING btree (task_id, hour);

--
-- Name: task_keyed_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX task_keyed_idx ON pgsched.task USING btree (id) WHERE (concurrency_key IS NOT NULL);

--
-- Name: task_missed_unseen_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX task_missed_unseen_idx ON pgsched.task USING btree (id) WHERE (missed_fires <> missed_fires_seen);

--
-- Name: task_next_fire_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX task_next_fire_idx ON pgsched.task USING btree (next_fire_at) WHERE (enabled AND (deleted_at IS NULL) AND (next_fire_at IS NOT NULL));

--
-- Name: task_tags_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX task_tags_idx ON pgsched.task USING gin (tags) WHERE (deleted_at IS NULL);

--
-- Name: task_tenant_name_key; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE UNIQUE INDEX task_tenant_name_key ON pgsched.task USING btree (tenant, name) WHERE (deleted_at IS NULL);

--
-- Name: task_unplanned_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX task_unplanned_idx ON pgsched.task USING btree (id) WHERE (enabled AND (deleted_at IS NULL) AND (next_fire_at IS NULL) AND (schedule_kind <> 'none'::text) AND ((schedule_kind <> 'once'::text) OR (last_fire_at IS NULL)));

--
-- Name: task_windowed_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX task_windowed_idx ON pgsched.task USING btree (id) WHERE windowed;

--
-- Name: tenant_usage_start_tag_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX tenant_usage_start_tag_idx ON pgsched.tenant_usage USING btree (start_tag);

--
-- Name: web_session_expires_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX web_session_expires_idx ON pgsched.web_session USING btree (expires_at);

--
-- Name: web_session_token_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX web_session_token_idx ON pgsched.web_session USING btree (token_id) WHERE (token_id IS NOT NULL);

--
-- Name: web_session_username_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX web_session_username_idx ON pgsched.web_session USING btree (username) WHERE (username IS NOT NULL);

--
-- Name: webhook_delivery_due_idx; Type: INDEX; Schema: pgsched; Owner: -
--

CREATE INDEX webhook_delivery_due_idx ON pgsched.webhook_delivery USING btree (next_attempt_at) WHERE ((delivered_at IS NULL) AND (gave_up_at IS NULL));

--
-- Name: execution_attempt_default_pkey; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_attempt_pkey ATTACH PARTITION pgsched.execution_attempt_default_pkey;

--
-- Name: execution_attempt_default_started_at_idx; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_attempt_started_idx ATTACH PARTITION pgsched.execution_attempt_default_started_at_idx;

--
-- Name: execution_history_default_finished_at_idx; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_history_finished_idx ATTACH PARTITION pgsched.execution_history_default_finished_at_idx;

--
-- Name: execution_history_default_finished_at_idx1; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_history_dead_idx ATTACH PARTITION pgsched.execution_history_default_finished_at_idx1;

--
-- Name: execution_history_default_pkey; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_history_pkey ATTACH PARTITION pgsched.execution_history_default_pkey;

--
-- Name: execution_history_default_state_id_idx; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_history_state_id_idx ATTACH PARTITION pgsched.execution_history_default_state_id_idx;

--
-- Name: execution_history_default_task_id_scheduled_at_idx; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_history_task_idx ATTACH PARTITION pgsched.execution_history_default_task_id_scheduled_at_idx;

--
-- Name: execution_history_default_tenant_finished_at_idx; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_history_dead_tenant_idx ATTACH PARTITION pgsched.execution_history_default_tenant_finished_at_idx;

--
-- Name: execution_history_default_tenant_task_id_idempotency_key_idx; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_history_succeeded_key_idx ATTACH PARTITION pgsched.execution_history_default_tenant_task_id_idempotency_key_idx;

--
-- Name: execution_history_default_worker_id_id_idx; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_history_worker_id_idx ATTACH PARTITION pgsched.execution_history_default_worker_id_id_idx;

--
-- Name: execution_log_default_execution_id_attempt_seq_idx; Type: INDEX ATTACH; Schema: pgsched; Owner: -
--

ALTER INDEX pgsched.execution_log_execution_idx ATTACH PARTITION pgsched.execution_log_default_execution_id_attempt_seq_idx;

--
-- Name: execution_history dag_execution_finished; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER dag_execution_finished AFTER INSERT ON pgsched.execution_history FOR EACH ROW WHEN ((new.dag_run_id IS NOT NULL)) EXECUTE FUNCTION pgsched_internal.dag_execution_finished_v1();

--
-- Name: execution_history execution_done_notify; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_done_notify AFTER INSERT ON pgsched.execution_history REFERENCING NEW TABLE AS finished FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.execution_done_notify_v1();

--
-- Name: execution execution_fire_changed; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_fire_changed BEFORE UPDATE OF trigger, scheduled_at, task_id ON pgsched.execution FOR EACH ROW WHEN (((new.trigger = 'schedule'::text) AND ((old.trigger IS DISTINCT FROM new.trigger) OR (old.scheduled_at IS DISTINCT FROM new.scheduled_at) OR (old.task_id IS DISTINCT FROM new.task_id)))) EXECUTE FUNCTION pgsched_internal.execution_fire_changed_v1();

--
-- Name: execution execution_guard_insert; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_guard_insert BEFORE INSERT ON pgsched.execution FOR EACH ROW WHEN ((CURRENT_USER <> 'pgsched_owner'::name)) EXECUTE FUNCTION pgsched_internal.execution_guard_v1();

--
-- Name: execution execution_guard_period; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_guard_period AFTER INSERT ON pgsched.execution FOR EACH ROW WHEN (((CURRENT_USER <> 'pgsched_owner'::name) AND new.windowed AND (new.state = 'pending'::text))) EXECUTE FUNCTION pgsched_internal.execution_guard_period_v1();

--
-- Name: execution execution_guard_update; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_guard_update BEFORE UPDATE ON pgsched.execution FOR EACH ROW WHEN (((CURRENT_USER <> 'pgsched_owner'::name) AND (((new.state = 'running'::text) AND ((old.state <> 'running'::text) OR (new.started_at IS DISTINCT FROM old.started_at) OR (new.attempt <> old.attempt) OR (new.lease_id IS DISTINCT FROM old.lease_id) OR (new.queue <> old.queue) OR (new.concurrency_key IS DISTINCT FROM old.concurrency_key))) OR (new.task_id <> old.task_id) OR (old.windowed AND (NOT new.windowed))))) EXECUTE FUNCTION pgsched_internal.execution_guard_v1();

--
-- Name: execution execution_inserted; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_inserted AFTER INSERT ON pgsched.execution REFERENCING NEW TABLE AS new_executions FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.execution_inserted_v1();

--
-- Name: execution execution_keyed; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_keyed AFTER INSERT ON pgsched.execution REFERENCING NEW TABLE AS new_executions FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.execution_keyed_v1();

--
-- Name: execution execution_limit_freed; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_limit_freed AFTER DELETE ON pgsched.execution FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.execution_limit_freed_v1();

--
-- Name: execution execution_requeued; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE CONSTRAINT TRIGGER execution_requeued AFTER INSERT ON pgsched.execution DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((new.trigger = 'schedule'::text) AND (new.created_at < now()))) EXECUTE FUNCTION pgsched_internal.execution_requeued_v1();

--
-- Name: execution execution_task_recheck; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_task_recheck AFTER UPDATE OF task_id ON pgsched.execution FOR EACH ROW WHEN ((old.task_id IS DISTINCT FROM new.task_id)) EXECUTE FUNCTION pgsched_internal.execution_task_recheck_v1();

--
-- Name: execution execution_windowed; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER execution_windowed AFTER INSERT ON pgsched.execution REFERENCING NEW TABLE AS new_executions FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.execution_windowed_v1();

--
-- Name: run_request run_request_insert; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER run_request_insert INSTEAD OF INSERT ON pgsched.run_request FOR EACH ROW EXECUTE FUNCTION pgsched_internal.run_request_insert_v1();

--
-- Name: task task_key_unmarked; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_key_unmarked BEFORE INSERT OR UPDATE OF concurrency_key, sensitive_params ON pgsched.task FOR EACH ROW WHEN ((new.concurrency_key IS NOT NULL)) EXECUTE FUNCTION pgsched_internal.task_key_unmarked_v1();

--
-- Name: task task_last_fire_forward; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_last_fire_forward BEFORE UPDATE OF last_fire_at ON pgsched.task FOR EACH ROW WHEN (((old.last_fire_at IS NOT NULL) AND ((new.last_fire_at IS NULL) OR (new.last_fire_at < old.last_fire_at)))) EXECUTE FUNCTION pgsched_internal.task_last_fire_forward_v1();

--
-- Name: task task_marks_kept; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_marks_kept BEFORE UPDATE OF sensitive_params ON pgsched.task FOR EACH ROW WHEN ((old.sensitive_params IS DISTINCT FROM new.sensitive_params)) EXECUTE FUNCTION pgsched_internal.task_marks_kept_v1();

--
-- Name: task task_notify_insert; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_notify_insert AFTER INSERT OR DELETE ON pgsched.task FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.task_notify_v1();

--
-- Name: task task_notify_update; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_notify_update AFTER UPDATE ON pgsched.task FOR EACH ROW WHEN (((old.enabled IS DISTINCT FROM new.enabled) OR ((new.next_fire_at IS NULL) AND new.enabled) OR (old.schedule_expr IS DISTINCT FROM new.schedule_expr) OR (old.deleted_at IS DISTINCT FROM new.deleted_at))) EXECUTE FUNCTION pgsched_internal.task_notify_v1();

--
-- Name: task task_pause_track_insert; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_pause_track_insert BEFORE INSERT ON pgsched.task FOR EACH ROW WHEN (((NOT new.enabled) OR (new.paused_at IS NOT NULL) OR (new.paused_by IS NOT NULL) OR (new.pause_reason IS NOT NULL))) EXECUTE FUNCTION pgsched_internal.task_pause_track_v1();

--
-- Name: task task_pause_track_update; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_pause_track_update BEFORE UPDATE OF enabled ON pgsched.task FOR EACH ROW WHEN ((old.enabled IS DISTINCT FROM new.enabled)) EXECUTE FUNCTION pgsched_internal.task_pause_track_v1();

--
-- Name: task task_referenced_delete; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_referenced_delete AFTER DELETE ON pgsched.task REFERENCING OLD TABLE AS old_tasks FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.task_referenced_v1();

--
-- Name: task task_referenced_truncate; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_referenced_truncate AFTER TRUNCATE ON pgsched.task FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.task_referenced_v1();

--
-- Name: task task_referenced_update; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_referenced_update AFTER UPDATE OF id ON pgsched.task FOR EACH ROW WHEN ((old.id IS DISTINCT FROM new.id)) EXECUTE FUNCTION pgsched_internal.task_referenced_v1();

--
-- Name: task task_windowed; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER task_windowed AFTER UPDATE OF overlap_policy, unique_policy, unique_period_seconds ON pgsched.task FOR EACH ROW WHEN ((new.windowed AND (NOT old.windowed))) EXECUTE FUNCTION pgsched_internal.task_windowed_v1();

--
-- Name: task tenant_register; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER tenant_register AFTER INSERT ON pgsched.task REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.tenant_register_v1();

--
-- Name: tenant tenant_usage_row; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER tenant_usage_row AFTER INSERT ON pgsched.tenant REFERENCING NEW TABLE AS new_tenants FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.tenant_usage_row_v1();

--
-- Name: execution usage_left; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER usage_left AFTER DELETE ON pgsched.execution REFERENCING OLD TABLE AS old_executions FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.usage_left_v1();

--
-- Name: execution_log usage_log_added; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER usage_log_added AFTER INSERT ON pgsched.execution_log REFERENCING NEW TABLE AS new_lines FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.usage_log_added_v1();

--
-- Name: execution_log usage_log_removed; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER usage_log_removed AFTER DELETE ON pgsched.execution_log REFERENCING OLD TABLE AS old_lines FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.usage_log_removed_v1();

--
-- Name: execution usage_requeued; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER usage_requeued AFTER UPDATE ON pgsched.execution FOR EACH ROW WHEN (((old.state = 'running'::text) AND (new.state <> 'running'::text) AND (old.started_at IS NOT NULL))) EXECUTE FUNCTION pgsched_internal.usage_requeued_v1();

--
-- Name: execution_history webhook_execution_finished; Type: TRIGGER; Schema: pgsched; Owner: -
--

CREATE TRIGGER webhook_execution_finished AFTER INSERT ON pgsched.execution_history FOR EACH ROW WHEN ((new.state = ANY (ARRAY['failed'::text, 'timed_out'::text, 'dead'::text]))) EXECUTE FUNCTION pgsched_internal.webhook_execution_finished_v1();

--
-- Name: alert alert_task_id_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.alert
    ADD CONSTRAINT alert_task_id_fkey FOREIGN KEY (task_id) REFERENCES pgsched.task(id);

--
-- Name: dag_node dag_node_dag_id_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_node
    ADD CONSTRAINT dag_node_dag_id_fkey FOREIGN KEY (dag_id) REFERENCES pgsched.dag(id);

--
-- Name: dag_node_run dag_node_run_run_id_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_node_run
    ADD CONSTRAINT dag_node_run_run_id_fkey FOREIGN KEY (run_id) REFERENCES pgsched.dag_run(id);

--
-- Name: dag_node dag_node_task_id_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_node
    ADD CONSTRAINT dag_node_task_id_fkey FOREIGN KEY (task_id) REFERENCES pgsched.task(id);

--
-- Name: dag_run dag_run_dag_id_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_run
    ADD CONSTRAINT dag_run_dag_id_fkey FOREIGN KEY (dag_id) REFERENCES pgsched.dag(id);

--
-- Name: dag_run dag_run_rerun_of_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag_run
    ADD CONSTRAINT dag_run_rerun_of_fkey FOREIGN KEY (rerun_of) REFERENCES pgsched.dag_run(id);

--
-- Name: dag dag_task_id_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.dag
    ADD CONSTRAINT dag_task_id_fkey FOREIGN KEY (task_id) REFERENCES pgsched.task(id);

--
-- Name: queue queue_tenant_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.queue
    ADD CONSTRAINT queue_tenant_fkey FOREIGN KEY (tenant) REFERENCES pgsched.tenant(name);

--
-- Name: task_alerting task_alerting_task_id_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.task_alerting
    ADD CONSTRAINT task_alerting_task_id_fkey FOREIGN KEY (task_id) REFERENCES pgsched.task(id);

--
-- Name: tenant_role tenant_role_tenant_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.tenant_role
    ADD CONSTRAINT tenant_role_tenant_fkey FOREIGN KEY (tenant) REFERENCES pgsched.tenant(name) ON DELETE CASCADE;

--
-- Name: tenant_usage tenant_usage_tenant_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.tenant_usage
    ADD CONSTRAINT tenant_usage_tenant_fkey FOREIGN KEY (tenant) REFERENCES pgsched.tenant(name) ON DELETE CASCADE;

--
-- Name: web_session web_session_token_id_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.web_session
    ADD CONSTRAINT web_session_token_id_fkey FOREIGN KEY (token_id) REFERENCES pgsched.api_token(id) ON DELETE CASCADE;

--
-- Name: web_session web_session_username_fkey; Type: FK CONSTRAINT; Schema: pgsched; Owner: -
--

ALTER TABLE ONLY pgsched.web_session
    ADD CONSTRAINT web_session_username_fkey FOREIGN KEY (username) REFERENCES pgsched.web_user(username) ON DELETE CASCADE;

--
-- Name: secret secret_tenant_fkey; Type: FK CONSTRAINT; Schema: pgsched_internal; Owner: -
--

ALTER TABLE ONLY pgsched_internal.secret
    ADD CONSTRAINT secret_tenant_fkey FOREIGN KEY (tenant) REFERENCES pgsched.tenant(name) ON DELETE CASCADE;

--
-- Name: alert; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.alert ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_event; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.audit_event ENABLE ROW LEVEL SECURITY;

--
-- Name: dag; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.dag ENABLE ROW LEVEL SECURITY;

--
-- Name: dag_node; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.dag_node ENABLE ROW LEVEL SECURITY;

--
-- Name: dag_node_run; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.dag_node_run ENABLE ROW LEVEL SECURITY;

--
-- Name: dag_run; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.dag_run ENABLE ROW LEVEL SECURITY;

--
-- Name: execution; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.execution ENABLE ROW LEVEL SECURITY;

--
-- Name: execution_attempt; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.execution_attempt ENABLE ROW LEVEL SECURITY;

--
-- Name: execution_history; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.execution_history ENABLE ROW LEVEL SECURITY;

--
-- Name: execution_log; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.execution_log ENABLE ROW LEVEL SECURITY;

--
-- Name: alert instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.alert TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: audit_event instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.audit_event TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: dag instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.dag TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: dag_node instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.dag_node TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: dag_node_run instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.dag_node_run TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: dag_run instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.dag_run TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: execution instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.execution TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: execution_attempt instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.execution_attempt TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: execution_history instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.execution_history TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: execution_log instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.execution_log TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: limit_wait instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.limit_wait TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: queue instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.queue TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: rate_start instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.rate_start TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: stats_hourly instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.stats_hourly TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: stats_total instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.stats_total TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: task instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.task TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: task_alerting instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.task_alerting TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: tenant instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.tenant TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: tenant_role instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.tenant_role TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: tenant_usage instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.tenant_usage TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: unique_period instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.unique_period TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: usage_delta instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.usage_delta TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: webhook_delivery instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.webhook_delivery TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: worker instance_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY instance_rows ON pgsched.worker TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: limit_wait; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.limit_wait ENABLE ROW LEVEL SECURITY;

--
-- Name: queue; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.queue ENABLE ROW LEVEL SECURITY;

--
-- Name: rate_start; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.rate_start ENABLE ROW LEVEL SECURITY;

--
-- Name: stats_hourly; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.stats_hourly ENABLE ROW LEVEL SECURITY;

--
-- Name: stats_total; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.stats_total ENABLE ROW LEVEL SECURITY;

--
-- Name: task; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.task ENABLE ROW LEVEL SECURITY;

--
-- Name: task_alerting; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.task_alerting ENABLE ROW LEVEL SECURITY;

--
-- Name: tenant; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.tenant ENABLE ROW LEVEL SECURITY;

--
-- Name: tenant_role; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.tenant_role ENABLE ROW LEVEL SECURITY;

--
-- Name: alert tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.alert TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((task_id IS NULL) OR (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = alert.task_id))))));

--
-- Name: audit_event tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.audit_event TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: dag tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.dag TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((task_id IS NULL) OR (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = dag.task_id))))));

--
-- Name: dag_node tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.dag_node TO pgsched_engine, pgsched_web USING ((EXISTS ( SELECT
   FROM pgsched.dag d
  WHERE (d.id = dag_node.dag_id)))) WITH CHECK (((EXISTS ( SELECT
   FROM pgsched.dag d
  WHERE (d.id = dag_node.dag_id))) AND (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = dag_node.task_id)))));

--
-- Name: dag_node_run tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.dag_node_run TO pgsched_engine, pgsched_web USING ((EXISTS ( SELECT
   FROM pgsched.dag_run r
  WHERE (r.id = dag_node_run.run_id)))) WITH CHECK (((EXISTS ( SELECT
   FROM pgsched.dag_run r
  WHERE (r.id = dag_node_run.run_id))) AND (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = dag_node_run.task_id)))));

--
-- Name: dag_run tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.dag_run TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND (EXISTS ( SELECT
   FROM pgsched.dag d
  WHERE (d.id = dag_run.dag_id)))));

--
-- Name: execution tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.execution TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((task_id IS NULL) OR (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = execution.task_id))))));

--
-- Name: execution_attempt tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.execution_attempt TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((EXISTS ( SELECT
   FROM pgsched.execution e
  WHERE (e.id = execution_attempt.execution_id))) OR (EXISTS ( SELECT
   FROM pgsched.execution_history h
  WHERE (h.id = execution_attempt.execution_id))))));

--
-- Name: execution_history tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.execution_history TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((task_id IS NULL) OR (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = execution_history.task_id))))));

--
-- Name: execution_log tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.execution_log TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((EXISTS ( SELECT
   FROM pgsched.execution e
  WHERE (e.id = execution_log.execution_id))) OR (EXISTS ( SELECT
   FROM pgsched.execution_history h
  WHERE (h.id = execution_log.execution_id))))));

--
-- Name: limit_wait tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.limit_wait FOR SELECT TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: queue tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.queue TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: rate_start tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.rate_start FOR SELECT TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: stats_hourly tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.stats_hourly TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((task_id IS NULL) OR (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = stats_hourly.task_id))))));

--
-- Name: stats_total tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.stats_total TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((task_id IS NULL) OR (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = stats_total.task_id))))));

--
-- Name: task tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.task TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: task_alerting tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.task_alerting TO pgsched_engine, pgsched_web USING ((EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = task_alerting.task_id)))) WITH CHECK ((EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = task_alerting.task_id))));

--
-- Name: tenant tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.tenant FOR SELECT TO pgsched_engine USING ((name = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: tenant_role tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.tenant_role TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: tenant_usage tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.tenant_usage FOR SELECT TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: unique_period tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.unique_period TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((EXISTS ( SELECT
   FROM pgsched.execution e
  WHERE (e.id = unique_period.execution_id))) OR (EXISTS ( SELECT
   FROM pgsched.execution_history h
  WHERE (h.id = unique_period.execution_id))))));

--
-- Name: webhook_delivery tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.webhook_delivery TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK (((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)) AND ((task_id IS NULL) OR (EXISTS ( SELECT
   FROM pgsched.task k
  WHERE (k.id = webhook_delivery.task_id))))));

--
-- Name: worker tenant_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY tenant_rows ON pgsched.worker TO pgsched_engine USING ((tenants = ARRAY[( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)])) WITH CHECK ((tenants = ARRAY[( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)]));

--
-- Name: tenant_usage; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.tenant_usage ENABLE ROW LEVEL SECURITY;

--
-- Name: unique_period; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.unique_period ENABLE ROW LEVEL SECURITY;

--
-- Name: usage_delta; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.usage_delta ENABLE ROW LEVEL SECURITY;

--
-- Name: alert web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.alert TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: audit_event web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.audit_event TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: dag web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.dag TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: dag_run web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.dag_run TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: execution web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.execution TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: execution_attempt web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.execution_attempt TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: execution_history web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.execution_history TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: execution_log web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.execution_log TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: limit_wait web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.limit_wait FOR SELECT TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: queue web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.queue TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: rate_start web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.rate_start FOR SELECT TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: stats_hourly web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.stats_hourly TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: stats_total web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.stats_total TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: task web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.task TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: tenant web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.tenant FOR SELECT TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = name) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: tenant_role web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.tenant_role TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: tenant_usage web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.tenant_usage FOR SELECT TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: unique_period web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.unique_period TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: webhook_delivery web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.webhook_delivery TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- Name: worker web_rows; Type: POLICY; Schema: pgsched; Owner: -
--

CREATE POLICY web_rows ON pgsched.worker TO pgsched_web USING (true) WITH CHECK (true);

--
-- Name: webhook_delivery; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.webhook_delivery ENABLE ROW LEVEL SECURITY;

--
-- Name: worker; Type: ROW SECURITY; Schema: pgsched; Owner: -
--

ALTER TABLE pgsched.worker ENABLE ROW LEVEL SECURITY;

--
-- Name: secret instance_rows; Type: POLICY; Schema: pgsched_internal; Owner: -
--

CREATE POLICY instance_rows ON pgsched_internal.secret TO pgsched_instance USING (true) WITH CHECK (true);

--
-- Name: secret; Type: ROW SECURITY; Schema: pgsched_internal; Owner: -
--

ALTER TABLE pgsched_internal.secret ENABLE ROW LEVEL SECURITY;

--
-- Name: secret tenant_rows; Type: POLICY; Schema: pgsched_internal; Owner: -
--

CREATE POLICY tenant_rows ON pgsched_internal.secret TO pgsched_engine USING ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1))) WITH CHECK ((tenant = ( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1)));

--
-- Name: secret web_rows; Type: POLICY; Schema: pgsched_internal; Owner: -
--

CREATE POLICY web_rows ON pgsched_internal.secret TO pgsched_web USING (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text))) WITH CHECK (((( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = tenant) OR (( SELECT pgsched_internal.session_tenant_v1() AS session_tenant_v1) = '*'::text)));

--
-- PostgreSQL database dump complete
--
