-- 0038: progress and results for Python applications (issue 20, item 3; docs/observability.md,
-- "Progress and waiting for a result").
--
-- A running Python handler reports how far it is (ctx.progress(0.4, 'step 2 of 5')); the
-- worker stores the latest report on the execution (progress, progress_message, progress_at,
-- the database's time of the write), at most a few writes a second per execution (it
-- coalesces), and execution_finish carries it into history. execution_all shows it to
-- `execution show`, the API and the web page.
--
-- An application waits for an execution's end (App.wait) with LISTEN pgsched_execution_done:
-- every statement that moves executions into history (a worker's finish, a cancel, a rescue
-- out of attempts) sends one notification, its payload the ids it finished, comma-separated
-- ('*' when they do not fit in one payload). A waiter then reads its execution through
-- execution_v3, which shows a login only its own tenant's executions; the payload names ids
-- and nothing else (anyone may LISTEN on any channel in PostgreSQL).

ALTER TABLE pgsched.execution
    ADD COLUMN progress double precision CHECK (progress >= 0 AND progress <= 1),
    ADD COLUMN progress_message text CHECK (length(progress_message) <= 500),
    ADD COLUMN progress_at timestamptz;

ALTER TABLE pgsched.execution_history
    ADD COLUMN progress double precision,
    ADD COLUMN progress_message text,
    ADD COLUMN progress_at timestamptz;

-- the view gains the three columns at its end (CREATE OR REPLACE VIEW may only append); its
-- tenant scoping as 0018 set it (security_invoker, or the filter before PostgreSQL 15)
DO $view$
DECLARE
    body text := $body$
 SELECT execution.id, execution.tenant, execution.task_id, execution.scheduled_at,
    execution.run_at, execution.state, execution.trigger, execution.priority, execution.queue,
    execution.params, execution.idempotency_key, execution.attempt, execution.max_attempts,
    execution.worker_id, execution.leader_epoch, execution.created_at, execution.started_at,
    NULL::timestamp with time zone AS finished_at, NULL::integer AS exit_code,
    NULL::text AS error, NULL::jsonb AS result, execution.lost_attempts,
    execution.cancel_requested_at, execution.budget_delay_seconds, execution.dag_run_id,
    execution.progress, execution.progress_message, execution.progress_at
   FROM pgsched.execution
UNION ALL
 SELECT h.id, h.tenant, h.task_id, h.scheduled_at, h.run_at, h.state, h.trigger, h.priority,
    h.queue, h.params, h.idempotency_key, h.attempt, h.max_attempts, h.worker_id,
    h.leader_epoch, h.created_at, h.started_at, h.finished_at, h.exit_code, h.error, h.result,
    h.lost_attempts, NULL::timestamp with time zone AS cancel_requested_at,
    NULL::double precision AS budget_delay_seconds, h.dag_run_id,
    h.progress, h.progress_message, h.progress_at
   FROM pgsched.execution_history h
$body$;
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        EXECUTE 'CREATE OR REPLACE VIEW pgsched.execution_all WITH (security_invoker = true) AS '
                || body;
    ELSE
        EXECUTE format('CREATE OR REPLACE VIEW pgsched.execution_all WITH (security_barrier) AS '
                       'SELECT * FROM (%s) v WHERE pgsched_internal.is_instance_v1() '
                       'OR (SELECT pgsched_internal.session_tenant_v1()) IN (v.tenant, ''*'')',
                       body);
    END IF;
END $view$;

-- One notification per statement that finishes executions (not one per row: DESIGN, "NOTIFY").
CREATE FUNCTION pgsched_internal.execution_done_notify_v1() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pgsched, pg_temp
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

CREATE TRIGGER execution_done_notify AFTER INSERT ON pgsched.execution_history
    REFERENCING NEW TABLE AS finished FOR EACH STATEMENT
    EXECUTE FUNCTION pgsched_internal.execution_done_notify_v1();

-- One execution of the caller's tenant as an application waiting for it sees it: execution_v2
-- and its progress. Raises no_data_found (P0002) for an id the tenant has not.
CREATE FUNCTION pgsched.execution_v3(execution_id bigint, tenant text DEFAULT NULL)
    RETURNS TABLE(id bigint, task text, state text, trigger text, attempt integer,
                  scheduled_at timestamptz, run_at timestamptz, started_at timestamptz,
                  finished_at timestamptz, exit_code integer, error text, result jsonb,
                  params jsonb, progress double precision, progress_message text,
                  progress_at timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pgsched, pg_temp
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

SELECT pgsched_internal.secure_v1();
