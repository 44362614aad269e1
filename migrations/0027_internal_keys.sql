-- 0027: no advisory key pgsched relies on is computable by a tenant's login (issue 18, the
-- attack's findings 2 and 5; docs/security.md, "Advisory keys").
--
-- PostgreSQL lets any login call pg_advisory_lock on any bigint key. pgsched's own keys
-- were constants or unseeded hashes ('pgsched.usage', 'pgsched.window ' || tenant || ...),
-- so a tenant's login could hold the key of the leader, of the term fence, of the usage
-- and alert jobs, of another tenant's task windows and DAG applies, and stall them (or,
-- through the scheduler's tick, every tenant's schedules). From here every such key is
--
--     hashtextextended('pgsched.internal ' || purpose || ' ' || name, seed)
--
-- with 0023's secret seed (lock_seed, read by pgsched_owner alone): internal_key_v1, a
-- definer function that only the installation may call (pgsched_instance and the owner;
-- secure_v1 gives a definer function of pgsched_internal to no engine or web login unless
-- it names it). Another prefix than the tenants' named locks ('pgsched.lock '), one purpose
-- per key: the retry budget and the term fence shared 0x7067736368656403 until now.
--
--   purpose        name                         taken by
--   leader         ''                           the leader's session (scheduler_try_lock)
--   term           ''                           every write under a term, shared; an election
--   usage          ''                           the leader's usage job (sql/usage.sql)
--   alert          ''                           alert detection (sql/alert.sql)
--   rollup         ''                           the hourly roll-up (stats_rollup_v1)
--   retry budget   the caller's tenant, or ''   retry_slot_v1, through retry_budget_lock_v1
--   window         tenant task id | tenant key  window_check_v1, window_try_lock_v1
--   dag            tenant name                  a DAG's apply (dag_lock_v1)
--
-- A login of a tenant takes the last three only for its own tenant, through definer
-- functions that check it (caller_tenant_v1) and never return a key. The web and the CLI
-- ask who holds the leader lock through leader_sessions_v1 (pids, no key). What a login
-- can still see: pg_locks lists the keys held at the moment (docs/security.md says what
-- that allows). The migrator's key stays a constant (it is taken before any table exists).
--
-- The scheduler's tick never waits for a window lock (finding 2): an application that
-- enqueues a `unique` task inside its own long transaction holds that task's window lock
-- until it commits, and the tick fires every tenant's schedules in one transaction.
-- fire_windowed_v2 tries each task's window locks; a task whose lock is busy is left, its
-- fires not made and (scheduler_advance) its next fire time not moved, for a later tick.

-- The key of one of pgsched's own advisory locks (see above). purpose: one of the list.
CREATE FUNCTION pgsched_internal.internal_key_v1(purpose text, name text DEFAULT '') RETURNS bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pgsched, pg_temp
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
COMMENT ON FUNCTION pgsched_internal.internal_key_v1(text, text) IS
    'the advisory key of one of pgsched''s own locks, from the secret lock_seed: the installation''s alone (0027)';

-- The sessions holding the leader lock in this database (none or one): for pages and the
-- CLI (scheduler_leader), the failover (api_scheduler_failover) and a standby's check of a
-- hung leader, without the key. pg_locks: bigint keys as classid and objid, objsubid 1.
CREATE FUNCTION pgsched_internal.leader_sessions_v1() RETURNS SETOF integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
    SELECT l.pid FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
       -- pg_locks lists every database's locks: never another install's leader
       AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND ((l.classid::bigint << 32) | l.objid::bigint) = pgsched_internal.internal_key_v1('leader');
$$;
COMMENT ON FUNCTION pgsched_internal.leader_sessions_v1() IS
    'the pids of the sessions holding the leader lock in this database (0027)';

-- A DAG apply's lock, for the tenant the caller may act for (a first apply has no row to
-- lock yet): held to the end of the transaction.
CREATE FUNCTION pgsched_internal.dag_lock_v1(tenant text, name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1(
        'dag', pgsched_internal.caller_tenant_v1(dag_lock_v1.tenant) || ' ' || dag_lock_v1.name));
END $$;
COMMENT ON FUNCTION pgsched_internal.dag_lock_v1(text, text) IS
    'serialises applies of one DAG of the caller''s tenant, to the end of the transaction (0027)';

-- The retry budget's lock (retry_slot_v1), to the end of the transaction: one per tenant
-- for a tenant's login, which counts its own tenant's attempts (row-level security), and
-- one for the installation's logins, which count every tenant's. So a tenant's login that
-- holds it stalls no other tenant's retries.
CREATE FUNCTION pgsched_internal.retry_budget_lock_v1() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1(
        'retry budget', CASE WHEN pgsched_internal.is_instance_v1() THEN ''
                             ELSE coalesce(pgsched_internal.session_tenant_v1(), '') END));
END $$;
COMMENT ON FUNCTION pgsched_internal.retry_budget_lock_v1() IS
    'the retry budget''s lock, per tenant of the caller, to the end of the transaction (0027)';

-- The scheduler's try of a windowed task's locks (the ones window_check_v1 takes, in the
-- same order): true when held now (to the end of the transaction), false when one is busy
-- (an enqueue of the task, or of its key, in a transaction not yet ended).
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

-- 0022's window_check_v1 with its locks under internal keys.
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
        PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1('window', t.tenant || ' task ' || t.id));
    END IF;
    IF t.unique_scope = 'key' THEN
        PERFORM pg_advisory_xact_lock(pgsched_internal.internal_key_v1('window', t.tenant || ' key ' || key));
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

-- 0022's fire_windowed_v1 that never waits for a window lock: a task whose window lock is
-- busy (window_try_lock_v1) has none of its fires made or recorded here; its id is in busy,
-- and the tick leaves its next fire time where it is (scheduler_advance), so a later tick
-- fires it, once (unique (task_id, scheduled_at), last_fire_at). made: the executions made.
DROP FUNCTION pgsched_internal.fire_windowed_v1(bigint[], timestamptz[], bigint);
CREATE FUNCTION pgsched_internal.fire_windowed_v2(task_ids bigint[], fire_ats timestamptz[], epoch bigint,
                                                  OUT made integer, OUT busy bigint[])
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
COMMENT ON FUNCTION pgsched_internal.fire_windowed_v2(bigint[], timestamptz[], bigint) IS
    'the scheduler''s fires of windowed tasks, never waiting for a window lock: busy, the tasks left for a later tick (0027)';

-- 0006's roll-up (0017 moved it) with its lock under an internal key.
CREATE OR REPLACE FUNCTION pgsched_internal.stats_rollup_v1(keep_hours integer DEFAULT 48) RETURNS integer
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


-- 0002's retry budget (0017 moved it) with its lock per tenant, under an internal key.
CREATE OR REPLACE FUNCTION pgsched_internal.retry_slot_v1(proposed_at timestamp with time zone) RETURNS timestamp with time zone
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



-- 0021's secure_v1 with the definer functions of this migration that engine and web
-- logins call (internal_key_v1 is not among them: the installation's alone).
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
                                      'dag_lock_v1', 'retry_budget_lock_v1', 'leader_sessions_v1')
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
COMMENT ON FUNCTION pgsched_internal.secure_v1() IS
    'gives pgsched_owner every object and sets the grants and row-level security (migrations 0018, 0021, 0027)';

SELECT pgsched_internal.secure_v1();
