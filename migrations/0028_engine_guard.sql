-- 0028: a tenant's engine login cannot get past the limits by writing rows itself (issue
-- 18, the attack on the limits: findings 1, 6, 11 and 12; docs/security.md).
--
-- The limits are held by definer functions: the claim (execution_claim_v1, 0021) counts
-- the tenant's quotas and every queue, task and key limit as it moves rows to running; the
-- enqueue (enqueue_v2 and the rest, 0022) checks the unique windows. A tenant's engine
-- login keeps the table rights its worker needs on pgsched.execution (the finish, the
-- retry, the hand-back, the start confirmation, a DAG's next nodes), and with them could
-- do the claim's and the enqueue's part itself. Here:
--
-- * execution_guard_update / execution_guard_insert (row triggers, BEFORE): a caller that
--   is neither the owner (inside a definer function current_user is pgsched_owner, and the
--   WHEN clause stops there at the cost of a name comparison) nor the installation
--   (is_instance_v1) may not move a row to running, insert one running, change what the
--   claim wrote on a running row (started_at, attempt, lease_id) or what the limits count
--   it under (queue, task_id, concurrency_key), move any row to another task, or unmark a
--   windowed one: insufficient_privilege, naming what to call instead. Its INSERT of a
--   pending execution of a task with a unique window or overlap policy is checked as the
--   enqueue checks it (window_check_v1, under the window's locks): held back, it is refused
--   with unique_violation naming the execution that holds the window (and a unique period
--   starts with it: execution_guard_period). The worker's updates (sql/execution.sql)
--   change none of these and never reach the function; its inserts (a DAG's next nodes,
--   at its upstream's finish) cost a look at task_windowed_idx, and so do the scheduler's.
-- * Compute is counted from the database's clock, not from the attempt times the tenant's
--   worker reports: from the row's started_at (the claim's now(), which the guard keeps
--   the claim's) to the statement_timestamp() of the statement that moves the row out of
--   running (a finish, a retry, a hand-back, the leader's rescue). The finish's DELETE
--   appends one usage_delta row per tenant per statement (usage_left_v1, a
--   statement trigger); the moves back to pending (rare: a retry, a rescue, a stopping
--   worker's hand-back) one per row. The attempts trigger of 0025 is dropped.
-- * pgsched.tenant (its quotas and weight, 0021) is under row-level security: a tenant's
--   logins read its own row, the web the tenant its transaction set ('*': all), the
--   installation every row.

-- What a caller that is neither the owner nor the installation may not change on a row.
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
COMMENT ON FUNCTION pgsched_internal.execution_guard_v1() IS
    'refuses a tenant''s login what only the claim and the enqueue may write on an execution (migration 0028)';

CREATE TRIGGER execution_guard_insert BEFORE INSERT ON pgsched.execution
    FOR EACH ROW WHEN (current_user <> 'pgsched_owner')
    EXECUTE FUNCTION pgsched_internal.execution_guard_v1();
CREATE TRIGGER execution_guard_update BEFORE UPDATE ON pgsched.execution
    FOR EACH ROW WHEN (current_user <> 'pgsched_owner' AND (
        (NEW.state = 'running' AND (OLD.state <> 'running'
                                    OR NEW.started_at IS DISTINCT FROM OLD.started_at
                                    OR NEW.attempt <> OLD.attempt
                                    OR NEW.lease_id IS DISTINCT FROM OLD.lease_id
                                    OR NEW.queue <> OLD.queue
                                    OR NEW.concurrency_key IS DISTINCT FROM OLD.concurrency_key))
        OR NEW.task_id <> OLD.task_id
        OR (OLD.windowed AND NOT NEW.windowed)))
    EXECUTE FUNCTION pgsched_internal.execution_guard_v1();

-- A raw INSERT of a task with a unique period starts the period, once the row is there (the
-- period's row names it: row-level security checks that it exists), still under the
-- window's lock the guard took. A second row of the same statement within the period
-- passed the guard before the first's period was written: refused here.
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
CREATE TRIGGER execution_guard_period AFTER INSERT ON pgsched.execution
    FOR EACH ROW WHEN (current_user <> 'pgsched_owner' AND NEW.windowed AND NEW.state = 'pending')
    EXECUTE FUNCTION pgsched_internal.execution_guard_period_v1();

-- Compute, by the database's clock: a running row's time from its claim to the statement
-- that moves it out of running. Definer functions: a tenant's login cannot write
-- usage_delta (0025).
CREATE FUNCTION pgsched_internal.usage_left_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
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
CREATE TRIGGER usage_left AFTER DELETE ON pgsched.execution
    REFERENCING OLD TABLE AS old_executions FOR EACH STATEMENT
    EXECUTE FUNCTION pgsched_internal.usage_left_v1();

CREATE FUNCTION pgsched_internal.usage_requeued_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    INSERT INTO pgsched.usage_delta (tenant, month_start, compute_seconds)
    VALUES (OLD.tenant, date_trunc('month', statement_timestamp(), 'UTC'),
            greatest(extract(epoch FROM statement_timestamp() - OLD.started_at), 0));
    RETURN NULL;
END $$;
CREATE TRIGGER usage_requeued AFTER UPDATE ON pgsched.execution
    FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state <> 'running' AND OLD.started_at IS NOT NULL)
    EXECUTE FUNCTION pgsched_internal.usage_requeued_v1();

DROP TRIGGER usage_attempts ON pgsched.execution_attempt;
DROP FUNCTION pgsched_internal.usage_attempts_v1();

-- The tenants' quotas are each tenant's own to read. secure_v1 keeps SELECT for the engine
-- and the web on the table (the tenant map) and adds instance_rows for a table under
-- row-level security; the owner (the definer functions: the claim, tenant_usage_v1, the
-- quota setters) and foreign keys are not held by it.
ALTER TABLE pgsched.tenant ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON pgsched.tenant FOR SELECT TO pgsched_engine
    USING (name = (SELECT pgsched_internal.session_tenant_v1()));
CREATE POLICY web_rows ON pgsched.tenant FOR SELECT TO pgsched_web
    USING ((SELECT pgsched_internal.session_tenant_v1()) IN (name, '*'));
CREATE POLICY instance_rows ON pgsched.tenant TO pgsched_instance USING (true) WITH CHECK (true);

-- The guard's window check runs as the tenant's own login (its task read under row-level
-- security, so a row naming another tenant's task takes no lock of that tenant's), but the
-- window's advisory keys are the installation's (internal_key_v1, 0027, which no tenant's
-- login may call): this definer takes a window lock for the caller's own tenant only, and
-- window_check_v1 takes its locks through it, on every path (the enqueue functions, the
-- guard).
CREATE FUNCTION pgsched_internal.window_lock_v1(tenant text, what text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1(
        'window', pgsched_internal.caller_tenant_v1(window_lock_v1.tenant) || ' ' || window_lock_v1.what));
END $$;
COMMENT ON FUNCTION pgsched_internal.window_lock_v1(text, text) IS
    'a unique window''s or overlap policy''s lock of the caller''s tenant, to the end of the transaction (0028)';

-- 0027's window_check_v1, its locks taken through window_lock_v1.
CREATE OR REPLACE FUNCTION pgsched_internal.window_check_v1(t pgsched.task, run_params jsonb, how text,
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

-- 0027's secure_v1, window_lock_v1 among the definer functions every login may call.
CREATE OR REPLACE FUNCTION pgsched_internal.secure_v1() RETURNS void
    LANGUAGE plpgsql
    AS $secure$
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
                                      'window_lock_v1')
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
END $secure$;

SELECT pgsched_internal.secure_v1();
