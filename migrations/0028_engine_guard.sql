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
    IF TG_OP = 'INSERT' THEN
        IF NEW.state = 'pending' THEN
            -- an enqueue's own window: only a windowed task's rows made outside the enqueue
            -- (a raw INSERT); a DAG's next node, made by dag_enqueue_v1 as the worker's
            -- login when its upstream finishes, is its run's waiting node
            SELECT * INTO t FROM pgsched.task k WHERE k.id = NEW.task_id AND k.windowed;
            IF NOT FOUND OR pgsched_internal.is_instance_v1() THEN
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
    IF pgsched_internal.is_instance_v1() THEN
        RETURN NEW;
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

SELECT pgsched_internal.secure_v1();
