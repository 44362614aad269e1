-- 0024: the supported ways to set limits (issue 18, items 1 and 3): pause, resume and limit
-- a queue, read a tenant's quotas and usage, set a tenant's quotas. Until now they were
-- set with UPDATEs of pgsched.queue and pgsched.tenant (migration 0021).
--
-- Public functions: definer rights, a pinned search_path, the tenant taken from the caller
-- (pgsched_internal.caller_tenant_v1, 0018) before anything else. A queue's limits and
-- pause are its tenant's: any login of the tenant, the web acting for it, or an
-- installation-wide login. A tenant's quotas are the installation's: an installation-wide
-- login (or the web acting for every tenant, '*') sets them; a tenant's login reads its
-- own (docs/limits.md, "Who may change a limit"). Each change that may let waiting work
-- start (a resume, a limit, a quota) notifies the tenant's workers in the same transaction.

-- Who acts, as pgsched.queue.paused_by records it: 'login ROLE' of the session, unless the
-- caller names someone (the web: 'user NAME', 'token ID'), which only a trusted caller may:
-- the web's logins and installation-wide ones. A tenant's application login cannot record
-- a pause under another name than its own. Not a definer: called by the public functions,
-- it runs as their owner; session_user is the caller's login either way.
CREATE FUNCTION pgsched_internal.limits_by_v1(by text) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF by IS NULL THEN
        RETURN 'login ' || session_user;
    END IF;
    IF NOT (pgsched_internal.is_instance_v1() OR pg_has_role(session_user, 'pgsched_web', 'MEMBER')) THEN
        RAISE EXCEPTION 'by: role % may not say who acts (%); leave by NULL to be recorded as login %',
            quote_ident(session_user), quote_literal(by), session_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF by !~ '^[a-z]+ [^[:cntrl:]]{1,200}$' THEN
        RAISE EXCEPTION 'by: % must be a kind and a name, like ''user alice'' or ''token 12''', quote_literal(by)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN by;
END $$;

-- The checks every queue function makes of its queue name (a queue name as tasks take:
-- taskspec's) and of its tenant (one that exists: the queue row refers to it).
CREATE FUNCTION pgsched_internal.limits_queue_check_v1(t text, queue_name text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF queue_name IS NULL OR queue_name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' THEN
        RAISE EXCEPTION 'queue_name: % must be 1-64 characters: letters, digits and . _ - (starting with a letter or digit)',
            coalesce(quote_literal(queue_name), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM pgsched.tenant x WHERE x.name = t) THEN
        RAISE EXCEPTION 'tenant: no tenant %', quote_literal(t) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

-- Pause a queue of the caller's tenant: claims take nothing from it (executions already
-- running go on). A queue with no row gets one. Pausing a paused queue keeps when and by
-- whom it was paused, and takes the new reason when one is given.
CREATE FUNCTION pgsched.queue_pause_v1(queue_name text, reason text DEFAULT NULL, tenant text DEFAULT NULL,
                                       by text DEFAULT NULL) RETURNS pgsched.queue
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    who text;
    r pgsched.queue;
BEGIN
    queue_pause_v1.tenant := pgsched_internal.caller_tenant_v1(queue_pause_v1.tenant);
    PERFORM pgsched_internal.limits_queue_check_v1(queue_pause_v1.tenant, queue_name);
    who := pgsched_internal.limits_by_v1(by);
    reason := nullif(btrim(reason), '');
    IF reason ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'reason: % must hold no control characters (newlines, escapes): it is shown on one line',
            quote_literal(left(reason, 40)) USING ERRCODE = 'invalid_parameter_value';
    ELSIF length(reason) > 500 THEN
        RAISE EXCEPTION 'reason: % must be at most 500 characters (it has %)', quote_literal(left(reason, 40) || '…'),
            length(reason) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgsched.queue AS q (tenant, name, paused_at, paused_by, pause_reason)
    VALUES (queue_pause_v1.tenant, queue_name, now(), who, reason)
    ON CONFLICT ON CONSTRAINT queue_pkey DO UPDATE
       SET paused_at = coalesce(q.paused_at, excluded.paused_at),
           paused_by = CASE WHEN q.paused_at IS NULL THEN excluded.paused_by ELSE q.paused_by END,
           pause_reason = coalesce(excluded.pause_reason, q.pause_reason),
           updated_at = now()
    RETURNING q.* INTO r;
    RETURN r;
END $$;

-- Resume a queue: claims take from it again, and its tenant's workers are woken at commit.
-- A queue that is not paused (or has no row) stays as it is. by: checked as for a pause
-- (a resumed queue keeps no pause fields, so nothing records it).
CREATE FUNCTION pgsched.queue_resume_v1(queue_name text, tenant text DEFAULT NULL, by text DEFAULT NULL)
    RETURNS pgsched.queue
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    r pgsched.queue;
BEGIN
    queue_resume_v1.tenant := pgsched_internal.caller_tenant_v1(queue_resume_v1.tenant);
    PERFORM pgsched_internal.limits_queue_check_v1(queue_resume_v1.tenant, queue_name);
    PERFORM pgsched_internal.limits_by_v1(by);
    UPDATE pgsched.queue q
       SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, updated_at = now()
     WHERE q.tenant = queue_resume_v1.tenant AND q.name = queue_name AND q.paused_at IS NOT NULL;
    SELECT * INTO r FROM pgsched.queue q WHERE q.tenant = queue_resume_v1.tenant AND q.name = queue_name;
    IF NOT FOUND THEN
        r := ROW(queue_resume_v1.tenant, queue_name, NULL, NULL, NULL, NULL, NULL, NULL, now())::pgsched.queue;
    END IF;
    PERFORM pg_notify('pgsched_execution', queue_resume_v1.tenant);
    RETURN r;
END $$;

-- Set a queue's limits: an argument NULL leaves that limit as it is; a field named in
-- `clear` ('max_running', 'rate_limit') is set to no limit ('rate_limit' clears its period
-- too). Limits are integers from 1; a period is seconds above 0, at most a year. A rate
-- limit needs a period: give both, or change one of a queue that has both.
CREATE FUNCTION pgsched.queue_set_limits_v1(queue_name text, max_running integer DEFAULT NULL,
                                            rate_limit integer DEFAULT NULL,
                                            rate_period_seconds double precision DEFAULT NULL,
                                            clear text[] DEFAULT '{}', tenant text DEFAULT NULL)
    RETURNS pgsched.queue
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    bad text;
    r pgsched.queue;
    was pgsched.queue;
BEGIN
    queue_set_limits_v1.tenant := pgsched_internal.caller_tenant_v1(queue_set_limits_v1.tenant);
    PERFORM pgsched_internal.limits_queue_check_v1(queue_set_limits_v1.tenant, queue_name);
    clear := coalesce(clear, '{}');
    SELECT c INTO bad FROM unnest(clear) AS c WHERE c IS NULL OR c NOT IN ('max_running', 'rate_limit') LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'clear: % is not a limit of a queue (max_running, rate_limit)',
            coalesce(quote_literal(bad), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_running IS NOT NULL AND max_running < 1 THEN
        RAISE EXCEPTION 'max_running: % must be an integer from 1 (NULL leaves it; clear => ''{max_running}'' removes it)',
            max_running USING ERRCODE = 'invalid_parameter_value';
    ELSIF rate_limit IS NOT NULL AND rate_limit < 1 THEN
        RAISE EXCEPTION 'rate_limit: % must be an integer from 1 (NULL leaves it; clear => ''{rate_limit}'' removes it)',
            rate_limit USING ERRCODE = 'invalid_parameter_value';
    ELSIF rate_period_seconds IS NOT NULL
          AND NOT (rate_period_seconds >= 0.001 AND rate_period_seconds <= 366 * 86400) THEN
        RAISE EXCEPTION 'rate_period_seconds: % must be a number of seconds from 0.001, at most 31622400 (a year)',
            rate_period_seconds USING ERRCODE = 'invalid_parameter_value';
    ELSIF max_running IS NOT NULL AND 'max_running' = ANY (clear) THEN
        RAISE EXCEPTION 'max_running: % given and cleared at once', max_running
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF (rate_limit IS NOT NULL OR rate_period_seconds IS NOT NULL) AND 'rate_limit' = ANY (clear) THEN
        RAISE EXCEPTION 'rate_limit: % per % s given and cleared at once', rate_limit, rate_period_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO was FROM pgsched.queue q
     WHERE q.tenant = queue_set_limits_v1.tenant AND q.name = queue_name FOR UPDATE;
    IF (coalesce(rate_limit, was.rate_limit) IS NULL) <> (coalesce(rate_period_seconds, was.rate_period_seconds) IS NULL)
       AND NOT 'rate_limit' = ANY (clear) THEN
        IF rate_limit IS NOT NULL THEN
            RAISE EXCEPTION 'rate_period_seconds: a rate limit of % needs a period (rate_period_seconds)', rate_limit
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RAISE EXCEPTION 'rate_limit: a period of % s needs a rate limit (rate_limit)', rate_period_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the row as it will be (a CHECK holds the row an INSERT proposes, before its conflict)
    max_running := CASE WHEN 'max_running' = ANY (clear) THEN NULL ELSE coalesce(max_running, was.max_running) END;
    rate_limit := CASE WHEN 'rate_limit' = ANY (clear) THEN NULL ELSE coalesce(rate_limit, was.rate_limit) END;
    rate_period_seconds := CASE WHEN 'rate_limit' = ANY (clear) THEN NULL
                                ELSE coalesce(rate_period_seconds, was.rate_period_seconds) END;
    INSERT INTO pgsched.queue AS q (tenant, name, max_running, rate_limit, rate_period_seconds)
    VALUES (queue_set_limits_v1.tenant, queue_name, max_running, rate_limit, rate_period_seconds)
    ON CONFLICT ON CONSTRAINT queue_pkey DO UPDATE
       SET max_running = excluded.max_running, rate_limit = excluded.rate_limit,
           rate_period_seconds = excluded.rate_period_seconds, updated_at = now()
    RETURNING q.* INTO r;
    PERFORM pg_notify('pgsched_execution', queue_set_limits_v1.tenant);
    RETURN r;
END $$;

-- A tenant's quotas and what it uses now: running counted from the rows; hour_starts this
-- clock hour (UTC) by the claims; compute minutes this calendar month (UTC) and log bytes as
-- the leader's usage job last measured them (measured_at); over: the slow quotas exceeded.
-- NULL quotas: none. tenant NULL: the caller's (docs/sql-api.md, Tenants). name: the tenant's.
CREATE FUNCTION pgsched.tenant_usage_v1(tenant text DEFAULT NULL)
    RETURNS TABLE(name text, max_running integer, running bigint, max_starts_per_hour integer,
                  hour_starts bigint, max_compute_minutes_per_month bigint, compute_minutes double precision,
                  max_log_bytes bigint, log_bytes bigint, weight integer, over text[],
                  measured_at timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
#variable_conflict use_column
DECLARE
    t text := pgsched_internal.caller_tenant_v1(tenant_usage_v1.tenant);
BEGIN
    RETURN QUERY
        SELECT x.name, x.max_running,
               (SELECT count(*) FROM pgsched.execution e WHERE e.tenant = x.name AND e.state = 'running'),
               x.max_starts_per_hour,
               CASE WHEN u.hour_start = date_trunc('hour', now(), 'UTC') THEN u.hour_starts ELSE 0 END,
               x.max_compute_minutes_per_month,
               CASE WHEN u.month_start = date_trunc('month', now(), 'UTC') THEN u.compute_seconds / 60 ELSE 0 END,
               x.max_log_bytes, coalesce(u.log_bytes, 0), x.weight, coalesce(u.over, '{}'), u.measured_at
          FROM pgsched.tenant x LEFT JOIN pgsched.tenant_usage u ON u.tenant = x.name
         WHERE x.name = t;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant: no tenant %', quote_literal(t) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

-- Set a tenant's quotas; the installation's alone. An argument NULL leaves that quota; a
-- field named in `clear` ('max_running', 'max_starts_per_hour',
-- 'max_compute_minutes_per_month', 'max_log_bytes') is set to none. Quotas are integers
-- from 0 (0: the tenant starts nothing); weight 1 to 100 (it is never none). Returns the
-- tenant's row as it is now (tenant_usage_v1 reads it with the usage).
CREATE FUNCTION pgsched.tenant_set_quotas_v1(tenant text, max_running integer DEFAULT NULL,
                                             max_starts_per_hour integer DEFAULT NULL,
                                             max_compute_minutes_per_month bigint DEFAULT NULL,
                                             max_log_bytes bigint DEFAULT NULL, weight integer DEFAULT NULL,
                                             clear text[] DEFAULT '{}')
    RETURNS pgsched.tenant
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
#variable_conflict use_variable
DECLARE
    t text := tenant_set_quotas_v1.tenant;
    r pgsched.tenant;
    bad text;
    n bigint;
    f text;
BEGIN
    IF NOT (pgsched_internal.is_instance_v1()
            OR (pg_has_role(session_user, 'pgsched_web', 'MEMBER')
                AND NOT EXISTS (SELECT FROM pgsched.tenant_role m WHERE m.role_name = session_user)
                AND pgsched_internal.session_tenant_v1() = '*')) THEN
        RAISE EXCEPTION 'tenant: quotas are the installation''s to set; role % acts for %',
            quote_ident(session_user),
            coalesce('tenant ' || quote_literal(pgsched_internal.session_tenant_v1()) || ' only', 'no tenant')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'an installation-wide login (pgsched_instance or the owner) sets quotas';
    END IF;
    IF t IS NULL OR NOT EXISTS (SELECT FROM pgsched.tenant x WHERE x.name = t) THEN
        RAISE EXCEPTION 'tenant: no tenant %', coalesce(quote_literal(t), 'NULL') USING ERRCODE = 'no_data_found';
    END IF;
    clear := coalesce(clear, '{}');
    SELECT c INTO bad FROM unnest(clear) AS c
     WHERE c IS NULL OR c NOT IN ('max_running', 'max_starts_per_hour', 'max_compute_minutes_per_month', 'max_log_bytes')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'clear: % is not a quota that can be none (max_running, max_starts_per_hour, '
                        'max_compute_minutes_per_month, max_log_bytes)', coalesce(quote_literal(bad), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH f IN ARRAY ARRAY['max_running', 'max_starts_per_hour', 'max_compute_minutes_per_month', 'max_log_bytes'] LOOP
        n := CASE f WHEN 'max_running' THEN max_running WHEN 'max_starts_per_hour' THEN max_starts_per_hour
                    WHEN 'max_compute_minutes_per_month' THEN max_compute_minutes_per_month
                    ELSE max_log_bytes END;
        IF n < 0 THEN
            RAISE EXCEPTION '%: % must be an integer from 0 (NULL leaves it; clear => ''{%}'' removes it)', f, n, f
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF n IS NOT NULL AND f = ANY (clear) THEN
            RAISE EXCEPTION '%: % given and cleared at once', f, n USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF weight IS NOT NULL AND NOT weight BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'weight: % must be an integer from 1 to 100', weight USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE pgsched.tenant x
       SET max_running = CASE WHEN 'max_running' = ANY (clear) THEN NULL ELSE coalesce(max_running, x.max_running) END,
           max_starts_per_hour = CASE WHEN 'max_starts_per_hour' = ANY (clear) THEN NULL
                                      ELSE coalesce(max_starts_per_hour, x.max_starts_per_hour) END,
           max_compute_minutes_per_month = CASE WHEN 'max_compute_minutes_per_month' = ANY (clear) THEN NULL
                                                ELSE coalesce(max_compute_minutes_per_month,
                                                              x.max_compute_minutes_per_month) END,
           max_log_bytes = CASE WHEN 'max_log_bytes' = ANY (clear) THEN NULL ELSE coalesce(max_log_bytes, x.max_log_bytes) END,
           weight = coalesce(weight, x.weight)
     WHERE x.name = t
    RETURNING x.* INTO r;
    PERFORM pg_notify('pgsched_execution', t);
    RETURN r;
END $$;

SELECT pgsched_internal.secure_v1();
