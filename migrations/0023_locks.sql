-- 0023: distributed locks for task code (issue 18, item 7; docs/limits.md, "Distributed
-- locks"; docs/sql-api.md).
--
-- PostgreSQL's advisory locks, under names a tenant chooses: "only one of these at a time
-- across the fleet". A lock is held by a database session (scope 'session': until released
-- or the session ends, however it ends) or by a transaction (scope 'transaction': until it
-- commits or rolls back). Every function acts in the caller's tenant, resolved from its
-- login as every public function does (caller_tenant_v1, 0018); a lock's key is
--
--     hashtextextended('pgsched.lock ' || tenant || ' ' || name, seed)
--
-- a bigint (pg_locks: objsubid = 1) in a space of its own beside pgsched's own keys (the
-- leader's and the migrator's constants, the retry budget's and the roll-up's, the claim's
-- 'pgsched.limits ' || tenant, the DAG apply's 'pgsched.dag ' || tenant || ' ' || name):
-- another prefix, so tenant A's "x" and tenant B's "x" are two keys, and no name of a
-- tenant is a key of pgsched's (a tenant's name has no space, so the text is unambiguous;
-- 64 bits of hash: two names of any tenants share a key with a probability of about
-- n^2 / 2^65). The seed is a random number of this database that only pgsched_owner reads
-- (lock_seed): PostgreSQL lets any login call pg_advisory_lock on any key, and without
-- the seed a login of tenant B could compute the key of A's "x" and hold it before A
-- does. With it, B can only see the keys held at the moment in pg_locks (docs/security.md).
--
-- The lock's name is recorded (lock_name, read by lock_list_v1: pg_locks shows keys only),
-- once per name and then again when last recorded over an hour ago. Pruned by the take of
-- a new name: up to 1,000 names last taken over 7 days ago and not held now go.

CREATE TABLE pgsched_internal.lock_seed (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    seed bigint NOT NULL
);
COMMENT ON TABLE pgsched_internal.lock_seed IS
    'the hash seed of lock keys (lock_key_v1): secret, so another tenant cannot compute a key';
INSERT INTO pgsched_internal.lock_seed (seed)
VALUES (('x' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint);

CREATE TABLE pgsched_internal.lock_name (
    key bigint PRIMARY KEY,
    tenant text NOT NULL,
    name text NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE pgsched_internal.lock_name IS
    'the name and tenant of a lock key (lock_list_v1); taken_at: when last recorded (within an hour)';

-- The key of a tenant's lock, and the checks of a name: 1 to 256 characters.
CREATE FUNCTION pgsched_internal.lock_key_v1(tenant text, name text) RETURNS bigint
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF tenant IS NULL OR tenant = '*' THEN
        RAISE EXCEPTION 'tenant: a lock is one tenant''s; name the tenant, not %', coalesce(quote_literal(tenant), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF name IS NULL OR name = '' THEN
        RAISE EXCEPTION 'name: a lock needs a name' USING ERRCODE = 'invalid_parameter_value';
    ELSIF length(name) > 256 THEN
        RAISE EXCEPTION 'name: % (% characters) is longer than a lock name may be (256)',
            quote_literal(left(name, 60) || '…'), length(name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN hashtextextended('pgsched.lock ' || tenant || ' ' || name,
                            (SELECT s.seed FROM pgsched_internal.lock_seed s));
END $$;

CREATE FUNCTION pgsched_internal.lock_scope_v1(scope text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF scope IS NULL OR scope NOT IN ('session', 'transaction') THEN
        RAISE EXCEPTION 'scope: % is not a lock scope; use session or transaction',
            coalesce(quote_literal(scope), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN scope;
END $$;

-- Whether this session holds key (granted, in this database): held by this session or its
-- transaction.
CREATE FUNCTION pgsched_internal.lock_held_v1(key bigint) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT EXISTS (SELECT FROM pg_catalog.pg_locks l
                    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                      AND l.pid = pg_backend_pid()
                      AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                                         WHERE d.datname = current_database())
                      AND ((l.classid::bigint << 32) | l.objid::bigint) = key);
$$;

-- A lock just got: its name recorded (once an hour at most), and old names pruned when a
-- new one is recorded. When recording fails (a read-only transaction, a timeout), a
-- session-scope lock just got is released before the error goes on: a rollback would not
-- release it, and the session would hold a lock it was told it did not get.
CREATE FUNCTION pgsched_internal.lock_named_v1(key bigint, tenant text, name text, scope text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pgsched_internal.lock_record_v1(key, tenant, name);
EXCEPTION WHEN OTHERS THEN
    IF scope = 'session' THEN
        PERFORM pg_advisory_unlock(key);
    END IF;
    RAISE;
END $$;

CREATE FUNCTION pgsched_internal.lock_record_v1(key bigint, tenant text, name text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    last timestamptz;
BEGIN
    SELECT n.taken_at INTO last FROM pgsched_internal.lock_name n WHERE n.key = lock_record_v1.key;
    IF last > now() - interval '1 hour' THEN
        RETURN;
    ELSIF last IS NOT NULL THEN
        UPDATE pgsched_internal.lock_name n SET taken_at = now() WHERE n.key = lock_record_v1.key;
        RETURN;
    END IF;
    INSERT INTO pgsched_internal.lock_name (key, tenant, name) VALUES (key, tenant, name)
    ON CONFLICT ON CONSTRAINT lock_name_pkey DO UPDATE SET taken_at = now();
    IF EXISTS (SELECT FROM pgsched_internal.lock_name n WHERE n.taken_at < now() - interval '7 days') THEN
        DELETE FROM pgsched_internal.lock_name n
         WHERE n.key IN (SELECT o.key FROM pgsched_internal.lock_name o
                          WHERE o.taken_at < now() - interval '7 days'
                            AND NOT EXISTS (
                                SELECT FROM pg_catalog.pg_locks l
                                 WHERE l.locktype = 'advisory' AND l.objsubid = 1
                                   AND ((l.classid::bigint << 32) | l.objid::bigint) = o.key)
                          LIMIT 1000);
    END IF;
END $$;

CREATE FUNCTION pgsched.lock_try_v1(name text, scope text DEFAULT 'session', tenant text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    k bigint;
    got boolean;
BEGIN
    lock_try_v1.tenant := pgsched_internal.caller_tenant_v1(lock_try_v1.tenant);
    k := pgsched_internal.lock_key_v1(lock_try_v1.tenant, lock_try_v1.name);
    IF pgsched_internal.lock_scope_v1(scope) = 'session' THEN
        got := pg_try_advisory_lock(k);
    ELSE
        got := pg_try_advisory_xact_lock(k);
    END IF;
    IF got THEN
        PERFORM pgsched_internal.lock_named_v1(k, lock_try_v1.tenant, lock_try_v1.name, scope);
    END IF;
    RETURN got;
END $$;
COMMENT ON FUNCTION pgsched.lock_try_v1(text, text, text) IS
    'take the caller''s tenant''s lock NAME if free (scope session or transaction); whether it was got';

CREATE FUNCTION pgsched.lock_wait_v1(name text, timeout_seconds double precision DEFAULT NULL,
                                     scope text DEFAULT 'session', tenant text DEFAULT NULL)
    RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    k bigint;
    got boolean := true;
    was text := current_setting('lock_timeout');
BEGIN
    lock_wait_v1.tenant := pgsched_internal.caller_tenant_v1(lock_wait_v1.tenant);
    k := pgsched_internal.lock_key_v1(lock_wait_v1.tenant, lock_wait_v1.name);
    PERFORM pgsched_internal.lock_scope_v1(scope);
    IF timeout_seconds IS NOT NULL AND NOT (timeout_seconds >= 0 AND timeout_seconds < 'Infinity') THEN
        RAISE EXCEPTION 'timeout_seconds: % is not a number of seconds >= 0 (NULL: no limit)', timeout_seconds
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF timeout_seconds = 0 THEN
        RETURN pgsched.lock_try_v1(name, scope, lock_wait_v1.tenant);
    END IF;
    -- lock_timeout bounds the wait (in ms; 0 is none), for this call only: set for the
    -- transaction, then set back (PostgreSQL manual, "Client Connection Defaults")
    PERFORM set_config('lock_timeout',
                       CASE WHEN timeout_seconds IS NULL THEN '0'
                            ELSE least(ceil(timeout_seconds * 1000), 2147483647)::bigint::text END, true);
    BEGIN
        IF scope = 'session' THEN
            PERFORM pg_advisory_lock(k);
        ELSE
            PERFORM pg_advisory_xact_lock(k);  -- kept by the transaction when this block ends
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        got := false;
    END;
    PERFORM set_config('lock_timeout', was, true);
    IF got THEN
        PERFORM pgsched_internal.lock_named_v1(k, lock_wait_v1.tenant, lock_wait_v1.name, scope);
    END IF;
    RETURN got;
END $$;
COMMENT ON FUNCTION pgsched.lock_wait_v1(text, double precision, text, text) IS
    'take the caller''s tenant''s lock NAME, waiting up to timeout_seconds (NULL: no limit); whether it was got';

CREATE FUNCTION pgsched.lock_release_v1(name text, tenant text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    k bigint;
    quiet text := current_setting('client_min_messages');
    done boolean;
BEGIN
    lock_release_v1.tenant := pgsched_internal.caller_tenant_v1(lock_release_v1.tenant);
    k := pgsched_internal.lock_key_v1(lock_release_v1.tenant, lock_release_v1.name);
    IF NOT pgsched_internal.lock_held_v1(k) THEN
        RETURN false;
    END IF;
    -- a transaction's lock is not released early: pg_advisory_unlock says false, and warns
    PERFORM set_config('client_min_messages', 'error', true);
    done := pg_advisory_unlock(k);
    PERFORM set_config('client_min_messages', quiet, true);
    RETURN done;
END $$;
COMMENT ON FUNCTION pgsched.lock_release_v1(text, text) IS
    'release one hold of this session on the caller''s tenant''s lock NAME (session scope); whether it held one';

-- The locks of the caller's tenant ('*': every tenant, for the installation and the web),
-- held and waited for, by any session of this database.
CREATE FUNCTION pgsched.lock_list_v1(tenant text DEFAULT NULL)
    RETURNS TABLE (lock_tenant text, lock_name text, lock_key bigint, granted boolean, pid integer,
                   waiting_since timestamptz, application_name text, execution_id bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    lock_list_v1.tenant := pgsched_internal.caller_tenant_v1(lock_list_v1.tenant);
    RETURN QUERY
    SELECT n.tenant, n.name, n.key, l.granted, l.pid, l.waitstart, a.application_name::text, e.id
      FROM pg_catalog.pg_locks l
      JOIN pgsched_internal.lock_name n ON n.key = ((l.classid::bigint << 32) | l.objid::bigint)
      LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
      -- a worker's execution locks are held on a session named for the execution
      -- (pgsched/worker/execution_locks.py); shown when it is running in this tenant
      LEFT JOIN pgsched.execution e
             ON e.id = (substring(a.application_name FROM '^pgsched execution ([0-9]{1,18})$'))::bigint
            AND e.tenant = n.tenant AND e.state = 'running'
     WHERE l.locktype = 'advisory' AND l.objsubid = 1
       AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
       AND (lock_list_v1.tenant = '*' OR n.tenant = lock_list_v1.tenant)
     ORDER BY n.tenant, n.name, l.granted DESC, l.waitstart, l.pid;
END $$;
COMMENT ON FUNCTION pgsched.lock_list_v1(text) IS
    'the locks of the caller''s tenant, held (granted) and waited for, with the session and execution';

-- The owner, grants and row-level security of what this migration added (0018): the
-- functions of pgsched are every login's (applications', engines', the web's); the tables
-- of pgsched_internal are the owner's alone.
SELECT pgsched_internal.secure_v1();
