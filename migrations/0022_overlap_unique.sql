-- 0022: overlap policies for schedules and unique windows (issue 18, items 5 and 6).
--
-- overlap_policy says what a scheduler's fire (and a catch-up fire) does while the task's
-- previous execution is live: 'allow' (run it anyway, as before), 'skip' (record the fire
-- as a skipped execution while any execution of the task is pending or running), or
-- 'queue_one' (one running at a time and at most one waiting behind it: a fire while one
-- waits is recorded as skipped; the claim starts the waiting one when the running one
-- ends). Manual, API and INSERT enqueues are not skipped by it (someone asked for that
-- run; under queue_one they too wait their turn); they count as the previous execution
-- for the next fire.
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
-- advisory lock keyed on (tenant, task) (a task scope, an overlap policy) and, for a key
-- scope, (tenant, key)
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
    -- the task's lock for its overlap policy and a task scope; enqueues of a key scope
    -- with different keys need not wait for each other (task first, then key: one order)
    IF t.overlap_policy <> 'allow' OR t.unique_scope = 'task' THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('pgsched.window ' || t.tenant || ' task ' || t.id, 0));
    END IF;
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

-- queue_one means the queued run waits for the running one: the claim holds a queue_one
-- task to one execution running at a time (an effective max_running of 1, beside the
-- task's own, as 0021's task cap: exact across workers, waking the waiting run when the
-- running one ends), and wait_reason_v1 says so. 0021's two functions with that alone.
CREATE OR REPLACE FUNCTION pgsched_internal.claim_tenant_v1(t text, queues text[], lim integer, at timestamp with time zone, OUT picks bigint[], OUT waited boolean, OUT free_at timestamp with time zone, OUT weight integer) RETURNS record
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

CREATE OR REPLACE FUNCTION pgsched_internal.wait_reason_v1(e pgsched.execution) RETURNS text
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
                      ten.max_starts_per_hour);
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
            RETURN format('queue %s started its rate limit of %s per %s s', e.queue, g.rate_limit,
                          g.rate_period_seconds);
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
            RETURN format('task %s started its rate limit of %s per %s s', k.name, k.rate_limit,
                          k.rate_period_seconds);
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
            RETURN format('key %s started its rate limit of %s per %s s', e.concurrency_key,
                          k.key_rate_limit, k.key_rate_period_seconds);
        END IF;
    END IF;
    RETURN NULL;
END $$;

SELECT pgsched_internal.secure_v1();
