-- 0003: the DAG engine (docs/dags.md).
--
-- A DAG is stored as a row in pgsched.dag, one row per node in pgsched.dag_node, and tasks:
-- every node runs as an ordinary task (named DAG.NODE), so retries, timeouts, cancel,
-- rescue and the dead-letter queue apply to nodes unchanged; the DAG's schedule lives on a
-- task of handler kind 'dag' named like the DAG, which the scheduler fires into DAG runs
-- (so misfire policies, pause and resume apply too).
--
-- A run is one pgsched.dag_run row and one pgsched.dag_node_run row per node, copied from
-- the definition when the run starts (editing a DAG never changes a run in flight). Each
-- node run counts its upstream nodes by final state. When a node's execution reaches
-- history, a trigger on execution_history settles it in the same transaction: it records
-- the node's state and result, adds one to the matching counter of each downstream node,
-- decides those nodes' trigger rules and conditions, enqueues the ones now ready, settles
-- the ones skipped, and closes the run when no node is left. Work per completion is one
-- row per edge leaving the node; the graph is never scanned.
--
-- Lock order: an execution row, then its run. Code holding a run's lock touches other
-- executions only with SKIP LOCKED, so a worker finishing a node (which holds its
-- execution and waits for the run) can never deadlock with it. What it skips, the
-- scheduler leader's sweep (dag_sweep_v1) cancels a moment later.

------------------------------------------------------------------------------------------
-- Tasks of kind 'dag' (a DAG's schedule) and executions made by DAG runs.
------------------------------------------------------------------------------------------
ALTER TABLE pgsched.task DROP CONSTRAINT task_handler_kind_check;
ALTER TABLE pgsched.task ADD CONSTRAINT task_handler_kind_check
    CHECK (handler_kind IN ('shell', 'argv', 'python', 'dag'));
ALTER TABLE pgsched.task DROP CONSTRAINT task_check;
ALTER TABLE pgsched.task ADD CONSTRAINT task_handler_check
    CHECK ((handler_kind = 'shell'  AND command IS NOT NULL)
        OR (handler_kind = 'argv'   AND argv IS NOT NULL AND cardinality(argv) > 0)
        OR (handler_kind = 'python' AND python_target IS NOT NULL)
        OR handler_kind = 'dag');

ALTER TABLE pgsched.execution DROP CONSTRAINT execution_trigger_check;
ALTER TABLE pgsched.execution ADD CONSTRAINT execution_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'api', 'insert', 'dag'));
ALTER TABLE pgsched.execution ADD COLUMN dag_run_id bigint;
ALTER TABLE pgsched.execution_history ADD COLUMN dag_run_id bigint;
CREATE INDEX execution_dag_run_idx ON pgsched.execution (dag_run_id) WHERE dag_run_id IS NOT NULL;

CREATE OR REPLACE VIEW pgsched.execution_all AS
    SELECT id, tenant, task_id, scheduled_at, run_at, state, trigger, priority, queue, params,
           idempotency_key, attempt, max_attempts, worker_id, leader_epoch, created_at,
           started_at, NULL::timestamptz AS finished_at, NULL::integer AS exit_code,
           NULL::text AS error, NULL::jsonb AS result, lost_attempts, cancel_requested_at,
           budget_delay_seconds, dag_run_id
      FROM pgsched.execution
    UNION ALL
    SELECT id, tenant, task_id, scheduled_at, run_at, state, trigger, priority, queue, params,
           idempotency_key, attempt, max_attempts, worker_id, leader_epoch, created_at,
           started_at, finished_at, exit_code, error, result, lost_attempts,
           NULL::timestamptz, NULL::double precision, dag_run_id
      FROM pgsched.execution_history;

------------------------------------------------------------------------------------------
-- Definitions.
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.dag (
    id              bigserial   PRIMARY KEY,
    tenant          text        NOT NULL DEFAULT 'default',
    name            text        NOT NULL,
    description     text,
    failure_policy  text        NOT NULL DEFAULT 'skip_downstream'
                    CHECK (failure_policy IN ('skip_downstream', 'fail_all', 'continue')),
    params          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    -- The task of kind 'dag' that carries the schedule (and the paused state).
    task_id         bigint      NOT NULL REFERENCES pgsched.task (id),
    definition      jsonb       NOT NULL,       -- the file as applied
    source          text,
    version         integer     NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz
);
CREATE UNIQUE INDEX dag_tenant_name_key ON pgsched.dag (tenant, name) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX dag_task_key ON pgsched.dag (task_id);

CREATE TABLE pgsched.dag_node (
    dag_id          bigint      NOT NULL REFERENCES pgsched.dag (id),
    node_id         text        NOT NULL,
    position        integer     NOT NULL,       -- order in the file
    task_id         bigint      NOT NULL REFERENCES pgsched.task (id),
    trigger_rule    text        NOT NULL DEFAULT 'all_success'
                    CHECK (trigger_rule IN ('all_success', 'all_done', 'all_failed', 'one_success',
                                            'one_failed', 'none_failed', 'none_failed_min_one_success')),
    condition       jsonb,                      -- {"field": "node.result.path", "equals": value}
    upstream        text[]      NOT NULL DEFAULT '{}',
    downstream      text[]      NOT NULL DEFAULT '{}',
    definition      jsonb       NOT NULL,       -- the node as applied
    PRIMARY KEY (dag_id, node_id)
);

------------------------------------------------------------------------------------------
-- Runs.
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.dag_run (
    id              bigserial   PRIMARY KEY,
    tenant          text        NOT NULL DEFAULT 'default',
    dag_id          bigint      NOT NULL REFERENCES pgsched.dag (id),
    state           text        NOT NULL DEFAULT 'running'
                    CHECK (state IN ('running', 'failing', 'cancelling', 'succeeded', 'failed',
                                     'partially_succeeded', 'cancelled')),
    trigger         text        NOT NULL CHECK (trigger IN ('schedule', 'manual', 'api', 'rerun')),
    scheduled_at    timestamptz NOT NULL,
    params          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    failure_policy  text        NOT NULL,
    nodes           integer     NOT NULL,
    remaining       integer     NOT NULL,       -- nodes not settled yet; 0 closes the run
    rerun_of        bigint      REFERENCES pgsched.dag_run (id),
    leader_epoch    bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    error           text
);
-- One run per scheduled fire of a DAG, whoever fires it.
CREATE UNIQUE INDEX dag_run_fire_key ON pgsched.dag_run (dag_id, scheduled_at) WHERE trigger = 'schedule';
CREATE INDEX dag_run_dag_idx ON pgsched.dag_run (dag_id, id DESC);
CREATE INDEX dag_run_open_idx ON pgsched.dag_run (id) WHERE state IN ('running', 'failing', 'cancelling');

CREATE TABLE pgsched.dag_node_run (
    run_id          bigint      NOT NULL REFERENCES pgsched.dag_run (id),
    node_id         text        NOT NULL,
    position        integer     NOT NULL,
    task_id         bigint      NOT NULL,
    -- waiting: upstream not settled; queued: its execution exists (pending or running);
    -- then one of the final states. upstream_failed: not run because of a failure upstream.
    state           text        NOT NULL DEFAULT 'waiting'
                    CHECK (state IN ('waiting', 'queued', 'succeeded', 'failed', 'skipped',
                                     'upstream_failed', 'cancelled')),
    trigger_rule    text        NOT NULL,
    condition       jsonb,
    upstream        text[]      NOT NULL,
    downstream      text[]      NOT NULL,
    -- Upstream nodes by final state (cancelled counts as failed).
    n_succeeded     integer     NOT NULL DEFAULT 0,
    n_failed        integer     NOT NULL DEFAULT 0,
    n_skipped       integer     NOT NULL DEFAULT 0,
    n_upstream_failed integer   NOT NULL DEFAULT 0,
    execution_id    bigint,
    result          jsonb,
    error           text,
    queued_at       timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    kept            boolean     NOT NULL DEFAULT false,   -- copied from the run a rerun repeats
    PRIMARY KEY (run_id, node_id)
) WITH (fillfactor = 80);
CREATE UNIQUE INDEX dag_node_run_task_key ON pgsched.dag_node_run (run_id, task_id);

------------------------------------------------------------------------------------------
-- The engine.
------------------------------------------------------------------------------------------

-- Airflow's trigger rules, as pgsched.dag.decide() (the reference; tests compare the two on
-- every combination): 'run', 'wait', 'skipped' or 'upstream_failed' for a node with total
-- upstream nodes of which so many ended in each state. Decided as soon as the states seen
-- settle it. Policy 'continue' lets downstream of a failure run: for the rules that want
-- success, failures count as successes (skips still skip).
CREATE FUNCTION pgsched.dag_decide_v1(rule text, policy text, total integer, succeeded integer,
                                      failed integer, skipped integer, upstream_failed integer)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    all_done boolean := succeeded + failed + skipped + upstream_failed = total;
    failures integer := failed + upstream_failed;
BEGIN
    IF total = 0 THEN RETURN 'run'; END IF;
    IF policy = 'continue' AND rule IN ('all_success', 'none_failed', 'none_failed_min_one_success') THEN
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
    END CASE;
    RAISE EXCEPTION 'trigger_rule: % is not a trigger rule', quote_literal(rule) USING ERRCODE = 'invalid_parameter_value';
END $$;

-- Whether a node's condition holds for the result of the upstream node it names
-- (condition->>'field' is 'node.result' or 'node.result.key.subkey'). A missing value
-- (the node did not succeed, or has no such key) equals nothing, is in nothing, does not
-- exist, and is not equal to anything.
CREATE FUNCTION pgsched.dag_condition_v1(condition jsonb, result jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
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

-- Create the executions of nodes now ready to run (one INSERT) and mark them queued.
-- Each gets the node task's params, then the run's params, then (nodes with upstream
-- nodes) "upstream": {node id: result} of its direct upstream nodes that succeeded.
-- Every lookup is by a whole key (run, node) or (run, task): the cost is per node enqueued
-- and per edge into it, never per node of the run, whatever the planner's statistics say
-- about a run newer than them.
CREATE FUNCTION pgsched.dag_enqueue_v1(r pgsched.dag_run, ready text[]) RETURNS void
LANGUAGE plpgsql AS $$
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

-- Close a run whose nodes are all settled: cancelled (a cancel was asked), failed (fail_all
-- stopped it, or no node succeeded while some failed), partially_succeeded (some nodes
-- failed, were cancelled or not run because of a failure; others succeeded) or succeeded.
-- Tells listeners (NOTIFY pgsched_dag, payload 'RUN_ID STATE').
CREATE FUNCTION pgsched.dag_close_v1(run_id bigint) RETURNS text LANGUAGE plpgsql AS $$
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

-- Stop what is left of a run (run locked by the caller): waiting nodes become cancelled;
-- live executions are cancelled (pending at once, running through their worker), taking
-- only those not locked right now (a worker finishing one holds it; dag_sweep_v1 gets the
-- rest). Returns how many waiting nodes it cancelled.
CREATE FUNCTION pgsched.dag_stop_v1(run_id bigint, why text) RETURNS integer LANGUAGE plpgsql AS $$
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
        PERFORM pgsched.dag_cancel_execution_v1(e, why);
    END LOOP;
    RETURN stopped;
END $$;

-- Cancel one live execution of a stopping run (its row locked by the caller): pending ones
-- end now (their node is settled by the execution_history trigger), running ones are asked
-- to stop (NOTIFY pgsched_cancel).
CREATE FUNCTION pgsched.dag_cancel_execution_v1(e pgsched.execution, why text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF e.state = 'pending' THEN
        PERFORM pgsched.finish_v1(e, 'cancelled', why);
    ELSIF e.cancel_requested_at IS NULL THEN
        UPDATE pgsched.execution x SET cancel_requested_at = now() WHERE x.id = e.id;
        PERFORM pg_notify('pgsched_cancel', e.id::text);
    END IF;
END $$;

-- Settle downstream of nodes that just reached a final state (run locked by the caller):
-- for each edge leaving them, count the upstream state on the downstream node and decide
-- its trigger rule and condition. Nodes decided 'skipped' or 'upstream_failed' settle in
-- turn (skips propagate); nodes decided 'run' are enqueued together at the end.
-- counted: whether the given nodes still count in the run's remaining (false for the
-- nodes a rerun copies). Closes the run when nothing is left.
CREATE FUNCTION pgsched.dag_propagate_v1(run_id bigint, settled text[], counted boolean)
RETURNS void LANGUAGE plpgsql AS $$
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
            decision := pgsched.dag_decide_v1(d.trigger_rule, r.failure_policy, cardinality(d.upstream),
                                              d.n_succeeded, d.n_failed, d.n_skipped, d.n_upstream_failed);
            CONTINUE WHEN decision = 'wait';
            why := NULL;
            IF decision = 'run' AND d.condition IS NOT NULL THEN
                -- The condition's node is a direct upstream node (validated): an eager rule
                -- (one_success) may say run before it has ended; then wait for it.
                SELECT u.* INTO cond FROM pgsched.dag_node_run u
                 WHERE u.run_id = r.id AND u.node_id = split_part(d.condition->>'field', '.', 1);
                CONTINUE WHEN cond.state IN ('waiting', 'queued');
                IF NOT pgsched.dag_condition_v1(d.condition, CASE WHEN cond.state = 'succeeded' THEN cond.result END) THEN
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
        PERFORM pgsched.dag_enqueue_v1(r, ready);
    END IF;
    UPDATE pgsched.dag_run x SET remaining = x.remaining - done_now WHERE x.id = r.id
    RETURNING * INTO r;
    IF r.remaining <= 0 THEN
        PERFORM pgsched.dag_close_v1(r.id);
    END IF;
END $$;

-- Trigger on execution_history (rows of DAG runs only): the node's execution ended (by its
-- worker, a cancel, a rescue). In the same transaction: record the node's state, result
-- and timings; under fail_all a failure stops the run; then settle downstream.
CREATE FUNCTION pgsched.dag_execution_finished_v1() RETURNS trigger LANGUAGE plpgsql AS $$
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
        PERFORM pgsched.dag_stop_v1(r.id, format('cancelled: node %s %s (failure policy fail_all)', node, node_state));
    END IF;
    PERFORM pgsched.dag_propagate_v1(r.id, ARRAY[node], true);
    RETURN NULL;
END $$;

CREATE TRIGGER dag_execution_finished AFTER INSERT ON pgsched.execution_history
    FOR EACH ROW WHEN (NEW.dag_run_id IS NOT NULL)
    EXECUTE FUNCTION pgsched.dag_execution_finished_v1();

-- Start a run of DAG dag_id: its node rows copied from the definition, root nodes enqueued
-- at once. how: schedule, manual, api or rerun. A scheduled fire already started
-- (dag_id, scheduled) returns NULL. Returns the run id.
CREATE FUNCTION pgsched.dag_start_v1(dag_id bigint, how text, scheduled timestamptz, run_params jsonb,
                                     epoch bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
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
    PERFORM pgsched.dag_enqueue_v1(r, ARRAY(
        SELECT n.node_id FROM pgsched.dag_node_run n WHERE n.run_id = r.id AND cardinality(n.upstream) = 0));
    RETURN r.id;
END $$;

------------------------------------------------------------------------------------------
-- Public SQL API for DAGs.
------------------------------------------------------------------------------------------

-- Start a run of a DAG now, also when it is paused. params (a JSON object) are merged over
-- every node's params. Returns the run id.
CREATE FUNCTION pgsched.dag_trigger_v1(dag_name text, params jsonb DEFAULT NULL,
                                       tenant text DEFAULT 'default') RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    target bigint;
BEGIN
    SELECT d.id INTO target FROM pgsched.dag d
     WHERE d.tenant = dag_trigger_v1.tenant AND d.name = dag_trigger_v1.dag_name AND d.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dag: no DAG named % in tenant %', quote_literal(dag_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN pgsched.dag_start_v1(target, 'manual', clock_timestamp(), dag_trigger_v1.params);
END $$;

-- Cancel a run: nodes not started are cancelled, pending executions end, running ones are
-- killed by their workers; the run ends 'cancelled' once the last one has stopped.
-- Returns 'cancelled', 'cancelling', 'failing' (fail_all was already stopping it: it
-- ends 'failed') or 'finished' (it had already ended; left as it was).
CREATE FUNCTION pgsched.dag_cancel_v1(run_id bigint, tenant text DEFAULT 'default') RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r pgsched.dag_run;
BEGIN
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
    PERFORM pgsched.dag_stop_v1(r.id, 'cancelled: the run was cancelled');
    SELECT * INTO r FROM pgsched.dag_run x WHERE x.id = r.id;
    IF r.remaining <= 0 THEN
        RETURN pgsched.dag_close_v1(r.id);
    END IF;
    RETURN r.state;
END $$;

-- Run a finished run again as a new run (trigger 'rerun', rerun_of the old one), with the
-- old run's graph and params. Nodes kept from the old run keep their state and result and
-- are not run again; the others run, with their current definition when the DAG still
-- has them. from_node: re-run that node; failed_only: re-run every node that failed, was
-- cancelled or upstream_failed; both: either; neither: every node; and always everything
-- downstream of a node that runs again. Returns the new run id.
CREATE FUNCTION pgsched.dag_rerun_v1(run_id bigint, from_node text DEFAULT NULL, failed_only boolean DEFAULT false,
                                     tenant text DEFAULT 'default') RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    old pgsched.dag_run;
    r pgsched.dag_run;
    rerun_nodes text[];
    keep_nodes text[];
BEGIN
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
    PERFORM pgsched.dag_enqueue_v1(r, ARRAY(
        SELECT n.node_id FROM pgsched.dag_node_run n
         WHERE n.run_id = r.id AND n.node_id = ANY(rerun_nodes) AND cardinality(n.upstream) = 0));
    PERFORM pgsched.dag_propagate_v1(r.id, keep_nodes, false);
    RETURN r.id;
END $$;

-- The scheduler leader's sweep (every second or so): live executions of runs that are
-- stopping (cancel or fail_all) which the stop could not take at the time (locked by a
-- worker that then retried them, or a claim in flight) are cancelled now. Returns how many.
CREATE FUNCTION pgsched.dag_sweep_v1() RETURNS integer LANGUAGE plpgsql AS $$
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
        PERFORM pgsched.dag_cancel_execution_v1(e, 'cancelled: the DAG run is stopping');
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

------------------------------------------------------------------------------------------
-- Functions of 0001/0002 that copy execution rows: now with dag_run_id; DAG tasks are not
-- enqueued as executions; DAG node executions are re-run through their run, not the DLQ.
------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgsched.finish_v1(e pgsched.execution, final_state text, why text)
RETURNS void LANGUAGE sql AS $$
    DELETE FROM pgsched.execution WHERE id = e.id;
    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
        trigger, priority, queue, params, idempotency_key, attempt, max_attempts, worker_id,
        leader_epoch, created_at, started_at, finished_at, error, lost_attempts, dag_run_id)
    VALUES (e.id, e.tenant, e.task_id, e.scheduled_at, e.run_at, final_state, e.trigger,
            e.priority, e.queue, e.params, e.idempotency_key, e.attempt, e.max_attempts,
            e.worker_id, e.leader_epoch, e.created_at, e.started_at, clock_timestamp(), why,
            e.lost_attempts, e.dag_run_id);
$$;

-- A DAG's own task starts runs, never executions: enqueue_v1 (and trigger_v1 and the
-- run_request INSERT, which call it) refuse it. As in 0002 otherwise.
CREATE OR REPLACE FUNCTION pgsched.enqueue_v1(
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

-- A dead node execution goes back through its DAG run (dag_rerun_v1 --failed-only), so
-- that its downstream nodes run too: dlq_retry_v1 refuses it, dlq_retry_all_v1 leaves it.
-- As in 0002 otherwise.
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
         WHERE x.tenant = h.tenant AND x.idempotency_key = h.idempotency_key;
        IF NOT FOUND THEN
            SELECT x.id INTO holder FROM pgsched.execution_history x
             WHERE x.tenant = h.tenant AND x.idempotency_key = h.idempotency_key AND x.state = 'succeeded'
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
    DELETE FROM pgsched.execution_history x WHERE x.id = h.id AND x.finished_at = h.finished_at;
    INSERT INTO pgsched.execution (id, tenant, task_id, scheduled_at, run_at, state, trigger,
        priority, queue, params, idempotency_key, attempt, max_attempts, leader_epoch,
        created_at, lost_attempts)
    VALUES (h.id, h.tenant, h.task_id, h.scheduled_at, now(), 'pending', h.trigger, h.priority,
            h.queue, h.params, h.idempotency_key, h.attempt, h.attempt + coalesce(max_tries, 1),
            h.leader_epoch, h.created_at, 0);
    RETURN h.id;
END $$;

CREATE OR REPLACE FUNCTION pgsched.dlq_retry_all_v1(task_name text DEFAULT NULL, tenant text DEFAULT 'default')
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    dead_id bigint;
BEGIN
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
