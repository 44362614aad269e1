-- 0031: viewers do not see what they should not (issue 19, item 4; docs/security.md,
-- "Sensitive values and who sees them").
--
-- Every value of a task's env, and every params value under a key that names a secret
-- (password, passwd, secret, token, api_key/apikey, credential, private_key, auth, dsn;
-- any case, any depth) or that the task marks sensitive (task.sensitive_params, new here),
-- is shown as the fixed mask '••••••' to a session that may not read sensitive values.
-- The rule lives here alone: the faces (web pages, JSON API, CLI) read tasks, executions,
-- DAGs and DAG runs through pgsched_internal.shown_v1, and an application's login through
-- pgsched.task_v1 and pgsched.execution_v2; it reads no table (0018).
--
-- Who reads the values (pgsched_internal.may_reveal_v1): a superuser, the owner, the
-- installation (pgsched_instance), the engine (its workers run the tasks, with their real
-- values, and read the tables), a member of the new group role pgsched_secret_reader (an
-- application's login granted it), and the web login in a transaction that set
-- pgsched.reveal to 'on' (it does for a tenant's admin, never for a viewer or an
-- operator). Any session may ask to see less: pgsched.reveal = 'off' masks for it.

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgsched_secret_reader') THEN
        BEGIN
            CREATE ROLE pgsched_secret_reader NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL;  -- made at this instant by the migration of another database of the cluster
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'migration 0031: % may not create the group role pgsched_secret_reader',
                    current_user
                    USING ERRCODE = 'insufficient_privilege',
                          HINT = 'as a superuser run: CREATE ROLE pgsched_secret_reader NOLOGIN; '
                                 'then migrate again';
        END;
    END IF;
END $roles$;

ALTER TABLE pgsched.task ADD COLUMN sensitive_params text[] NOT NULL DEFAULT '{}';
COMMENT ON COLUMN pgsched.task.sensitive_params IS
    'params keys (any depth, any case) masked for viewers beside those whose name says secret (0031)';

-- The mask: fixed, so it says nothing of the value's length.
CREATE FUNCTION pgsched_internal.mask_v1() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN '••••••';

-- Whether a params key is sensitive: its name matches the pattern, or it is one of marked
-- (both without regard to case).
CREATE FUNCTION pgsched_internal.sensitive_key_v1(key text, marked text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN key ~* 'passw(or)?d|secret|token|api_?key|credential|private_?key|auth|dsn'
           OR lower(key) = ANY (SELECT lower(m) FROM unnest(marked) m);

-- A secret by reference ({{secret:NAME}}, resolved on the worker) names a secret and is
-- none: it is shown as it is.
CREATE FUNCTION pgsched_internal.masked_value_v1(value jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN jsonb_typeof(value) = 'string' AND value #>> '{}' ~ '^\{\{secret:[^{}]+\}\}$'
                THEN value ELSE to_jsonb(pgsched_internal.mask_v1()) END;

-- A task's env with every value masked (keys shown).
CREATE FUNCTION pgsched_internal.env_masked_v1(env jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN jsonb_typeof(env) = 'object'
                THEN coalesce((SELECT jsonb_object_agg(e.key, pgsched_internal.masked_value_v1(e.value))
                                 FROM jsonb_each(env) e), '{}'::jsonb)
                ELSE env END;

-- params with the value of every sensitive key masked, at any depth (objects in arrays
-- too). A value more than 32 levels deep below a value that holds a sensitive key is
-- masked whole (the walk is recursive; PostgreSQL's stack would not take 10,000 levels):
-- masked too much, never too little. A document whose text names no sensitive key and
-- that has no marked keys is returned as it is, unwalked.
CREATE FUNCTION pgsched_internal.params_masked_v1(params jsonb, marked text[], depth integer DEFAULT 0)
    RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    IF jsonb_typeof(params) NOT IN ('object', 'array') THEN
        RETURN params;
    ELSIF depth = 0 AND coalesce(cardinality(marked), 0) = 0
          AND params::text !~* 'passw(or)?d|secret|token|api_?key|credential|private_?key|auth|dsn' THEN
        RETURN params;
    ELSIF depth >= 32 THEN
        RETURN to_jsonb(pgsched_internal.mask_v1());
    ELSIF jsonb_typeof(params) = 'object' THEN
        RETURN coalesce((SELECT jsonb_object_agg(e.key,
                                   CASE WHEN pgsched_internal.sensitive_key_v1(e.key, marked)
                                        THEN pgsched_internal.masked_value_v1(e.value)
                                        ELSE pgsched_internal.params_masked_v1(e.value, marked, depth + 1) END)
                           FROM jsonb_each(params) e), '{}'::jsonb);
    END IF;
    RETURN coalesce((SELECT jsonb_agg(pgsched_internal.params_masked_v1(a.value, marked, depth + 1)
                                      ORDER BY a.i)
                       FROM jsonb_array_elements(params) WITH ORDINALITY a(value, i)), '[]'::jsonb);
END $$;

-- A DAG's definition (the file, as JSON) or a node's (dag_node.definition) masked the same
-- way: its env and params, and those of each of its nodes.
CREATE FUNCTION pgsched_internal.definition_masked_v1(definition jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    d jsonb := definition;
BEGIN
    IF jsonb_typeof(d) <> 'object' THEN
        RETURN d;
    END IF;
    IF d ? 'env' THEN
        d := jsonb_set(d, '{env}', pgsched_internal.env_masked_v1(d -> 'env'));
    END IF;
    IF d ? 'params' THEN
        d := jsonb_set(d, '{params}', pgsched_internal.params_masked_v1(d -> 'params', '{}'));
    END IF;
    IF jsonb_typeof(d -> 'nodes') = 'array' THEN
        d := jsonb_set(d, '{nodes}', coalesce(
            (SELECT jsonb_agg(CASE WHEN jsonb_typeof(n.value) <> 'object' THEN n.value
                                   ELSE n.value
                                        || CASE WHEN n.value ? 'env' THEN jsonb_build_object(
                                               'env', pgsched_internal.env_masked_v1(n.value -> 'env'))
                                           ELSE '{}' END
                                        || CASE WHEN n.value ? 'params' THEN jsonb_build_object(
                                               'params', pgsched_internal.params_masked_v1(
                                                   n.value -> 'params', '{}'))
                                           ELSE '{}' END END
                              ORDER BY n.i)
               FROM jsonb_array_elements(d -> 'nodes') WITH ORDINALITY n(value, i)), '[]'));
    END IF;
    RETURN d;
END $$;

-- Whether this session reads sensitive values (the header says who does). Caller's
-- rights: it asks about session_user, which a definer function does not change.
CREATE FUNCTION pgsched_internal.may_reveal_v1() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce(current_setting('pgsched.reveal', true), '') <> 'off'
       AND ((current_setting('pgsched.reveal', true) = 'on'
             AND pg_has_role(session_user, 'pgsched_web', 'MEMBER'))
            OR pg_has_role(session_user, 'pgsched_secret_reader', 'MEMBER')
            OR pg_has_role(session_user, 'pgsched_engine', 'MEMBER')
            OR pg_has_role(session_user, 'pgsched_instance', 'MEMBER')
            OR pg_has_role(session_user, 'pgsched_owner', 'MEMBER'));

-- A row (a task, an execution, a DAG, a DAG node, a DAG run: any row type with env, params
-- or a DAG definition) as this session may see it: those masked unless may_reveal_v1().
-- marked: the task's sensitive_params.
CREATE FUNCTION pgsched_internal.shown_v1(r anyelement, marked text[] DEFAULT '{}') RETURNS anyelement
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
DECLARE
    j jsonb;
    masked jsonb := '{}';
BEGIN
    IF pgsched_internal.may_reveal_v1() THEN
        RETURN r;
    END IF;
    j := to_jsonb(r);
    IF j ? 'env' THEN
        masked := jsonb_build_object('env', pgsched_internal.env_masked_v1(j -> 'env'));
    END IF;
    IF j ? 'params' THEN
        masked := masked || jsonb_build_object('params',
                                               pgsched_internal.params_masked_v1(j -> 'params', marked));
    END IF;
    IF j ? 'definition' THEN
        masked := masked || jsonb_build_object('definition',
                                               pgsched_internal.definition_masked_v1(j -> 'definition'));
    END IF;
    RETURN jsonb_populate_record(r, masked);
END $$;

-- The public reads of what a tenant's viewer may see (docs/sql-api.md, "What applications
-- may read"): the live task, and an execution with its params, masked as above.
CREATE FUNCTION pgsched.task_v1(task_name text, tenant text DEFAULT NULL) RETURNS SETOF pgsched.task
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    task_v1.tenant := pgsched_internal.caller_tenant_v1(task_v1.tenant);
    RETURN QUERY
        SELECT s.* FROM pgsched.task t CROSS JOIN LATERAL pgsched_internal.shown_v1(t, t.sensitive_params) s
         WHERE t.tenant = task_v1.tenant AND t.name = task_v1.task_name AND t.deleted_at IS NULL;
END $$;

CREATE FUNCTION pgsched.execution_v2(execution_id bigint, tenant text DEFAULT NULL)
    RETURNS TABLE(id bigint, task text, state text, trigger text, attempt integer,
                  scheduled_at timestamptz, run_at timestamptz, started_at timestamptz,
                  finished_at timestamptz, exit_code integer, error text, result jsonb, params jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    execution_v2.tenant := pgsched_internal.caller_tenant_v1(execution_v2.tenant);
    RETURN QUERY
        SELECT x.id, k.name, x.state, x.trigger, x.attempt, x.scheduled_at, x.run_at, x.started_at,
               x.finished_at, x.exit_code, x.error, x.result,
               CASE WHEN pgsched_internal.may_reveal_v1() THEN x.params
                    ELSE pgsched_internal.params_masked_v1(x.params, k.sensitive_params) END
          FROM pgsched.execution_all x JOIN pgsched.task k ON k.id = x.task_id
         WHERE x.id = execution_v2.execution_id AND x.tenant = execution_v2.tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: no execution % in tenant %', execution_v2.execution_id,
            quote_literal(execution_v2.tenant) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

SELECT pgsched_internal.secure_v1();
