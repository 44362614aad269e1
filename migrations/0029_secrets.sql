-- 0029: secrets by reference (issue 19, item 3; docs/security.md, "Secrets").
--
-- A task names a secret ({{secret:NAME}} in its env or params); the worker resolves it at
-- execution time. A stored secret is a row here: its value sealed with AES-256-GCM by the
-- process that set it (pgsched/secret_keys.py), the tenant and the name bound as associated
-- data. The key never reaches the database: this table holds ciphertext, nonce and the id of
-- the key, nothing that opens them.
--
-- The table is pgsched_internal's: no login but the owner has any right on it, so the web
-- (which has DML on every table of pgsched) and a tenant's logins reach it only through the
-- definer functions below, which take their tenant from caller_tenant_v1 (0018) before
-- anything else:
--   pgsched.secret_set_v1      seal a value (given sealed) under a name of the caller's tenant
--   pgsched.secret_list_v1     names and metadata, never ciphertext
--   pgsched.secret_delete_v1   remove one
--   pgsched_internal.secret_fetch_v1   the sealed rows a worker resolves, for engine logins
--                              (and the installation's) of that tenant only
-- Row-level security is on all the same, with the policies of every tenant table, so that a
-- right granted by mistake later still shows a login its own tenant's rows alone.

CREATE TABLE pgsched_internal.secret (
    tenant text NOT NULL REFERENCES pgsched.tenant (name) ON DELETE CASCADE,
    name text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    ciphertext bytea NOT NULL CHECK (octet_length(ciphertext) BETWEEN 16 AND 65552),
    nonce bytea NOT NULL CHECK (octet_length(nonce) = 12),
    key_id text NOT NULL CHECK (key_id ~ '^[0-9a-f]{16}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text NOT NULL,
    PRIMARY KEY (tenant, name)
);
COMMENT ON TABLE pgsched_internal.secret IS
    'secrets sealed with a key the database never holds (AES-256-GCM, tenant and name as '
    'associated data); reached through secret_set_v1, secret_list_v1, secret_delete_v1, '
    'secret_fetch_v1';

ALTER TABLE pgsched_internal.secret ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON pgsched_internal.secret TO pgsched_engine
    USING (tenant = (SELECT pgsched_internal.session_tenant_v1()))
    WITH CHECK (tenant = (SELECT pgsched_internal.session_tenant_v1()));
CREATE POLICY web_rows ON pgsched_internal.secret TO pgsched_web
    USING ((SELECT pgsched_internal.session_tenant_v1()) IN (tenant, '*'))
    WITH CHECK ((SELECT pgsched_internal.session_tenant_v1()) IN (tenant, '*'));
CREATE POLICY instance_rows ON pgsched_internal.secret TO pgsched_instance USING (true) WITH CHECK (true);

-- The checks of a secret's name (the pattern of the table's CHECK, said as an error that
-- names the value) and of the tenant (one that exists).
CREATE FUNCTION pgsched_internal.secret_check_v1(t text, secret_name text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF secret_name IS NULL OR secret_name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' THEN
        RAISE EXCEPTION 'name: % must be 1-64 characters: letters, digits and . _ - (starting with a letter or digit)',
            coalesce(quote_literal(left(secret_name, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM pgsched.tenant x WHERE x.name = t) THEN
        RAISE EXCEPTION 'tenant: no tenant %', quote_literal(t) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

-- Set (create or replace) a secret of the caller's tenant, given sealed. Returns whether it
-- was created (false: replaced). by: as for a queue's pause (limits_by_v1, 0024).
CREATE FUNCTION pgsched.secret_set_v1(name text, ciphertext bytea, nonce bytea, key_id text,
                                      tenant text DEFAULT NULL, by text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    who text;
    created boolean;
BEGIN
    secret_set_v1.tenant := pgsched_internal.caller_tenant_v1(secret_set_v1.tenant);
    PERFORM pgsched_internal.secret_check_v1(secret_set_v1.tenant, secret_set_v1.name);
    who := pgsched_internal.limits_by_v1(by);
    IF ciphertext IS NULL OR octet_length(ciphertext) NOT BETWEEN 16 AND 65552 THEN
        RAISE EXCEPTION 'ciphertext: % bytes; a sealed value has 16 to 65552 (a value of at most 64 KiB and its tag)',
            coalesce(octet_length(ciphertext)::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    ELSIF nonce IS NULL OR octet_length(nonce) <> 12 THEN
        RAISE EXCEPTION 'nonce: % bytes; AES-GCM''s nonce has 12', coalesce(octet_length(nonce)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF key_id IS NULL OR key_id !~ '^[0-9a-f]{16}$' THEN
        RAISE EXCEPTION 'key_id: % must be 16 hex digits (pgsched/secret_keys.py key_id)',
            coalesce(quote_literal(left(key_id, 40)), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgsched_internal.secret AS s (tenant, name, ciphertext, nonce, key_id, created_by, updated_by)
    VALUES (secret_set_v1.tenant, secret_set_v1.name, secret_set_v1.ciphertext, secret_set_v1.nonce,
            secret_set_v1.key_id, who, who)
    ON CONFLICT ON CONSTRAINT secret_pkey DO UPDATE
       SET ciphertext = excluded.ciphertext, nonce = excluded.nonce, key_id = excluded.key_id,
           updated_at = now(), updated_by = excluded.updated_by
    RETURNING (s.xmax = 0) INTO created;
    RETURN created;
END $$;

-- The secrets of the caller's tenant: names and metadata, never ciphertext nor nonce.
CREATE FUNCTION pgsched.secret_list_v1(tenant text DEFAULT NULL)
    RETURNS TABLE (secret_name text, key_id text, created_at timestamptz, created_by text,
                   updated_at timestamptz, updated_by text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    t text := pgsched_internal.caller_tenant_v1(secret_list_v1.tenant);
BEGIN
    RETURN QUERY
        SELECT s.name, s.key_id, s.created_at, s.created_by, s.updated_at, s.updated_by
          FROM pgsched_internal.secret s
         WHERE s.tenant = t
         ORDER BY s.name;
END $$;

-- Delete a secret of the caller's tenant; no_data_found when it has none of that name.
CREATE FUNCTION pgsched.secret_delete_v1(name text, tenant text DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    secret_delete_v1.tenant := pgsched_internal.caller_tenant_v1(secret_delete_v1.tenant);
    PERFORM pgsched_internal.secret_check_v1(secret_delete_v1.tenant, secret_delete_v1.name);
    DELETE FROM pgsched_internal.secret s
     WHERE s.tenant = secret_delete_v1.tenant AND s.name = secret_delete_v1.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'secret: no secret % in tenant %', quote_literal(secret_delete_v1.name),
            quote_literal(secret_delete_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

-- The sealed rows of `names` in `tenant`, for the worker that resolves them: an engine
-- login of that tenant (caller_tenant_v1 refuses another) or the installation's. A name
-- with no row is absent from the answer (the worker names the reference it lacks).
CREATE FUNCTION pgsched_internal.secret_fetch_v1(tenant text, names text[])
    RETURNS TABLE (secret_name text, ciphertext bytea, nonce bytea, key_id text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    t text := pgsched_internal.caller_tenant_v1(secret_fetch_v1.tenant);
BEGIN
    IF NOT (pgsched_internal.is_instance_v1() OR pg_has_role(session_user, 'pgsched_engine', 'MEMBER')) THEN
        RAISE EXCEPTION 'secret: role % is no worker''s; only engine logins fetch sealed secrets',
            quote_ident(session_user) USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY
        SELECT s.name, s.ciphertext, s.nonce, s.key_id
          FROM pgsched_internal.secret s
         WHERE s.tenant = t AND s.name = ANY (names);
END $$;

-- 0028's secure_v1, secret_fetch_v1 among the definer functions every engine and web login may
-- call (it checks the caller itself: an engine login of the tenant, or the installation).
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
                                      'window_lock_v1',
                                      -- 0029: checks its caller itself (an engine login of
                                      -- the tenant asked for, or the installation)
                                      'secret_fetch_v1')
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
