-- 0022: overlap policies for schedules and unique windows (issue 18, items 5 and 6).
--
-- overlap_policy says what a scheduler's fire (and a catch-up fire) does while the task's
-- previous execution is live: 'allow' (run it anyway, as before), 'skip' (record the fire
-- as a skipped execution while any execution of the task is pending or running), or
-- 'queue_one' (at most one waiting execution besides the running ones: a fire while one
-- waits is recorded as skipped). Manual, API and INSERT enqueues are not held back by it
-- (someone asked for that run); they count as the previous execution for the next fire.
--
-- A unique window bounds every way in (enqueue_v2, enqueue_many, run_request, the CLI, the
-- scheduler): unique_policy 'pending' (at most one pending execution of the scope at a
-- time) and unique_period_seconds (at most one enqueue per period: a second within that
-- many seconds of the last one made returns that one). The scope (unique_scope) is the
-- task, or the execution's rendered concurrency key (0021, shared by the tenant's tasks
-- that render it). A second enqueue gets the existing execution's id with deduplicated
-- true and dedup_reason 'unique_pending' or 'unique_period'; a scheduler's fire so held
-- back is recorded as a skipped execution saying why.
--
-- Race-free: every check and insert of a windowed task runs under a transaction-scoped
-- advisory lock keyed on (tenant, task) and, for a key scope, (tenant, key)
-- (hashtextextended('pgsched.window ...')), so concurrent enqueuers take turns and each
-- statement after the lock sees what the one before committed (READ COMMITTED; under a
-- snapshot isolation an earlier snapshot would not, so a windowed enqueue there is refused).
-- The pending execution found is locked FOR SHARE: a claim taking it at the same moment is
-- waited for (then it is running and a new one is made) or skips it until we commit.
--
-- The executions of windowed tasks are marked (execution.windowed) so that two small
-- partial indexes find a task's or a key's live executions: the other tasks' rows cost no
-- index entry.

ALTER TABLE pgsched.task
    ADD COLUMN overlap_policy text NOT NULL DEFAULT 'allow'
        CONSTRAINT task_overlap_policy_check CHECK (overlap_policy IN ('allow', 'skip', 'queue_one')),
    ADD COLUMN unique_policy text NOT NULL DEFAULT 'none'
        CONSTRAINT task_unique_policy_check CHECK (unique_policy IN ('none', 'pending')),
    ADD COLUMN unique_period_seconds double precision
        CONSTRAINT task_unique_period_check CHECK (unique_period_seconds > 0),
    ADD COLUMN unique_scope text NOT NULL DEFAULT 'task'
        CONSTRAINT task_unique_scope_check CHECK (unique_scope IN ('task', 'key')),
    ADD CONSTRAINT task_unique_key_needs_key CHECK (unique_scope = 'task' OR concurrency_key IS NOT NULL);
ALTER TABLE pgsched.task
    ADD COLUMN windowed boolean GENERATED ALWAYS AS
        (overlap_policy <> 'allow' OR unique_policy <> 'none' OR unique_period_seconds IS NOT NULL) STORED;
COMMENT ON COLUMN pgsched.task.overlap_policy IS
    'what a scheduler''s fire does while an execution of the task is live: allow, skip, queue_one (0022)';
COMMENT ON COLUMN pgsched.task.unique_policy IS
    'none, or pending: at most one pending execution of the unique_scope at a time (0022)';
COMMENT ON COLUMN pgsched.task.unique_period_seconds IS
    'at most one enqueue of the unique_scope per this many seconds (debounce); NULL: none (0022)';
COMMENT ON COLUMN pgsched.task.unique_scope IS
    'what the unique window counts: the task, or the rendered concurrency key (0022)';

ALTER TABLE pgsched.execution ADD COLUMN windowed boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN pgsched.execution.windowed IS
    'made for a task with an overlap policy or a unique window, which count it (0022)';
CREATE INDEX execution_windowed_task_idx ON pgsched.execution (task_id, state) WHERE windowed;
CREATE INDEX execution_windowed_key_idx ON pgsched.execution (tenant, concurrency_key)
    WHERE windowed AND state = 'pending' AND concurrency_key IS NOT NULL;

-- The last execution made per scope of a task with a unique period (debounce).
CREATE TABLE pgsched.unique_period (
    tenant text NOT NULL,
    scope text NOT NULL CONSTRAINT unique_period_scope_check CHECK (scope IN ('task', 'key')),
    name text NOT NULL,
    execution_id bigint NOT NULL,
    enqueued_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, scope, name)
);
COMMENT ON TABLE pgsched.unique_period IS
    'the last execution enqueued per task (name: its id) or key of tasks with a unique period (0022)';

-- Executions made before a task got its policy count too: a change that makes a task
-- windowed marks its live executions (a row trigger on the policy columns alone, so the
-- scheduler's updates of next_fire_at never run it).
CREATE FUNCTION pgsched_internal.task_windowed_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE pgsched.execution e SET windowed = true WHERE e.task_id = NEW.id AND NOT e.windowed;
    RETURN NULL;
END $$;
CREATE TRIGGER task_windowed AFTER UPDATE OF overlap_policy, unique_policy, unique_period_seconds
    ON pgsched.task FOR EACH ROW WHEN (NEW.windowed AND NOT OLD.windowed)
    EXECUTE FUNCTION pgsched_internal.task_windowed_v1();

-- Executions made by the other ways in (a dead-letter retry, a DAG's nodes, a raw INSERT
-- of the engine's) count too: a statement trigger marks a windowed task's rows, as 0021's
-- execution_keyed renders keys; one look at task_windowed_idx while no task is windowed.
CREATE INDEX task_windowed_idx ON pgsched.task (id) WHERE windowed;
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
CREATE TRIGGER execution_windowed AFTER INSERT ON pgsched.execution
    REFERENCING NEW TABLE AS new_executions FOR EACH STATEMENT
    EXECUTE FUNCTION pgsched_internal.execution_windowed_v1();

-- Whether the task's windows hold a new execution back, under the window's locks (taken
-- here, held to the end of the transaction). how: the trigger of the execution asked for;
-- the overlap policy holds back 'schedule' only. existing: the execution that holds it
-- back (NULL: none, go ahead); reason: overlap_skip, overlap_queue_one, unique_pending or
-- unique_period; why: a sentence for a skipped execution's error.
CREATE FUNCTION pgsched_internal.window_check_v1(t pgsched.task, run_params jsonb, how text,
                                                 OUT existing bigint, OUT reason text, OUT why text)
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
    PERFORM pg_advisory_xact_lock(hashtextextended('pgsched.window ' || t.tenant || ' task ' || t.id, 0));
    IF t.unique_scope = 'key' THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('pgsched.window ' || t.tenant || ' key ' || key, 0));
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

-- After a windowed task's execution was made (under window_check_v1's locks): the start of
-- its scope's next period.
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

-- A fire or enqueue a window held back, recorded as a skipped execution saying why.
CREATE FUNCTION pgsched_internal.record_window_skipped_v1(t pgsched.task, scheduled timestamptz, how text,
                                                          run_params jsonb, why text, epoch bigint) RETURNS bigint
    LANGUAGE sql
    AS $$
    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
        trigger, priority, queue, params, attempt, max_attempts, leader_epoch, created_at,
        finished_at, error)
    VALUES (nextval('pgsched.execution_id_seq'), t.tenant, t.id, scheduled, scheduled, 'skipped',
            how, t.priority, t.queue, run_params, 0, t.max_attempts, epoch, now(), clock_timestamp(), why)
    RETURNING id;
$$;

-- The scheduler's fires of windowed tasks (scheduler_fire_windowed), one by one in the order
-- given (task, then fire time), each under its windows: made, or recorded as skipped. A
-- fire already made (unique (task_id, scheduled_at)) or at or before the task's
-- last_fire_at is passed over, as scheduler_fire does. Returns the executions made.
CREATE FUNCTION pgsched_internal.fire_windowed_v1(task_ids bigint[], fire_ats timestamptz[], epoch bigint)
    RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    t pgsched.task;
    w record;
    made bigint;
    n integer := 0;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(task_ids), 0) LOOP
        SELECT * INTO t FROM pgsched.task k WHERE k.id = task_ids[i];
        CONTINUE WHEN NOT FOUND OR t.handler_kind = 'dag'
                      OR (t.last_fire_at IS NOT NULL AND fire_ats[i] <= t.last_fire_at);
        CONTINUE WHEN EXISTS (SELECT FROM pgsched.execution e
                               WHERE e.task_id = t.id AND e.scheduled_at = fire_ats[i] AND e.trigger = 'schedule');
        SELECT * INTO w FROM pgsched_internal.window_check_v1(t, t.params, 'schedule');
        IF w.existing IS NOT NULL THEN
            PERFORM pgsched_internal.record_window_skipped_v1(t, fire_ats[i], 'schedule', t.params, w.why, epoch);
            CONTINUE;
        END IF;
        made := NULL;
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority, queue,
                                            params, max_attempts, leader_epoch, idempotency_key,
                                            concurrency_key, windowed)
        VALUES (t.tenant, t.id, fire_ats[i], fire_ats[i], 'schedule', t.priority, t.queue, t.params,
                t.max_attempts, epoch,
                CASE WHEN t.idempotent THEN pgsched_internal.derived_key_v1(t.id, t.params, fire_ats[i]) END,
                pgsched_internal.concurrency_key_v1(t.concurrency_key, t.params), true)
        ON CONFLICT DO NOTHING
        RETURNING e.id INTO made;
        IF made IS NOT NULL THEN
            PERFORM pgsched_internal.window_enqueued_v1(t, t.params, made);
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END $$;

-- 0012's enqueue_v2 with the windows: a windowed task's enqueue is checked under its
-- windows' locks before its idempotency key, and a second one within a window returns
-- the existing execution (deduplicated, dedup_reason unique_pending or unique_period).
CREATE OR REPLACE FUNCTION pgsched_internal.enqueue_v2(task_name text, params jsonb DEFAULT NULL::jsonb, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, idempotency_key text DEFAULT NULL::text, tenant text DEFAULT 'default'::text, trigger text DEFAULT 'api'::text) RETURNS TABLE(execution_id bigint, deduplicated boolean, dedup_reason text, succeeded_execution_id bigint)
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

-- 0004's enqueue_many_v1, whose rows of a windowed task go one by one through enqueue_v1
-- (as an idempotent task's do): each row's id is its own execution's or, held back by a
-- window, the existing one's.
CREATE OR REPLACE FUNCTION pgsched_internal.enqueue_many_v1(task_name text, params jsonb[], run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT NULL::integer, tenant text DEFAULT 'default'::text, trigger text DEFAULT 'api'::text) RETURNS SETOF bigint
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

SELECT pgsched_internal.secure_v1();
