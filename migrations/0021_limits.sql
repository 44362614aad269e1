-- 0021: limits that hold across the fleet (issue 18): tenant quotas and a fair share across
-- tenants, concurrency caps per queue, task and key, rate limits, paused queues.
--
-- A worker's --concurrency was the only limit. Every limit here is decided where the claim
-- happens, in the claim's own statement (pgsched_internal.execution_claim_v1), so it holds
-- across any number of workers with no coordinator: the claim takes a transaction-scoped
-- advisory lock per tenant it takes work from (hashtextextended('pgsched.limits ' ||
-- tenant, 0)), so two claims for one tenant take turns, and the second counts what the
-- first committed (each statement of a plpgsql function in READ COMMITTED reads a snapshot
-- taken after the lock was granted; a transaction's commit is visible before its locks are
-- released). Claims for different tenants do not wait for each other; a claim passes over a
-- tenant whose lock another claim holds (pg_try_advisory_xact_lock) and waits for one only
-- when it could take nothing otherwise. What is running is counted from the rows (state
-- 'running' of pgsched.execution, buffered claims included), never from a counter that
-- every way out of 'running' would have to keep right.
--
-- Work over a limit waits in the queue, pending, and is never failed: pgsched_internal.
-- wait_reason_v1 says why a due execution waits. A limit that frees wakes the waiting work:
-- a claim that left due work behind for a limit records its tenant in limit_wait, and the
-- statement that moves a running execution to history (execution_limit_freed, a statement
-- trigger) then notifies that tenant's workers; a rate window's end is limit_wait.free_at,
-- which the worker's next-due question reads.

-- Tenant quotas (design brief, section 15). NULL: no limit. Soft: a tenant over a quota
-- waits, nothing fails. A tenant created from now on gets the brief's defaults (100 at
-- once, 10,000 starts an hour, 50,000 compute minutes a month, 100 GB of logs); the tenants
-- there are already, 'default' among them, keep running as they did, with none, until
-- `pgsched tenant quota set` gives them some: an upgrade must not start throttling a
-- fleet that ran 200 at once yesterday.
ALTER TABLE pgsched.tenant
    ADD COLUMN max_running integer CONSTRAINT tenant_max_running_check CHECK (max_running >= 0),
    ADD COLUMN max_starts_per_hour integer
        CONSTRAINT tenant_max_starts_per_hour_check CHECK (max_starts_per_hour >= 0),
    ADD COLUMN max_compute_minutes_per_month bigint
        CONSTRAINT tenant_max_compute_minutes_check CHECK (max_compute_minutes_per_month >= 0),
    ADD COLUMN max_log_bytes bigint CONSTRAINT tenant_max_log_bytes_check CHECK (max_log_bytes >= 0),
    ADD COLUMN weight integer NOT NULL DEFAULT 1
        CONSTRAINT tenant_weight_check CHECK (weight BETWEEN 1 AND 100);
ALTER TABLE pgsched.tenant
    ALTER COLUMN max_running SET DEFAULT 100,
    ALTER COLUMN max_starts_per_hour SET DEFAULT 10000,
    ALTER COLUMN max_compute_minutes_per_month SET DEFAULT 50000,
    ALTER COLUMN max_log_bytes SET DEFAULT 100000000000;
COMMENT ON COLUMN pgsched.tenant.max_running IS
    'executions of the tenant claimed at once, across every worker (NULL: no limit)';
COMMENT ON COLUMN pgsched.tenant.max_starts_per_hour IS
    'executions the tenant''s claims may start in one clock hour, UTC (NULL: no limit)';
COMMENT ON COLUMN pgsched.tenant.max_compute_minutes_per_month IS
    'handler minutes of the tenant''s finished attempts in one calendar month, UTC (NULL: no limit)';
COMMENT ON COLUMN pgsched.tenant.max_log_bytes IS
    'bytes of the tenant''s stored execution log lines (NULL: no limit)';
COMMENT ON COLUMN pgsched.tenant.weight IS
    'the tenant''s share of a claim against other tenants with ready work (1 to 100)';

-- What a tenant used: the claims count starts (hour_starts of hour_start), the leader's
-- usage job measures compute and log bytes and says which slow quota is exceeded (over).
-- Row-level security below lets a tenant's login read its row and write none: usage is
-- written by the claim (a definer function) and by the installation's scheduler.
CREATE TABLE pgsched.tenant_usage (
    tenant text PRIMARY KEY REFERENCES pgsched.tenant (name) ON DELETE CASCADE,
    hour_start timestamptz,
    hour_starts bigint NOT NULL DEFAULT 0,
    last_claim_at timestamptz,
    month_start timestamptz,
    compute_seconds double precision NOT NULL DEFAULT 0,
    log_bytes bigint NOT NULL DEFAULT 0,
    over text[] NOT NULL DEFAULT '{}',
    measured_at timestamptz,
    alerted text[] NOT NULL DEFAULT '{}'
);
COMMENT ON TABLE pgsched.tenant_usage IS
    'a tenant''s use against its quotas: starts this hour (claims), compute this month and '
    'log bytes (the leader''s usage job), the slow quotas exceeded (over)';
ALTER TABLE pgsched.tenant_usage ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON pgsched.tenant_usage FOR SELECT TO pgsched_engine
    USING (tenant = (SELECT pgsched_internal.session_tenant_v1()));
CREATE POLICY web_rows ON pgsched.tenant_usage FOR SELECT TO pgsched_web
    USING ((SELECT pgsched_internal.session_tenant_v1()) IN (tenant, '*'));
CREATE POLICY instance_rows ON pgsched.tenant_usage TO pgsched_instance USING (true) WITH CHECK (true);
INSERT INTO pgsched.tenant_usage (tenant) SELECT name FROM pgsched.tenant;

-- A queue is named within its tenant (0020) and exists without a row; a row sets its
-- limits or pauses it.
CREATE TABLE pgsched.queue (
    tenant text NOT NULL REFERENCES pgsched.tenant (name),
    name text NOT NULL CONSTRAINT queue_name_check CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$'),
    max_running integer CONSTRAINT queue_max_running_check CHECK (max_running >= 0),
    rate_limit integer CONSTRAINT queue_rate_limit_check CHECK (rate_limit >= 0),
    rate_period_seconds double precision CONSTRAINT queue_rate_period_check CHECK (rate_period_seconds > 0),
    paused_at timestamptz,
    paused_by text,
    pause_reason text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, name),
    CONSTRAINT queue_rate_both CHECK ((rate_limit IS NULL) = (rate_period_seconds IS NULL)),
    CONSTRAINT queue_pause_fields CHECK (paused_at IS NOT NULL OR (paused_by IS NULL AND pause_reason IS NULL))
);
COMMENT ON TABLE pgsched.queue IS
    'a queue''s limits across every worker (max_running; rate_limit starts per '
    'rate_period_seconds) and its pause; a queue with no row has none';

-- Task limits: executions of the task running at once, starts per period; and per key:
-- concurrency_key is a template rendered from each execution's params ("customer:{id}"),
-- a key is the tenant's (tasks with the same rendered key share it), and key_max_running /
-- key_rate_limit bound the executions of one key.
ALTER TABLE pgsched.task
    ADD COLUMN max_running integer CONSTRAINT task_max_running_check CHECK (max_running >= 0),
    ADD COLUMN rate_limit integer CONSTRAINT task_rate_limit_check CHECK (rate_limit >= 0),
    ADD COLUMN rate_period_seconds double precision CONSTRAINT task_rate_period_check CHECK (rate_period_seconds > 0),
    ADD COLUMN concurrency_key text CONSTRAINT task_concurrency_key_check
        CHECK (length(concurrency_key) BETWEEN 1 AND 200),
    ADD COLUMN key_max_running integer CONSTRAINT task_key_max_running_check CHECK (key_max_running >= 0),
    ADD COLUMN key_rate_limit integer CONSTRAINT task_key_rate_limit_check CHECK (key_rate_limit >= 0),
    ADD COLUMN key_rate_period_seconds double precision
        CONSTRAINT task_key_rate_period_check CHECK (key_rate_period_seconds > 0),
    ADD CONSTRAINT task_rate_both CHECK ((rate_limit IS NULL) = (rate_period_seconds IS NULL)),
    ADD CONSTRAINT task_key_rate_both CHECK ((key_rate_limit IS NULL) = (key_rate_period_seconds IS NULL)),
    ADD CONSTRAINT task_key_limits_need_key
        CHECK (concurrency_key IS NOT NULL OR (key_max_running IS NULL AND key_rate_limit IS NULL));

CREATE INDEX task_keyed_idx ON pgsched.task (id) WHERE concurrency_key IS NOT NULL;

ALTER TABLE pgsched.execution ADD COLUMN concurrency_key text;
-- execution_ready_queue_idx (0014: queue, priority, run_at, id of pending rows) is dropped:
-- every claim now reads a tenant's own fronts (claim_tenant_v1), and so does
-- execution_next_due, on execution_ready_tenant_idx. Kept beside it, the queue-first index
-- was the planner's choice for a tenant's front whenever the table's statistics were older
-- than a flood (its tenant a filter, so a claim for tenant b walked all of a's rows ahead of
-- b's: seconds a claim, under the tenant's lock, until ANALYZE; tests/db/test_claim_stale_plan.py).
-- One index fewer also spares every insert, claim and retry an entry.
DROP INDEX pgsched.execution_ready_queue_idx;
CREATE INDEX execution_running_idx ON pgsched.execution (tenant, queue, task_id) WHERE state = 'running';
CREATE INDEX execution_running_key_idx ON pgsched.execution (tenant, concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;

-- The starts of rate-limited scopes, for a sliding window: a claim counts those of the
-- last period (exact, under the tenant's lock) and drops the older ones.
CREATE TABLE pgsched.rate_start (
    tenant text NOT NULL,
    scope text NOT NULL CONSTRAINT rate_start_scope_check CHECK (scope IN ('queue', 'task', 'key')),
    name text NOT NULL,
    started_at timestamptz NOT NULL
);
CREATE INDEX rate_start_idx ON pgsched.rate_start (tenant, scope, name, started_at);
ALTER TABLE pgsched.rate_start ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON pgsched.rate_start FOR SELECT TO pgsched_engine
    USING (tenant = (SELECT pgsched_internal.session_tenant_v1()));
CREATE POLICY web_rows ON pgsched.rate_start FOR SELECT TO pgsched_web
    USING ((SELECT pgsched_internal.session_tenant_v1()) IN (tenant, '*'));
CREATE POLICY instance_rows ON pgsched.rate_start TO pgsched_instance USING (true) WITH CHECK (true);

-- Tenants whose due work a claim left waiting for a limit: a finish notifies their workers.
-- free_at: when the earliest rate window that held work back ends (NULL: none did).
CREATE TABLE pgsched.limit_wait (
    tenant text PRIMARY KEY,
    since timestamptz NOT NULL,
    free_at timestamptz
);
ALTER TABLE pgsched.limit_wait ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON pgsched.limit_wait FOR SELECT TO pgsched_engine
    USING (tenant = (SELECT pgsched_internal.session_tenant_v1()));
CREATE POLICY web_rows ON pgsched.limit_wait FOR SELECT TO pgsched_web
    USING ((SELECT pgsched_internal.session_tenant_v1()) IN (tenant, '*'));
CREATE POLICY instance_rows ON pgsched.limit_wait TO pgsched_instance USING (true) WITH CHECK (true);

-- A tenant registered by its first task (tenant_register_v1) gets its usage row.
CREATE FUNCTION pgsched_internal.tenant_usage_row_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    INSERT INTO pgsched.tenant_usage (tenant) SELECT n.name FROM new_tenants n ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER tenant_usage_row AFTER INSERT ON pgsched.tenant
    REFERENCING NEW TABLE AS new_tenants FOR EACH STATEMENT
    EXECUTE FUNCTION pgsched_internal.tenant_usage_row_v1();

-- The key of an execution of a task whose concurrency_key is template: each {name} is
-- replaced by params->>name ('' when params has no such key); other text is kept.
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

-- Every way in (the scheduler's fires, the SQL API, a raw INSERT, a DAG's nodes) renders
-- the key, for the tasks that have one: the other rows cost the join the insert trigger
-- makes anyway.
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
CREATE TRIGGER execution_keyed AFTER INSERT ON pgsched.execution
    REFERENCING NEW TABLE AS new_executions FOR EACH STATEMENT
    EXECUTE FUNCTION pgsched_internal.execution_keyed_v1();

-- A running execution that leaves (to history) frees its limits: the workers of a tenant
-- with work waiting for one are woken. Once per statement (a group commit of many).
CREATE FUNCTION pgsched_internal.execution_limit_freed_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF EXISTS (SELECT FROM pgsched.limit_wait) THEN
        PERFORM pg_notify('pgsched_execution', w.tenant) FROM pgsched.limit_wait w;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER execution_limit_freed AFTER DELETE ON pgsched.execution
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.execution_limit_freed_v1();

-- How much of one limit's scope is used now, for the claim (under the tenant's lock):
-- running executions (kind 'queue_running', 'task_running', 'key_running'; buffered claims
-- count) or starts in the sliding window of period seconds ending at `at` ('queue_rate',
-- 'task_rate', 'key_rate'; older starts are dropped first). name: the queue, the task's id,
-- the key.
CREATE FUNCTION pgsched_internal.limit_used_v1(t text, kind text, name text, period double precision,
                                              at timestamptz) RETURNS bigint
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

-- When a rate window that is full frees a start: its oldest start leaves the window.
CREATE FUNCTION pgsched_internal.limit_frees_at_v1(t text, kind text, name text, period double precision,
                                                  at timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(min(r.started_at), at) + make_interval(secs => period)
      FROM pgsched.rate_start r
     WHERE r.tenant = t AND r.scope = split_part(kind, '_', 1) AND r.name = limit_frees_at_v1.name
       AND r.started_at > at - make_interval(secs => period);
$$;

-- One tenant's share of a claim, under its lock: up to lim ready executions of queues,
-- in (priority, run_at, id) order, that every limit lets start now (greedy: a row a limit
-- holds back is passed over, and the rows behind it are taken). picks: their ids in that
-- order; waited: due work was left for a limit (not for lim); free_at: the earliest end of
-- a time window that held work back (a rate window, the quota's hour); weight: the
-- tenant's. A task or key found at its limit is left out of the next read of the fronts
-- (at most three reads), so that rows behind a front of held-back ones are reached.
CREATE FUNCTION pgsched_internal.claim_tenant_v1(
    t text, queues text[], lim integer, at timestamptz,
    OUT picks bigint[], OUT waited boolean, OUT free_at timestamptz, OUT weight integer)
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
                   k.max_running AS t_max, k.rate_limit AS t_rate, k.rate_period_seconds AS t_period,
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

-- The claim (sql/execution.sql execution_claim calls it): up to p_limit ready executions of
-- p_queues for worker p_worker_id, of the tenants p_tenants (NULL: every tenant), every
-- limit held (claim_tenant_v1), shared across tenants: each tenant's picks are ranked
-- within it (priority, run_at, id), and the claim takes them by rank over weight, the tenant
-- served least recently first at equal rank, so a tenant's backlog delays another's next
-- run by at most one claim. Returned in that order, the order to start them in.
-- A definer: it writes the tenants' usage, which their logins may only read; a login of a
-- tenant claims for that tenant alone and for a worker registered for it (as row-level
-- security lets it), an installation-wide one (pgsched_instance, the owner) for any.
CREATE FUNCTION pgsched_internal.execution_claim_v1(
    p_worker_id bigint, p_queues text[], p_tenants text[], p_limit integer, p_now timestamptz,
    p_known_task_ids bigint[], p_known_task_versions bigint[])
    RETURNS TABLE (id bigint, tenant text, task_id bigint, scheduled_at timestamptz, run_at timestamptz,
                   priority smallint, attempt integer, max_attempts integer, params text,
                   started_at timestamptz, trigger text, lease_id bigint,
                   cancel_requested_at timestamptz, dag_run_id bigint, confirm_start boolean,
                   backoff_from_attempt integer, task_version bigint, task jsonb)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    -- plpgsql keeps a generic plan of each statement per connection after five calls, and
    -- one made while the table held a row or two (a worker's first claims) stays until an
    -- ANALYZE: with a seq scan, or the move to running walking the whole ready index once
    -- per row it moved, it cost 0.7-1.5 s a claim under a flood, holding the tenant's lock
    -- (the fairness benchmark; tests/db/test_claim_stale_plan.py). Each statement of the
    -- claim has an index to read (this function's and claim_tenant_v1's, which inherits
    -- the setting), and the move to running has only the primary key (below).
    SET enable_seqscan = off
    AS $$
#variable_conflict use_column
DECLARE
    -- the claim's instant: p_now is the installation's own (tests, benchmarks); a tenant's
    -- login claims at the database's now(), so it cannot move its hourly quota's window
    at timestamptz := CASE WHEN pgsched_internal.is_instance_v1() THEN coalesce(p_now, now()) ELSE now() END;
    served text[];
    own text;
    cands text[];
    t text;
    share record;
    place int := 0;
    pick_id bigint[] := '{}';
    pick_rank real[] := '{}';
    pick_place int[] := '{}';
    wait_t text[] := '{}';
    wait_free timestamptz[] := '{}';
    done_t text[] := '{}';
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
    -- the tenants with due work in these queues, the least recently served first; for every
    -- tenant, those with anything pending found by a walk of execution_ready_tenant_idx
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
    SELECT coalesce(array_agg(s.tenant ORDER BY u.last_claim_at NULLS FIRST, s.tenant), '{}') INTO cands
      FROM unnest(served) AS s(tenant)
      LEFT JOIN pgsched.tenant_usage u ON u.tenant = s.tenant
     WHERE EXISTS (SELECT FROM unnest(p_queues) AS q(queue) CROSS JOIN generate_series(1, 10) AS p(priority)
                    CROSS JOIN LATERAL (  -- one descent per front (a semi-join would scan them all)
                          SELECT FROM pgsched.execution e
                           WHERE e.state = 'pending' AND e.tenant = s.tenant AND e.queue = q.queue
                             AND e.priority = p.priority AND e.run_at <= at
                           ORDER BY e.run_at  -- the index's order: LIMIT 1 alone made a seq scan look cheap
                           LIMIT 1) due);
    -- a tenant whose lock another claim holds is being served by it: passed over, and waited
    -- for only when no other could be taken
    FOREACH t IN ARRAY cands LOOP
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended('pgsched.limits ' || t, 0));
        done_t := done_t || t;
    END LOOP;
    IF done_t = '{}' AND cands <> '{}' THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('pgsched.limits ' || cands[1], 0));
        done_t := ARRAY[cands[1]];
    END IF;
    -- the statements from here read snapshots taken after the locks were granted
    FOREACH t IN ARRAY done_t LOOP
        place := place + 1;
        share := pgsched_internal.claim_tenant_v1(t, p_queues, p_limit, at);
        pick_id := pick_id || share.picks;
        pick_rank := pick_rank || ARRAY(SELECT r::real / share.weight
                                          FROM generate_series(1, cardinality(share.picks)) AS r);
        pick_place := pick_place || array_fill(place, ARRAY[cardinality(share.picks)]);
        IF share.waited THEN
            wait_t := wait_t || t;
            wait_free := wait_free || share.free_at;
        END IF;
    END LOOP;
    -- who waits for a limit: a finish wakes their workers (execution_limit_freed)
    IF wait_t <> '{}' THEN
        INSERT INTO pgsched.limit_wait AS w (tenant, since, free_at)
        SELECT u.t, at, u.f FROM unnest(wait_t, wait_free) AS u(t, f)
        ON CONFLICT (tenant) DO UPDATE SET free_at = EXCLUDED.free_at
         WHERE w.free_at IS DISTINCT FROM EXCLUDED.free_at;
    END IF;
    IF EXISTS (SELECT FROM pgsched.limit_wait w WHERE w.tenant = ANY (done_t) AND NOT w.tenant = ANY (wait_t)) THEN
        DELETE FROM pgsched.limit_wait w WHERE w.tenant = ANY (done_t) AND NOT w.tenant = ANY (wait_t);
    END IF;
    IF pick_id = '{}' THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH picked AS MATERIALIZED (
        SELECT u.id, u.rank, u.place FROM unnest(pick_id, pick_rank, pick_place) AS u(id, rank, place)
         ORDER BY u.rank, u.place, u.id
         LIMIT p_limit
    ), claimed AS (
        UPDATE pgsched.execution e
           SET state = 'running', attempt = e.attempt + 1, worker_id = p_worker_id,
               started_at = at, lease_id = nextval('pgsched.lease_id_seq'),
               budget_delay_seconds = NULL, start_confirmed_at = NULL
          FROM picked
         WHERE e.id = picked.id
           -- the rows reached by their ids as a list, so that every plan reads the primary
           -- key for them: joined to picked alone, a plan made on a near-empty table read an
           -- index whole and matched each entry against the picks (no state test either,
           -- which let it take the partial index of pending rows: each picked row is pending
           -- and locked by this transaction, claim_tenant_v1 read it FOR UPDATE)
           AND e.id = ANY (pick_id)
           AND EXISTS (SELECT 1 FROM pgsched.worker w WHERE w.id = p_worker_id AND w.state = 'running')
        RETURNING e.id, e.tenant, e.task_id, e.queue, e.concurrency_key, e.scheduled_at, e.run_at,
                  e.priority, e.attempt, e.max_attempts,
                  CASE WHEN jsonb_typeof(e.params) = 'object' THEN e.params::text ELSE '{}' END AS params,
                  e.started_at, e.trigger, e.lease_id, e.cancel_requested_at, e.dag_run_id,
                  e.confirm_start, e.backoff_from_attempt, picked.rank, picked.place
    ), counted AS (
        INSERT INTO pgsched.tenant_usage AS u (tenant, hour_start, hour_starts, last_claim_at)
        SELECT c.tenant, date_trunc('hour', at, 'UTC'), count(*), at FROM claimed c GROUP BY c.tenant
        ON CONFLICT (tenant) DO UPDATE
           SET hour_starts = CASE WHEN u.hour_start = EXCLUDED.hour_start
                                  THEN u.hour_starts + EXCLUDED.hour_starts ELSE EXCLUDED.hour_starts END,
               hour_start = EXCLUDED.hour_start, last_claim_at = EXCLUDED.last_claim_at
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
    SELECT c.id, c.tenant, c.task_id, c.scheduled_at, c.run_at, c.priority, c.attempt, c.max_attempts,
           c.params, c.started_at, c.trigger, c.lease_id, c.cancel_requested_at, c.dag_run_id,
           c.confirm_start, c.backoff_from_attempt, t.xmin::text::bigint AS task_version,
           CASE WHEN k.task_id IS NULL THEN jsonb_build_object(
               'task_name', t.name, 'handler_kind', t.handler_kind, 'command', t.command, 'argv', t.argv,
               'python_target', t.python_target, 'env', t.env, 'stdin', t.stdin,
               'timeout_seconds', t.timeout_seconds, 'retry_policy', t.retry_policy,
               'retry_base_seconds', t.retry_base_seconds, 'retry_max_seconds', t.retry_max_seconds,
               'no_retry_exit_codes', t.no_retry_exit_codes, 'no_retry_exceptions', t.no_retry_exceptions)
           END AS task
      FROM claimed c
      JOIN pgsched.task t ON t.id = c.task_id
      LEFT JOIN unnest(p_known_task_ids, p_known_task_versions) AS k(task_id, version)
             ON k.task_id = c.task_id AND k.version = t.xmin::text::bigint
     ORDER BY c.rank, c.place, c.id;
END $$;
COMMENT ON FUNCTION pgsched_internal.execution_claim_v1(bigint, text[], text[], integer, timestamptz, bigint[], bigint[]) IS
    'claims ready executions for a worker, every limit held and shared fairly across tenants (migration 0021)';

-- Why a pending execution that is due has not started, when a limit holds it: the first
-- limit found of its tenant's quotas, its queue's pause and limits, its task's and its
-- key's; NULL when none holds it (it waits for a free worker slot, or is not due).
-- For `pgsched execution show`, the web's execution pages and the API.
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

-- 0018's secure_v1 with one more definer function every engine login may call: the claim,
-- which checks itself for whom its caller may claim.
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
                                      'caller_trigger_v1', 'execution_claim_v1')
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
