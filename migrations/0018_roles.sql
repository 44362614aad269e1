-- 0018: tenants isolated by PostgreSQL itself (issue 17; docs/security.md).
--
-- Before this migration every role that could reach pgsched could read and change every
-- tenant's rows: the tenant was a column the web layer filtered on. From here the
-- database decides:
--
--   group role         what its members may do
--   pgsched_owner      owns every object of pgsched and pgsched_internal; only
--                      `pgsched migrate` logs in as a member of it
--   pgsched_engine     the scheduler and workers: the tenants' tables under row-level
--                      security, reads of the installation's own; not the web's credentials
--   pgsched_web        the web admin: the tables and its credentials, under row-level
--                      security by the tenant it sets per transaction (pgsched.tenant)
--   pgsched_app        applications: the public SQL API and INSERT INTO run_request only,
--                      no table at all; always in the tenant of the login
--   pgsched_instance   a member (with engine or web) sees every tenant and keeps the
--                      installation's own tables, sequences and maintenance: operators of
--                      the whole installation (the scheduler's login)
--
-- The tenant of a session is that of its login role (session_user) in pgsched.tenant_role,
-- the map `pgsched tenant create NAME --login ROLE` writes; a login in no tenant that is a
-- member of pgsched_web has the tenant its transaction set (set_config('pgsched.tenant',
-- T, true); '*' for every tenant); any other login has none and sees no tenant's rows.
-- A superuser, a member of pgsched_owner and a member of pgsched_instance see everything,
-- as every role did before: an installation that runs everything as one role keeps
-- working unchanged.
--
-- The public functions become SECURITY DEFINER (they run as pgsched_owner, which row-level
-- security does not restrict) with search_path pinned to pg_catalog, pgsched, pg_temp
-- (pg_temp last, so that a temporary table cannot stand in for one of ours: PostgreSQL
-- manual, CREATE FUNCTION, "Writing SECURITY DEFINER Functions Safely"). Each resolves its
-- tenant argument first: a login mapped to tenant A gets A whatever it passes (passing
-- another tenant is refused with insufficient_privilege, 42501), and the argument's default
-- is now NULL, "the caller's tenant". Applications may enqueue only with the triggers api,
-- manual and insert; schedule and dag are the engine's.
--
-- Roles are cluster-wide: the first database of a cluster to run this migration makes
-- them; a migrating role without CREATEROLE gets an error that says which statement a
-- superuser can run first.

DO $roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['pgsched_owner', 'pgsched_engine', 'pgsched_web', 'pgsched_app',
                             'pgsched_instance'] LOOP
        CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r);
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL;  -- made at this instant by the migration of another database of the cluster
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'migration 0018: % may not create the group role %', current_user, r
                    USING ERRCODE = 'insufficient_privilege',
                          HINT = 'as a superuser run: CREATE ROLE pgsched_owner NOLOGIN; CREATE ROLE '
                                 'pgsched_engine NOLOGIN; CREATE ROLE pgsched_web NOLOGIN; CREATE ROLE '
                                 'pgsched_app NOLOGIN; CREATE ROLE pgsched_instance NOLOGIN; GRANT '
                                 'pgsched_owner TO ' || current_user || '; then migrate again';
        END;
    END LOOP;
    IF NOT pg_catalog.pg_has_role(current_user, 'pgsched_owner', 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT pgsched_owner TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
            RAISE EXCEPTION 'migration 0018: % must be a member of pgsched_owner to give it pgsched''s objects',
                current_user
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'as a superuser run: GRANT pgsched_owner TO ' || current_user;
        END;
    END IF;
END $roles$;


-- The tenants, and which login acts for which (read by session_tenant_v1 below).
CREATE TABLE pgsched.tenant (
    name text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE pgsched.tenant IS 'the tenants of this installation (pgsched tenant create|list|delete)';

CREATE TABLE pgsched.tenant_role (
    role_name name PRIMARY KEY,
    tenant text NOT NULL REFERENCES pgsched.tenant (name) ON DELETE CASCADE,
    purpose text NOT NULL CHECK (purpose IN ('app', 'engine', 'web')),
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE pgsched.tenant_role IS
    'a login role -> the one tenant its sessions act for (its group role is the purpose)';

INSERT INTO pgsched.tenant (name)
SELECT t FROM (SELECT 'default' AS t
               UNION SELECT tenant FROM pgsched.task
               UNION SELECT tenant FROM pgsched.dag
               UNION SELECT tenant FROM pgsched.web_user
               UNION SELECT tenant FROM pgsched.api_token) known
 WHERE t ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'
ON CONFLICT DO NOTHING;

-- Who the session is. STABLE and without arguments, so a policy calls it once per
-- statement as an InitPlan: (SELECT pgsched_internal.session_tenant_v1()).
CREATE FUNCTION pgsched_internal.session_tenant_v1() RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
    SELECT coalesce(
        (SELECT m.tenant FROM pgsched.tenant_role m WHERE m.role_name = session_user),
        CASE WHEN pg_has_role(session_user, 'pgsched_web', 'MEMBER')
             THEN nullif(current_setting('pgsched.tenant', true), '') END);
$$;
COMMENT ON FUNCTION pgsched_internal.session_tenant_v1() IS
    'the tenant this session acts for: its login''s (tenant_role), else for a web login the '
    'pgsched.tenant setting (''*'': every tenant), else NULL (none)';

CREATE FUNCTION pgsched_internal.is_instance_v1() RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
    SELECT NOT EXISTS (SELECT FROM pgsched.tenant_role m WHERE m.role_name = session_user)
       AND (pg_has_role(session_user, 'pgsched_instance', 'MEMBER')
            OR pg_has_role(session_user, 'pgsched_owner', 'MEMBER'));
$$;
COMMENT ON FUNCTION pgsched_internal.is_instance_v1() IS
    'whether this session''s login acts for the whole installation (superuser, owner or '
    'pgsched_instance, and in no tenant)';

-- The tenant a public function acts in, from what its caller asked (NULL: "mine").
CREATE FUNCTION pgsched_internal.caller_tenant_v1(asked text) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    own text;
BEGIN
    IF pgsched_internal.is_instance_v1() THEN
        RETURN coalesce(asked, nullif(nullif(current_setting('pgsched.tenant', true), ''), '*'), 'default');
    END IF;
    own := pgsched_internal.session_tenant_v1();
    IF own = '*' THEN
        RETURN coalesce(asked, 'default');
    ELSIF own IS NULL THEN
        RAISE EXCEPTION 'tenant: role % acts for no tenant', quote_ident(session_user)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'pgsched tenant create NAME --login ROLE maps a login to its tenant';
    ELSIF asked IS NOT NULL AND asked <> own THEN
        RAISE EXCEPTION 'tenant: role % acts for tenant % only, not %', quote_ident(session_user),
            quote_literal(own), quote_literal(asked)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN own;
END $$;

-- The triggers a caller may give an enqueue: schedule and dag are the engine's.
CREATE FUNCTION pgsched_internal.caller_trigger_v1(asked text) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    IF asked IN ('schedule', 'dag') AND NOT pgsched_internal.is_instance_v1()
       AND NOT pg_has_role(session_user, 'pgsched_engine', 'MEMBER') THEN
        RAISE EXCEPTION 'trigger: % is pgsched''s own; an application enqueues with api, manual or insert',
            quote_literal(asked)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN asked;
END $$;

-- An execution's tenant is its task's: checked with the task lookup the insert trigger
-- already makes (0009), so it costs no extra statement.
CREATE OR REPLACE FUNCTION pgsched_internal.execution_inserted_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    bad record;
BEGIN
    WITH wanted AS (SELECT n.task_id, n.tenant, min(n.scheduled_at) FILTER (WHERE n.trigger = 'schedule') AS first_fire
                      FROM new_executions n GROUP BY n.task_id, n.tenant),
         locked AS (SELECT k.id, k.tenant, k.name, k.last_fire_at FROM pgsched.task k
                     WHERE k.id IN (SELECT w.task_id FROM wanted w)
                       FOR KEY SHARE OF k)
    SELECT w.task_id, w.tenant, w.first_fire, l.id IS NULL AS missing, l.tenant <> w.tenant AS foreign,
           l.tenant AS task_tenant, l.name, l.last_fire_at INTO bad
      FROM wanted w LEFT JOIN locked l ON l.id = w.task_id
     WHERE l.id IS NULL OR l.tenant <> w.tenant OR w.first_fire <= l.last_fire_at
     ORDER BY l.id IS NULL DESC, l.tenant <> w.tenant DESC
     LIMIT 1;
    IF FOUND AND bad.missing THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', bad.task_id
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    ELSIF FOUND AND bad.foreign THEN
        RAISE EXCEPTION 'execution: task % belongs to tenant %, not %', quote_literal(bad.name),
            quote_literal(bad.task_tenant), quote_literal(bad.tenant)
            USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'tenant';
    ELSIF FOUND THEN  -- rare: looked at row by row, only now
        SELECT k.name, k.last_fire_at, n.scheduled_at AS first_fire INTO bad
          FROM new_executions n JOIN pgsched.task k ON k.id = n.task_id
         WHERE n.trigger = 'schedule' AND n.scheduled_at <= k.last_fire_at
           AND NOT EXISTS (SELECT FROM pgsched.execution_history h
                            WHERE h.id = n.id AND h.task_id = n.task_id AND h.scheduled_at = n.scheduled_at
                              AND h.created_at = n.created_at AND h.state = 'dead')
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'execution: task % already fired through % (last_fire_at); a scheduled fire at % '
                            'would run an instant that was dealt with', quote_literal(bad.name), bad.last_fire_at,
                            bad.first_fire
                USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'scheduled_at';
        END IF;
    END IF;
    PERFORM pg_notify('pgsched_execution', '');
    RETURN NULL;
END $$;

-- A run request lands in the tenant of the one who inserts it (NULL: the caller's own).
-- The trigger runs with definer rights: an application has no right on pgsched_internal.
CREATE OR REPLACE FUNCTION pgsched_internal.run_request_insert_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    r record;
BEGIN
    IF NEW.task IS NULL THEN
        RAISE EXCEPTION 'task: a run request needs a task name' USING ERRCODE = 'not_null_violation';
    END IF;
    SELECT * INTO r FROM pgsched.enqueue_v2(NEW.task, NEW.params, NEW.run_at, NEW.priority,
                                            NEW.idempotency_key, NEW.tenant, 'insert');
    NEW.tenant := pgsched_internal.caller_tenant_v1(NEW.tenant);
    NEW.execution_id := r.execution_id;
    NEW.deduplicated := r.deduplicated;
    NEW.dedup_reason := r.dedup_reason;
    NEW.succeeded_execution_id := r.succeeded_execution_id;
    RETURN NEW;
END $$;

-- The public functions: definer rights, a pinned search_path, and the tenant (and the
-- trigger of an enqueue) resolved from the caller before anything else. Each body is its
-- 0017 body with that one line added (sql/schema.sql shows each as it is now).
DO $api$
DECLARE
    f record;
    def text;
    line text;
    api text[] := ARRAY['cancel_v1', 'dag_cancel_v1', 'dag_rerun_v1', 'dag_trigger_v1', 'dlq_purge_v1',
                        'dlq_retry_all_v1', 'dlq_retry_v1', 'enqueue_many_v1', 'enqueue_many_v2',
                        'enqueue_v1', 'enqueue_v2', 'pause_v1', 'resume_v1', 'trigger_v1'];
    done text[] := '{}';
BEGIN
    FOR f IN SELECT p.oid, p.proname::text AS name, l.lanname,
                    pg_get_function_identity_arguments(p.oid) AS args
               FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
              WHERE p.pronamespace = 'pgsched'::regnamespace AND p.proname = ANY (api)
              ORDER BY p.oid
    LOOP
        def := pg_get_functiondef(f.oid);
        -- "the caller's tenant" is the default now, not 'default'
        def := replace(def, 'tenant text DEFAULT ''default''::text', 'tenant text DEFAULT NULL::text');
        IF f.name = 'dlq_purge_v1' THEN  -- a SQL function: the tenant resolved where it is used
            def := replace(def, 'h.tenant = dlq_purge_v1.tenant',
                           'h.tenant = (SELECT pgsched_internal.caller_tenant_v1(dlq_purge_v1.tenant))');
        ELSIF f.lanname = 'plpgsql' THEN
            line := format(E'\nBEGIN\n    %1$s.tenant := pgsched_internal.caller_tenant_v1(%1$s.tenant);\n', f.name);
            IF f.args ~ '\mtrigger text' THEN
                line := line || format(E'    IF %1$s.trigger IN (''schedule'', ''dag'') THEN\n' ||
                                       E'        %1$s.trigger := pgsched_internal.caller_trigger_v1(%1$s.trigger);\n' ||
                                       E'    END IF;\n', f.name);
            END IF;
            IF strpos(def, E'\nBEGIN\n') = 0 THEN
                RAISE EXCEPTION 'migration 0018: no BEGIN line in pgsched.%', f.name;
            END IF;
            def := overlay(def PLACING line FROM strpos(def, E'\nBEGIN\n') FOR 7);
        END IF;  -- trigger_v1 (SQL) passes its tenant to enqueue_v1, which resolves it
        EXECUTE def;
        EXECUTE format('ALTER FUNCTION pgsched.%I(%s) SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp',
                       f.name, f.args);
        done := done || f.name;
    END LOOP;
    IF cardinality(done) <> cardinality(api) THEN
        RAISE EXCEPTION 'migration 0018: public functions not found: %',
            (SELECT array_agg(a) FROM unnest(api) a WHERE a <> ALL (done));
    END IF;
END $api$;

-- An application has no table: what became of a run it enqueued is read through this
-- function, in its own tenant (docs/sql-api.md).
CREATE FUNCTION pgsched.execution_v1(execution_id bigint, tenant text DEFAULT NULL)
    RETURNS TABLE(id bigint, task text, state text, trigger text, attempt integer,
                  scheduled_at timestamptz, run_at timestamptz, started_at timestamptz,
                  finished_at timestamptz, exit_code integer, error text, result jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    execution_v1.tenant := pgsched_internal.caller_tenant_v1(execution_v1.tenant);
    RETURN QUERY
        SELECT x.id, k.name, x.state, x.trigger, x.attempt, x.scheduled_at, x.run_at, x.started_at,
               x.finished_at, x.exit_code, x.error, x.result
          FROM pgsched.execution_all x JOIN pgsched.task k ON k.id = x.task_id
         WHERE x.id = execution_v1.execution_id AND x.tenant = execution_v1.tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: no execution % in tenant %', execution_v1.execution_id,
            quote_literal(execution_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

-- The maintenance of history partitions runs as the owner, so that a partition made by the
-- leader belongs to pgsched_owner like its parent and no engine login needs CREATE on the
-- schema (or any right on a partition: rows are reached through the parents).
ALTER FUNCTION pgsched_internal.partition_ensure_v1(date, integer)
    SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp;
ALTER FUNCTION pgsched_internal.partition_drop_v1(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp;
ALTER FUNCTION pgsched_internal.partition_expired_v1(timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp;
ALTER FUNCTION pgsched_internal.partition_is_live_v1(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp;

-- How many rows strayed into the DEFAULT partitions (outside every daily range): counted
-- by the owner, so that nobody needs a right on a partition (which row-level security on
-- the parent does not guard).
CREATE FUNCTION pgsched_internal.partition_default_rows_v1(
    OUT execution_history bigint, OUT execution_attempt bigint, OUT execution_log bigint)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
    SELECT (SELECT count(*) FROM pgsched.execution_history_default),
           (SELECT count(*) FROM pgsched.execution_attempt_default),
           (SELECT count(*) FROM pgsched.execution_log_default);
$$;

-- A view reads its tables with its owner's rights unless told otherwise, and the owner is
-- not held by row-level security: execution_all reads as the one who queries it
-- (security_invoker, PostgreSQL 15 and newer). PostgreSQL 14 has no such option: there the
-- view filters its rows as the tables' policies do (a security barrier, so that no
-- function of the caller's sees a row before the filter).
DO $view$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        EXECUTE 'ALTER VIEW pgsched.execution_all SET (security_invoker = true)';
    ELSE
        EXECUTE format('CREATE OR REPLACE VIEW pgsched.execution_all WITH (security_barrier) AS '
                       'SELECT * FROM (%s) v WHERE pgsched_internal.is_instance_v1() '
                       'OR (SELECT pgsched_internal.session_tenant_v1()) IN (v.tenant, ''*'')',
                       rtrim(pg_get_viewdef('pgsched.execution_all'::regclass), ';'));
    END IF;
END $view$;

-- Rows without a tenant column of their own belong to their parent's tenant; a DAG's node
-- names a task of the same tenant (a tenant's login sees no other tenant's task).
ALTER TABLE pgsched.dag_node ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON pgsched.dag_node TO pgsched_engine, pgsched_web
    USING (EXISTS (SELECT FROM pgsched.dag d WHERE d.id = dag_id))
    WITH CHECK (EXISTS (SELECT FROM pgsched.dag d WHERE d.id = dag_id)
                AND EXISTS (SELECT FROM pgsched.task k WHERE k.id = task_id));
ALTER TABLE pgsched.dag_node_run ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON pgsched.dag_node_run TO pgsched_engine, pgsched_web
    USING (EXISTS (SELECT FROM pgsched.dag_run r WHERE r.id = run_id))
    WITH CHECK (EXISTS (SELECT FROM pgsched.dag_run r WHERE r.id = run_id)
                AND EXISTS (SELECT FROM pgsched.task k WHERE k.id = task_id));
ALTER TABLE pgsched.task_alerting ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON pgsched.task_alerting TO pgsched_engine, pgsched_web
    USING (EXISTS (SELECT FROM pgsched.task k WHERE k.id = task_id))
    WITH CHECK (EXISTS (SELECT FROM pgsched.task k WHERE k.id = task_id));

-- A login for a tenant (pgsched tenant create NAME --login ROLE): made if missing, given
-- the purpose's group role, mapped to the tenant. Runs with the caller's rights: the
-- caller needs CREATEROLE (or to be a superuser) and ADMIN on the group role. A login
-- that acts for the whole installation cannot be put in one tenant.
CREATE FUNCTION pgsched_internal.tenant_login_v1(role_name text, tenant text, purpose text,
                                                 password text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    made boolean := false;
    other text;
BEGIN
    IF purpose NOT IN ('app', 'engine', 'web') THEN
        RAISE EXCEPTION 'purpose: % is not one of app, engine, web', quote_literal(purpose)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM pgsched.tenant t WHERE t.name = tenant_login_v1.tenant) THEN
        RAISE EXCEPTION 'tenant: no tenant named %', quote_literal(tenant) USING ERRCODE = 'no_data_found';
    END IF;
    SELECT m.tenant INTO other FROM pgsched.tenant_role m WHERE m.role_name = tenant_login_v1.role_name;
    IF other IS NOT NULL AND other <> tenant THEN
        RAISE EXCEPTION 'login: role % already acts for tenant %', quote_ident(role_name), quote_literal(other)
            USING ERRCODE = 'unique_violation';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = tenant_login_v1.role_name) THEN
        EXECUTE format('CREATE ROLE %I LOGIN', role_name);
        made := true;
    ELSIF EXISTS (SELECT FROM pg_roles r WHERE r.rolname = tenant_login_v1.role_name
                     AND (r.rolsuper OR r.rolbypassrls))
          OR pg_has_role(role_name, 'pgsched_owner', 'MEMBER')
          OR pg_has_role(role_name, 'pgsched_instance', 'MEMBER') THEN
        RAISE EXCEPTION 'login: role % acts for the whole installation; a tenant''s login must not',
            quote_ident(role_name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('GRANT %I TO %I', 'pgsched_' || purpose, role_name);
    IF password IS NOT NULL THEN
        EXECUTE format('ALTER ROLE %I PASSWORD %L', role_name, password);
    END IF;
    INSERT INTO pgsched.tenant_role (role_name, tenant, purpose)
    VALUES (role_name, tenant, purpose)
    ON CONFLICT ON CONSTRAINT tenant_role_pkey DO UPDATE SET purpose = EXCLUDED.purpose;
    RETURN made;
END $$;

-- A tenant's login dropped (pgsched tenant delete NAME --drop-logins): only a role that
-- is mapped to that tenant, so the command cannot drop anyone else. Caller's rights.
CREATE FUNCTION pgsched_internal.tenant_drop_login_v1(role_name text, tenant text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pgsched.tenant_role m
                    WHERE m.role_name = tenant_drop_login_v1.role_name AND m.tenant = tenant_drop_login_v1.tenant) THEN
        RAISE EXCEPTION 'login: role % does not act for tenant %', quote_ident(role_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    DELETE FROM pgsched.tenant_role m WHERE m.role_name = tenant_drop_login_v1.role_name;
    -- its sessions end with it (a worker on it would go on, refused everything)
    BEGIN
        PERFORM pg_terminate_backend(a.pid) FROM pg_stat_activity a
         WHERE a.usename = tenant_drop_login_v1.role_name AND a.pid <> pg_backend_pid();
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE WARNING 'login %: its open sessions go on until they end (% may not end them)',
            quote_ident(role_name), current_user;
    END;
    EXECUTE format('DROP ROLE IF EXISTS %I', role_name);
END $$;

-- A task's tenant is a tenant: one made by a task create (or a DAG apply) of a tenant that
-- was never created is registered, as `pgsched tenant list` shows it.
CREATE FUNCTION pgsched_internal.tenant_register_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    INSERT INTO pgsched.tenant (name)
    SELECT DISTINCT n.tenant FROM new_rows n
     WHERE n.tenant ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'
       AND NOT EXISTS (SELECT FROM pgsched.tenant t WHERE t.name = n.tenant)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER tenant_register AFTER INSERT ON pgsched.task REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.tenant_register_v1();

-- The owner, the grants and the row-level security of every object, kept by one function
-- that every migration adding an object ends by calling (tests/db/test_tenant_isolation.py
-- and test_tenant_engine_attacks.py check that nothing is left out or left open):
--   * every table, view, sequence and function of both schemas belongs to pgsched_owner;
--   * PUBLIC has nothing; pgsched_app has USAGE on pgsched, EXECUTE on its functions and
--     INSERT on run_request;
--   * engine and web have USAGE on both schemas and EXECUTE on the functions, but the
--     engine's SECURITY DEFINER ones (partitions, the audit log's writes and prune), which
--     are pgsched_instance's (and the audit log's writes the web's); nextval on the
--     sequences (reading and setting them: pgsched_instance);
--   * the tenants' tables: DML for engine and web; the web's own (web_*, api_token): the
--     web's alone; the tenant map and the migrations: read only, written by the owner; the
--     installation's own (settings, leadership, the state of the roll-up and of alerting):
--     read by the engine, written by the web and pgsched_instance;
--   * a table with a tenant column (but leader and scheduler_node, and the web's own, which
--     sign-in must look up across tenants) has row-level security: engine and web see the
--     rows of the session's tenant (a row the engine writes names only that tenant's task,
--     execution and DAG), the web every tenant's when it set '*', pgsched_instance every
--     row; the workers' rows by the tenants they serve.
CREATE FUNCTION pgsched_internal.secure_v1() RETURNS void
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
                                      'caller_trigger_v1')
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
    'gives pgsched_owner every object and sets the grants and row-level security (migration 0018)';

SELECT pgsched_internal.secure_v1();
