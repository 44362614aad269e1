-- 0012: an idempotency key belongs to its task; an enqueue says whether it was
-- deduplicated and how; a dead-letter retry starts its backoff afresh.
--
-- Keys were unique per tenant (execution_idempotency_key on (tenant, idempotency_key),
-- history looked up the same way), so a key given to a second task returned the first
-- task's execution, or recorded the second task's run as skipped because the first task's
-- had succeeded: the caller's run silently never happened. A key now belongs to one task
-- (and its tenant): the same key on another task is another execution. Every lookup by
-- key follows: enqueue (and trigger_v1, enqueue_many, the run_request INSERT, which call
-- it), its already-succeeded check (the skipped record), and the dead-letter retry's check
-- that its key has not been taken since. Derived keys (task.idempotent) already name their
-- task ('auto:<task id>:...'); the scheduler's fire inserts with a bare ON CONFLICT DO
-- NOTHING, which the new unique index serves as it did the old one. DAG node executions
-- carry no key. A task deleted and created again under its name is a new task: keys of
-- the old one no longer deduplicate its runs.
--
-- tenant stays first in both indexes although a task belongs to one tenant: a unique
-- index of a table distributed by tenant (docs/scaling.md, Citus) must hold the tenant.
-- The history index is partial on 'succeeded', the only state a lookup by key asks for;
-- it is built on every partition of execution_history now (this migration holds the
-- table locked while it does: about a second per million keyed rows) and on each new one
-- when the leader attaches it (ATTACH PARTITION builds the parent's indexes).

DROP INDEX pgsched.execution_idempotency_key;
CREATE UNIQUE INDEX execution_task_idempotency_key
    ON pgsched.execution (tenant, task_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

DROP INDEX pgsched.execution_history_key_idx;
CREATE INDEX execution_history_succeeded_key_idx
    ON pgsched.execution_history (tenant, task_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND state = 'succeeded';

-- The attempt number a retry's backoff counts from: 0 for a new execution; a dead-letter
-- retry sets it to the attempts already made, so that the first failure after it waits the
-- policy's first delay (backoff of attempt - backoff_from_attempt), not the delay of
-- attempt N + 1 (exponential: base * 2^N). Live executions only: history never retries.
-- A constant default: added without rewriting the table.
ALTER TABLE pgsched.execution ADD COLUMN backoff_from_attempt integer NOT NULL DEFAULT 0;

-- Enqueue one run of a task, as enqueue_v1 does (0009's body), and say what happened:
--   execution_id            the execution the call stands for
--   deduplicated            false: a new pending execution; true: nothing new will run
--   dedup_reason            NULL; 'live': an execution of this task with this key is pending
--                           or running, and execution_id is that one; 'succeeded': the key
--                           already succeeded in succeeded_execution_id, and execution_id is
--                           the 'skipped' execution recorded for this call
--   succeeded_execution_id  with 'succeeded', the execution whose success the key names
-- Two enqueues of one key racing on one task make one execution: the second's INSERT
-- waits for the first's on the unique index, finds it (ON CONFLICT DO NOTHING), and looks
-- again; should that execution have ended meanwhile, the look finds it in history (or, if
-- it did not succeed, the next INSERT makes a new one).
CREATE FUNCTION pgsched_internal.enqueue_v2(
    task_name       text,
    params          jsonb       DEFAULT NULL,
    run_at          timestamptz DEFAULT NULL,
    priority        integer     DEFAULT NULL,
    idempotency_key text        DEFAULT NULL,
    tenant          text        DEFAULT 'default',
    trigger         text        DEFAULT 'api'
) RETURNS TABLE (execution_id bigint, deduplicated boolean, dedup_reason text,
                  succeeded_execution_id bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t pgsched.task;
    new_id bigint;
    found_id bigint;
    fire_at timestamptz := coalesce(enqueue_v2.run_at, clock_timestamp());
    run_params jsonb;
    key text := enqueue_v2.idempotency_key;
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
    IF key IS NULL AND t.idempotent THEN
        key := pgsched.derived_key_v1(t.id, run_params, fire_at);
    END IF;
    -- scheduled_at is the instant asked for (clock_timestamp(), not the transaction's now(),
    -- when none is); only schedule fires are unique on (task_id, scheduled_at).
    IF key IS NULL THEN  -- nothing to conflict on: a plain INSERT, not a speculative one
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                            queue, params, max_attempts)
        VALUES (t.tenant, t.id, fire_at, fire_at, enqueue_v2.trigger, coalesce(enqueue_v2.priority, t.priority),
                t.queue, run_params, t.max_attempts)
        RETURNING e.id INTO new_id;
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
            new_id := pgsched.record_skipped_v1(t, fire_at, enqueue_v2.trigger, run_params, key, found_id);
            RETURN QUERY SELECT new_id, true, 'succeeded'::text, found_id;
            RETURN;
        END IF;
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                            queue, params, idempotency_key, max_attempts)
        VALUES (t.tenant, t.id, fire_at, fire_at, enqueue_v2.trigger, coalesce(enqueue_v2.priority, t.priority),
                t.queue, run_params, key, t.max_attempts)
        ON CONFLICT (tenant, task_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING e.id INTO new_id;
        IF new_id IS NOT NULL THEN
            RETURN QUERY SELECT new_id, false, NULL::text, NULL::bigint;
            RETURN;
        END IF;
        -- lost a race on the key to a concurrent enqueue, which has committed: look again
    END LOOP;
    RAISE EXCEPTION 'idempotency_key: % of task % was taken and released three times while '
                    'this enqueue ran; try again', quote_literal(key), quote_literal(t.name)
        USING ERRCODE = 'serialization_failure';
END $$;

-- enqueue_v1 is enqueue_v2's execution id (applications and the Python callers keep it).
CREATE OR REPLACE FUNCTION pgsched_internal.enqueue_v1(
    task_name       text,
    params          jsonb       DEFAULT NULL,
    run_at          timestamptz DEFAULT NULL,
    priority        integer     DEFAULT NULL,
    idempotency_key text        DEFAULT NULL,
    tenant          text        DEFAULT 'default',
    trigger         text        DEFAULT 'api'
) RETURNS bigint LANGUAGE sql AS $$
    SELECT r.execution_id
      FROM pgsched_internal.enqueue_v2(task_name, params, run_at, priority, idempotency_key,
                                       tenant, trigger) r;
$$;

-- The public name, as 0007's enqueue_v1: the task row is held FOR KEY SHARE until commit,
-- so that an enqueue and a delete of its task do not race.
CREATE FUNCTION pgsched.enqueue_v2(
    task_name       text,
    params          jsonb       DEFAULT NULL,
    run_at          timestamptz DEFAULT NULL,
    priority        integer     DEFAULT NULL,
    idempotency_key text        DEFAULT NULL,
    tenant          text        DEFAULT 'default',
    trigger         text        DEFAULT 'api'
) RETURNS TABLE (execution_id bigint, deduplicated boolean, dedup_reason text,
                  succeeded_execution_id bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgsched.task_share_v1(task_name, tenant);
    RETURN QUERY SELECT * FROM pgsched_internal.enqueue_v2(task_name, params, run_at, priority,
                                                           idempotency_key, tenant, trigger);
END $$;

-- The run_request INSERT tells what enqueue_v2 tells: RETURNING execution_id, deduplicated,
-- dedup_reason, succeeded_execution_id. New columns go at the end (CREATE OR REPLACE VIEW
-- keeps the old ones and their order; the INSTEAD OF trigger stays).
CREATE OR REPLACE VIEW pgsched.run_request AS
    SELECT NULL::text AS task, NULL::jsonb AS params, NULL::timestamptz AS run_at,
           NULL::integer AS priority, NULL::text AS idempotency_key,
           'default'::text AS tenant, NULL::bigint AS execution_id,
           NULL::boolean AS deduplicated, NULL::text AS dedup_reason, NULL::bigint AS succeeded_execution_id
     WHERE false;

CREATE OR REPLACE FUNCTION pgsched.run_request_insert_v1() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF NEW.task IS NULL THEN
        RAISE EXCEPTION 'task: a run request needs a task name' USING ERRCODE = 'not_null_violation';
    END IF;
    SELECT * INTO r FROM pgsched.enqueue_v2(NEW.task, NEW.params, NEW.run_at, NEW.priority,
                                            NEW.idempotency_key, coalesce(NEW.tenant, 'default'), 'insert');
    NEW.execution_id := r.execution_id;
    NEW.deduplicated := r.deduplicated;
    NEW.dedup_reason := r.dedup_reason;
    NEW.succeeded_execution_id := r.succeeded_execution_id;
    RETURN NEW;
END $$;

-- Dead-letter queue (0003's body): the key checks are the task's own, and the retry's
-- backoff counts from the attempts already made (backoff_from_attempt).
CREATE OR REPLACE FUNCTION pgsched.dlq_retry_v1(execution_id bigint, tenant text DEFAULT 'default')
RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    h pgsched.execution_history;
    holder bigint;
    max_tries integer;
BEGIN
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
