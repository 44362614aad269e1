-- 0026: the claim's fair share over time, not within one claim, and a claim that reads only
-- the tenants it takes from (issue 18, item 2; the attack's findings 7, 8 and 9).
--
-- 0021's claim ranked each tenant's picks within the claim (1/weight, 2/weight, ...), so a
-- worker at capacity, asking for one at a time, served the heaviest tenant every time and
-- the others never (finding 8); it locked and read every tenant with due work to keep one
-- row (finding 9: 230 ms and 201 locks with 200 tenants); and its per-tenant lock was an
-- advisory key any login could compute and hold, stalling that tenant's claims (finding 7).
--
-- Now each tenant has a virtual time (tenant_usage.vtime): the finish tag of its latest
-- start, each start counting 1/weight, which is the start tag of its next. A claim serves
-- the tenants in order of their starts' tags (vtime + (k-1)/weight for its k-th pick in
-- this claim, the least first): start-time fair queueing
-- (Goyal, Vin and Cheng, 1996), a form of weighted fair queueing (Demers, Keshav and
-- Shenker, 1989). Over any run of claims, a tenant with ready work gets its weight's share
-- of the starts, a claim of one included, whatever the claims' sizes. The system's virtual
-- time is the start tag of the latest start (the greatest tenant_usage.start_tag, kept by
-- each claim for the tenants it charged, read in one descent of an index): a tenant behind
-- it (it had no work ready, or waited at a limit, or is new) is served from it, so it shares
-- from then on instead of taking every start until it has caught up what it missed. A
-- tenant with work ready all along is never behind it. A tenant asked by a claim that took
-- nothing (held at a limit) is moved one start past it, so that it is not the first
-- candidate of every claim while it waits.
--
-- A claim for n rows needs at most n tenants: it takes the first n candidates by their
-- first start's tag that have due work (looked at one by one, in that order), locks them, and
-- gives each its allotment (the top n tags among them). The lock is the tenant's
-- tenant_usage row, FOR NO KEY UPDATE SKIP LOCKED: a locking SELECT needs the UPDATE
-- privilege (PostgreSQL, SELECT: "The locking clauses") and passes row-level security's
-- UPDATE policies as well, and no tenant's login has both on tenant_usage (an app login has
-- no privilege, an engine login no UPDATE policy), so no login but the installation's can
-- hold it; a claim passes over a tenant another claim is serving and
-- waits for one only when it could take nothing otherwise, as before. A tenant that
-- returns fewer than its allotment (a limit, or less due work) is done; what is left of the
-- claim goes, in a further round, to the tenants that filled theirs and to the next
-- candidates (at most ten rounds). Each round moves its picks to running and counts them
-- (starts this hour, rate windows, vtime) before the next, whose limits count them as any
-- other claim's. A tenant's vtime is read again once it is locked, and charged from that.

ALTER TABLE pgsched.tenant_usage
    ADD COLUMN vtime double precision NOT NULL DEFAULT 0,
    ADD COLUMN start_tag double precision NOT NULL DEFAULT 0;
COMMENT ON COLUMN pgsched.tenant_usage.vtime IS
    'the tenant''s virtual time in the fair share: the finish tag of its latest start (each '
    'start 1/weight after the one before, from at least the system''s virtual time; migration 0026)';
COMMENT ON COLUMN pgsched.tenant_usage.start_tag IS
    'the start tag of the tenant''s latest start; the greatest of all is the system''s virtual time';
-- the system's virtual time, one descent: the greatest start tag of any tenant
CREATE INDEX tenant_usage_start_tag_idx ON pgsched.tenant_usage (start_tag);

CREATE OR REPLACE FUNCTION pgsched_internal.execution_claim_v1(
    p_worker_id bigint, p_queues text[], p_tenants text[], p_limit integer, p_now timestamptz,
    p_known_task_ids bigint[], p_known_task_versions bigint[])
    RETURNS TABLE (id bigint, tenant text, task_id bigint, scheduled_at timestamptz, run_at timestamptz,
                   priority smallint, attempt integer, max_attempts integer, params text,
                   started_at timestamptz, trigger text, lease_id bigint,
                   cancel_requested_at timestamptz, dag_run_id bigint, confirm_start boolean,
                   backoff_from_attempt integer, task_version bigint, task jsonb)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    -- every statement has an index to read; a generic plan made on a near-empty table must
    -- not pick a seq scan (0021; tests/db/test_claim_stale_plan.py)
    SET enable_seqscan = off
    AS $$
#variable_conflict use_column
DECLARE
    -- the claim's instant: p_now is the installation's own (tests, benchmarks); a tenant's
    -- login claims at the database's now(), so it cannot move its hourly quota's window
    at timestamptz := CASE WHEN pgsched_internal.is_instance_v1() THEN coalesce(p_now, now()) ELSE now() END;
    served text[];
    own text;
    -- the candidates, in the order of their first tag: name, vtime as served from (raised
    -- to the system's virtual time), weight
    c_t text[];
    c_v float8[];
    c_w int[];
    sys_v float8;         -- the system's virtual time: the greatest start tag given so far
    next_c int := 1;      -- the next candidate not yet looked at
    -- the tenants taken in this claim (locked): name, vtime, weight, picks so far, done
    a_t text[] := '{}';
    a_v float8[] := '{}';
    a_w int[] := '{}';
    a_n int[] := '{}';
    a_done boolean[] := '{}';
    a_called boolean[] := '{}';
    a_waited boolean[] := '{}';
    a_free timestamptz[] := '{}';
    locked_v float8;
    wait_c int;           -- the first due candidate another claim held: waited for if need be
    allot int[];
    want int;
    got int := 0;
    round int := 0;
    i int;
    t text;
    share record;
    round_ids bigint[];
    round_tags float8[];
    moved int;
    all_ids bigint[] := '{}';
    all_tags float8[] := '{}';
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
    -- for every tenant: those with anything pending, by a walk of execution_ready_tenant_idx
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
    IF served IS NULL OR served = '{}' THEN
        RETURN;
    END IF;
    -- the system's virtual time (start-time fair queueing's v(t)): the start tag of the
    -- latest start. A tenant whose vtime is behind it (idle, held at a limit, new) is
    -- served from it: it shares from now on and is not owed what it missed. A tenant with
    -- work ready all along is never behind it (each claim takes the least tags).
    sys_v := coalesce((SELECT u.start_tag FROM pgsched.tenant_usage u ORDER BY u.start_tag DESC LIMIT 1), 0);
    SELECT array_agg(s.tenant ORDER BY s.v, s.last_claim_at NULLS FIRST, s.tenant),
           array_agg(s.v ORDER BY s.v, s.last_claim_at NULLS FIRST, s.tenant),
           array_agg(s.w ORDER BY s.v, s.last_claim_at NULLS FIRST, s.tenant)
      INTO c_t, c_v, c_w
      FROM (SELECT q.tenant, greatest(coalesce(u.vtime, 0), sys_v) AS v,
                   coalesce(x.weight, 1) AS w, u.last_claim_at
              FROM (SELECT DISTINCT unnest(served)) AS q(tenant)
              JOIN pgsched.tenant x ON x.name = q.tenant
              LEFT JOIN pgsched.tenant_usage u ON u.tenant = q.tenant) s;
    IF c_t IS NULL THEN
        RETURN;
    END IF;
    LOOP
        round := round + 1;
        want := p_limit - got;
        -- the next candidates with due work, up to what the claim still wants; each locked,
        -- or passed over when another claim holds it
        WHILE next_c <= cardinality(c_t)
              AND (SELECT count(*) FROM unnest(a_done) AS d WHERE NOT d) < want LOOP
            t := c_t[next_c];
            IF EXISTS (SELECT FROM unnest(p_queues) AS q(queue) CROSS JOIN generate_series(1, 10) AS p(priority)
                        CROSS JOIN LATERAL (  -- one descent per front (a semi-join would scan them all)
                              SELECT FROM pgsched.execution e
                               WHERE e.state = 'pending' AND e.tenant = t AND e.queue = q.queue
                                 AND e.priority = p.priority AND e.run_at <= at
                               ORDER BY e.run_at  -- the index's order
                               LIMIT 1) due) THEN
                -- locked, its vtime read again under the lock (another claim may have
                -- charged it since the read above)
                SELECT greatest(u.vtime, sys_v) INTO locked_v FROM pgsched.tenant_usage u
                 WHERE u.tenant = t FOR NO KEY UPDATE SKIP LOCKED;
                IF NOT FOUND AND NOT EXISTS (SELECT FROM pgsched.tenant_usage u WHERE u.tenant = t) THEN
                    INSERT INTO pgsched.tenant_usage (tenant) VALUES (t) ON CONFLICT DO NOTHING;
                    SELECT greatest(u.vtime, sys_v) INTO locked_v FROM pgsched.tenant_usage u
                     WHERE u.tenant = t FOR NO KEY UPDATE SKIP LOCKED;
                END IF;
                IF FOUND THEN
                    a_t := a_t || t; a_v := a_v || locked_v; a_w := a_w || c_w[next_c];
                    a_n := a_n || 0; a_done := a_done || false; a_called := a_called || false;
                    a_waited := a_waited || false; a_free := a_free || NULL::timestamptz;
                ELSE
                    wait_c := coalesce(wait_c, next_c);
                END IF;
            END IF;
            next_c := next_c + 1;
        END LOOP;
        -- nothing could be taken but a tenant another claim serves: wait for it (its claim
        -- commits in milliseconds), then take it, reading what that claim wrote
        IF round = 1 AND a_t = '{}' AND wait_c IS NOT NULL THEN
            t := c_t[wait_c];
            PERFORM FROM pgsched.tenant_usage u WHERE u.tenant = t FOR NO KEY UPDATE;
            a_t := ARRAY[t];
            a_v := ARRAY[(SELECT greatest(u.vtime, sys_v) FROM pgsched.tenant_usage u WHERE u.tenant = t)];
            a_w := ARRAY[c_w[wait_c]];
            a_n := '{0}'; a_done := '{f}'; a_called := '{f}'; a_waited := '{f}';
            a_free := ARRAY[NULL::timestamptz];
        END IF;
        EXIT WHEN NOT false = ANY (a_done);
        -- each open tenant's allotment: how many of the next `want` tags are its
        SELECT array_agg(coalesce(n.k, 0) ORDER BY o.i) INTO allot
          FROM generate_subscripts(a_t, 1) AS o(i)
          LEFT JOIN (SELECT s.i, count(*)::int AS k
                       FROM (SELECT o2.i FROM generate_subscripts(a_t, 1) AS o2(i)
                              CROSS JOIN generate_series(1, least(want, 20000 / cardinality(a_t) + 1)) AS g(k)
                              WHERE NOT a_done[o2.i]
                              ORDER BY a_v[o2.i] + (a_n[o2.i] + g.k - 1)::float8 / a_w[o2.i], o2.i
                              LIMIT want) s
                      GROUP BY s.i) n ON n.i = o.i;
        round_ids := '{}';
        round_tags := '{}';
        FOR i IN 1 .. cardinality(a_t) LOOP
            CONTINUE WHEN a_done[i] OR allot[i] = 0;
            share := pgsched_internal.claim_tenant_v1(a_t[i], p_queues, allot[i], at);
            round_ids := round_ids || share.picks;
            round_tags := round_tags || ARRAY(SELECT a_v[i] + (a_n[i] + r - 1)::float8 / a_w[i]
                                                FROM generate_series(1, cardinality(share.picks)) AS r);
            a_n[i] := a_n[i] + cardinality(share.picks);
            a_called[i] := true;
            IF cardinality(share.picks) < allot[i] THEN
                a_done[i] := true;
            END IF;
            a_waited[i] := a_waited[i] OR share.waited;
            a_free[i] := least(a_free[i], share.free_at);
        END LOOP;
        moved := 0;
        IF round_ids <> '{}' THEN
            -- the round's picks to running, counted before the next round's limits count
            WITH claimed AS (
                UPDATE pgsched.execution e
                   SET state = 'running', attempt = e.attempt + 1, worker_id = p_worker_id,
                       started_at = at, lease_id = nextval('pgsched.lease_id_seq'),
                       budget_delay_seconds = NULL, start_confirmed_at = NULL
                 -- by their ids as a list, so that every plan reads the primary key (0021)
                 WHERE e.id = ANY (round_ids)
                   AND EXISTS (SELECT 1 FROM pgsched.worker w WHERE w.id = p_worker_id AND w.state = 'running')
                RETURNING e.id, e.tenant, e.task_id, e.queue, e.concurrency_key
            ), counted AS (
                -- the tags this claim gave the tenant, from a_v (its vtime read under this
                -- claim's lock, which it still holds): the finish tag of its latest start is
                -- its vtime, that start's own tag its start_tag
                INSERT INTO pgsched.tenant_usage AS u (tenant, hour_start, hour_starts, last_claim_at,
                                                       vtime, start_tag)
                SELECT c.tenant, date_trunc('hour', at, 'UTC'), count(*), at,
                       max(a_v[o.i] + a_n[o.i]::float8 / a_w[o.i]),
                       max(a_v[o.i] + (a_n[o.i] - 1)::float8 / a_w[o.i])
                  FROM claimed c JOIN generate_subscripts(a_t, 1) AS o(i) ON a_t[o.i] = c.tenant
                 GROUP BY c.tenant
                ON CONFLICT (tenant) DO UPDATE
                   SET hour_starts = CASE WHEN u.hour_start = EXCLUDED.hour_start
                                          THEN u.hour_starts + EXCLUDED.hour_starts ELSE EXCLUDED.hour_starts END,
                       hour_start = EXCLUDED.hour_start, last_claim_at = EXCLUDED.last_claim_at,
                       vtime = EXCLUDED.vtime, start_tag = EXCLUDED.start_tag
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
            SELECT count(*) INTO moved FROM claimed;
            -- the worker's row decides for every pick at once: all moved, or none (declared dead)
            EXIT WHEN moved = 0;
            got := got + moved;
            all_ids := all_ids || round_ids;
            all_tags := all_tags || round_tags;
        END IF;
        EXIT WHEN got >= p_limit OR round >= 10
                  OR (NOT false = ANY (a_done) AND next_c > cardinality(c_t));
    END LOOP;
    -- a tenant asked that took nothing (a limit held it, or its due work went to another
    -- claim) moves one start behind the system's virtual time: it is not the first
    -- candidate of every claim while it waits (each would lock it, ask it, and spend a
    -- round on it), and it is owed nothing when its limit frees
    IF EXISTS (SELECT FROM unnest(a_called, a_n) AS u(called, n) WHERE u.called AND u.n = 0) THEN
        UPDATE pgsched.tenant_usage u SET vtime = greatest(u.vtime, sys_v + 1.0 / x.w)
          FROM unnest(a_t, a_called, a_n, a_w) AS x(t, called, n, w)
         WHERE u.tenant = x.t AND x.called AND x.n = 0;
    END IF;
    -- who waits for a limit: a finish wakes their workers (execution_limit_freed)
    IF true = ANY (a_waited) THEN
        INSERT INTO pgsched.limit_wait AS w (tenant, since, free_at)
        SELECT u.t, at, u.f FROM unnest(a_t, a_waited, a_free) AS u(t, waited, f) WHERE u.waited
        ON CONFLICT (tenant) DO UPDATE SET free_at = EXCLUDED.free_at
         WHERE w.free_at IS DISTINCT FROM EXCLUDED.free_at;
    END IF;
    -- a tenant asked and not held back by a limit waits for none (one locked and not asked,
    -- its allotment 0, keeps what it had)
    IF EXISTS (SELECT FROM pgsched.limit_wait w, unnest(a_t, a_called, a_waited) AS u(t, called, waited)
                WHERE w.tenant = u.t AND u.called AND NOT u.waited) THEN
        DELETE FROM pgsched.limit_wait w USING unnest(a_t, a_called, a_waited) AS u(t, called, waited)
         WHERE w.tenant = u.t AND u.called AND NOT u.waited;
    END IF;
    IF all_ids = '{}' THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT e.id, e.tenant, e.task_id, e.scheduled_at, e.run_at, e.priority, e.attempt, e.max_attempts,
           CASE WHEN jsonb_typeof(e.params) = 'object' THEN e.params::text ELSE '{}' END,
           e.started_at, e.trigger, e.lease_id, e.cancel_requested_at, e.dag_run_id,
           e.confirm_start, e.backoff_from_attempt, t.xmin::text::bigint AS task_version,
           CASE WHEN k.task_id IS NULL THEN jsonb_build_object(
               'task_name', t.name, 'handler_kind', t.handler_kind, 'command', t.command, 'argv', t.argv,
               'python_target', t.python_target, 'env', t.env, 'stdin', t.stdin,
               'timeout_seconds', t.timeout_seconds, 'retry_policy', t.retry_policy,
               'retry_base_seconds', t.retry_base_seconds, 'retry_max_seconds', t.retry_max_seconds,
               'no_retry_exit_codes', t.no_retry_exit_codes, 'no_retry_exceptions', t.no_retry_exceptions)
           END AS task
      FROM unnest(all_ids, all_tags) AS o(id, tag)
      JOIN pgsched.execution e ON e.id = o.id
      JOIN pgsched.task t ON t.id = e.task_id
      LEFT JOIN unnest(p_known_task_ids, p_known_task_versions) AS k(task_id, version)
             ON k.task_id = e.task_id AND k.version = t.xmin::text::bigint
     WHERE e.id = ANY (all_ids)
     ORDER BY o.tag, e.id;
END $$;
COMMENT ON FUNCTION pgsched_internal.execution_claim_v1(bigint, text[], text[], integer, timestamptz, bigint[], bigint[]) IS
    'claims ready executions for a worker, every limit held, tenants served by weighted fair queueing (migrations 0021, 0026)';
SELECT pgsched_internal.secure_v1();
