-- 0009: an execution's task is checked once per statement, not once per row; an enqueue
-- without an idempotency key inserts plainly; a worker's heartbeat finds cancel requests
-- through an index of its own.
--
-- The foreign key execution.task_id -> task.id ran PostgreSQL's check trigger for every
-- inserted row (a lookup of the task row, locked FOR KEY SHARE): EXPLAIN ANALYZE of
-- enqueue_many_v2 with 1,000 params showed it at 4.5-9 ms of a 10-19 ms statement, the
-- largest single cost of a bulk enqueue and of the scheduler's fire of a batch of due
-- tasks, though every row of such a statement names the same task or a few. The key is
-- replaced by triggers that keep its rules:
--   an INSERT into execution        once per statement, each distinct task_id must be a
--                                   task row, which is locked FOR KEY SHARE until commit
--                                   (as the key's check does), so that no DELETE of the
--                                   task can commit first
--   an UPDATE of execution.task_id  the same, row by row (nothing in pgsched does it)
--   a DELETE of task rows           refused while an execution names one of them (pgsched
--                                   never deletes a task: it soft-deletes, deleted_at)
--   an UPDATE of task.id            refused while an execution names the old id
--   TRUNCATE of task                refused when it leaves executions behind (checked
--                                   after it: TRUNCATE task, execution CASCADE is fine)
-- The INSERT check shares its trigger with the workers' wake-up (the NOTIFY of 0001's
-- execution_notify, which it replaces): one trigger call per statement instead of two. On
-- a single-row INSERT it costs about 30 us more than the NOTIFY alone did, and a single
-- enqueue is 3-5% slower than with the key (alternating runs of 1,500); on 1,000 rows the
-- check takes about 1 ms against the key's 5-9.
-- The error is foreign_key_violation (23503), as the key's. One difference: under
-- REPEATABLE READ or SERIALIZABLE the task side's check would miss an execution inserted by
-- a transaction that committed after the snapshot (a foreign key checks against a newer
-- snapshot; a trigger cannot), and leave an execution that names no task, which a worker
-- would claim and never run. So deleting, renumbering or truncating task rows is refused
-- (feature_not_supported) outside READ COMMITTED. pgsched itself never deletes task rows.
--
-- The heartbeat's cancel_ids (worker_heartbeat) looked through execution_worker_idx, the
-- worker's running executions, for those with a cancel requested: with workers draining,
-- that index holds the entries of every execution claimed since the last vacuum (about
-- 8,500 read per heartbeat in a burst of 100,000). execution_cancel_idx holds only
-- running executions whose cancel was asked, nearly always none.
--
-- A single enqueue (enqueue_v1) without an idempotency key inserts plainly, not
-- speculatively (below).

ALTER TABLE pgsched.execution DROP CONSTRAINT execution_task_id_fkey;
DROP TRIGGER execution_notify ON pgsched.execution;
DROP FUNCTION pgsched.execution_notify_v1();

-- Once per INSERT statement: check the rows it added (transition table new_executions),
-- then wake the workers (DESIGN "NOTIFY": a NOTIFY takes a global lock at commit, and
-- PostgreSQL folds identical notifications of one transaction into one).
CREATE FUNCTION pgsched_internal.execution_inserted_v1() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing bigint;
BEGIN
    WITH wanted AS (SELECT DISTINCT n.task_id FROM new_executions n),
         locked AS (SELECT k.id FROM pgsched.task k WHERE k.id IN (SELECT w.task_id FROM wanted w)
                       FOR KEY SHARE OF k)
    SELECT w.task_id INTO missing FROM wanted w
     WHERE NOT EXISTS (SELECT FROM locked l WHERE l.id = w.task_id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', missing
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    END IF;
    PERFORM pg_notify('pgsched_execution', '');
    RETURN NULL;
END $$;

CREATE TRIGGER execution_inserted AFTER INSERT ON pgsched.execution
    REFERENCING NEW TABLE AS new_executions
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.execution_inserted_v1();

-- Row-level: transition tables cannot go with a column list (UPDATE OF).
CREATE FUNCTION pgsched_internal.execution_task_recheck_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM pgsched.task k WHERE k.id = NEW.task_id FOR KEY SHARE OF k;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', NEW.task_id
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER execution_task_recheck AFTER UPDATE OF task_id ON pgsched.execution
    FOR EACH ROW WHEN (OLD.task_id IS DISTINCT FROM NEW.task_id)
    EXECUTE FUNCTION pgsched_internal.execution_task_recheck_v1();

-- The task side: a DELETE (statement, transition table old_tasks), an UPDATE of id (row),
-- a TRUNCATE (after it: a TRUNCATE of execution in the same statement has emptied it).
CREATE FUNCTION pgsched_internal.task_referenced_v1() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER task_referenced_delete AFTER DELETE ON pgsched.task
    REFERENCING OLD TABLE AS old_tasks
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.task_referenced_v1();
CREATE TRIGGER task_referenced_update AFTER UPDATE OF id ON pgsched.task
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION pgsched_internal.task_referenced_v1();
CREATE TRIGGER task_referenced_truncate AFTER TRUNCATE ON pgsched.task
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.task_referenced_v1();

CREATE INDEX execution_cancel_idx ON pgsched.execution (worker_id)
    WHERE state = 'running' AND cancel_requested_at IS NOT NULL;

-- enqueue_v1 (0003's body, moved to pgsched_internal by 0007) inserted every run with ON
-- CONFLICT on the idempotency key, also when there is no key: PostgreSQL then inserts
-- speculatively (5 WAL records for a run instead of 3, and 0.23 against 0.18 ms in
-- EXPLAIN ANALYZE here). Without a key the INSERT is now a plain one; otherwise as before.
CREATE OR REPLACE FUNCTION pgsched_internal.enqueue_v1(
    task_name       text,
    params          jsonb       DEFAULT NULL,
    run_at          timestamptz DEFAULT NULL,
    priority        integer     DEFAULT NULL,
    idempotency_key text        DEFAULT NULL,
    tenant          text        DEFAULT 'default',
    trigger         text        DEFAULT 'api'
) RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t pgsched.task;
    new_id bigint;
    fire_at timestamptz := coalesce(enqueue_v1.run_at, clock_timestamp());
    run_params jsonb;
    key text := enqueue_v1.idempotency_key;
BEGIN
    SELECT * INTO t FROM pgsched.task k
     WHERE k.tenant = enqueue_v1.tenant AND k.name = enqueue_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(enqueue_v1.task_name), quote_literal(enqueue_v1.tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    IF t.handler_kind = 'dag' THEN
        RAISE EXCEPTION 'task: % is a DAG; start a run with pgsched dag trigger or pgsched.dag_trigger_v1()',
            quote_literal(enqueue_v1.task_name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v1.priority IS NOT NULL AND enqueue_v1.priority NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'priority: % is out of range 1-10', enqueue_v1.priority USING ERRCODE = 'check_violation';
    END IF;
    IF NOT isfinite(fire_at) OR fire_at < '1970-01-01 00:00:00+00' OR fire_at >= '9000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at: % is outside 1970 to 9000', enqueue_v1.run_at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v1.trigger IS NULL OR enqueue_v1.trigger NOT IN ('api', 'manual', 'insert') THEN
        -- 'schedule' is the scheduler's alone: it is what makes a scheduled fire unique.
        RAISE EXCEPTION 'trigger: % must be api, manual or insert', quote_nullable(enqueue_v1.trigger)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v1.params IS NOT NULL AND jsonb_typeof(enqueue_v1.params) <> 'object' THEN
        RAISE EXCEPTION 'params: % is not a JSON object', enqueue_v1.params USING ERRCODE = 'invalid_parameter_value';
    END IF;
    run_params := t.params || coalesce(enqueue_v1.params, '{}'::jsonb);
    IF key IS NULL AND t.idempotent THEN
        key := pgsched.derived_key_v1(t.id, run_params, fire_at);
    END IF;
    IF key IS NOT NULL THEN
        SELECT e.id INTO new_id FROM pgsched.execution e
         WHERE e.tenant = enqueue_v1.tenant AND e.idempotency_key = key;
        IF FOUND THEN RETURN new_id; END IF;
        SELECT h.id INTO new_id FROM pgsched.execution_history h
         WHERE h.tenant = enqueue_v1.tenant AND h.idempotency_key = key AND h.state = 'succeeded'
         LIMIT 1;
        IF FOUND THEN
            RETURN pgsched.record_skipped_v1(t, fire_at, enqueue_v1.trigger, run_params, key, new_id);
        END IF;
    END IF;
    -- scheduled_at is the instant asked for (clock_timestamp(), not the transaction's now(),
    -- when none is); only schedule fires are unique on (task_id, scheduled_at).
    IF key IS NULL THEN  -- nothing to conflict on: a plain INSERT, not a speculative one
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                            queue, params, max_attempts)
        VALUES (t.tenant, t.id, fire_at, fire_at, enqueue_v1.trigger, coalesce(enqueue_v1.priority, t.priority),
                t.queue, run_params, t.max_attempts)
        RETURNING e.id INTO new_id;
        RETURN new_id;
    END IF;
    INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                        queue, params, idempotency_key, max_attempts)
    VALUES (t.tenant, t.id, fire_at, fire_at, enqueue_v1.trigger, coalesce(enqueue_v1.priority, t.priority),
            t.queue, run_params, key, t.max_attempts)
    ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING e.id INTO new_id;
    IF new_id IS NULL THEN  -- lost a race on the idempotency key to a concurrent enqueue
        SELECT e.id INTO new_id FROM pgsched.execution e
         WHERE e.tenant = enqueue_v1.tenant AND e.idempotency_key = key;
    END IF;
    RETURN new_id;
END $$;
