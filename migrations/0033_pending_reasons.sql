-- Why a pending execution has not started, beyond the limits (issue 18, a newcomer's finding).
-- wait_reason_v1 (0021, 0022, 0030) names the limit that holds a due execution, and nothing
-- else: a retry waiting out its backoff, a run enqueued for later and a queue no worker
-- serves all read as no reason at all. pending_reason_v1 gives those three, in this order:
--   1. not due, after a failed attempt: "attempt 2 waits out its retry backoff until ...";
--   2. not due, never tried: "due at ... UTC (in N s)";
--   3. a limit holds it: wait_reason_v1's text, unchanged;
--   4. due and free, but no live worker serves its queue for its tenant:
--      "no running worker serves queue imports of tenant acme".
-- wait_reason_v1 itself is unchanged, so the queue listing's count of work held by a limit
-- (sql/limits.sql, limits_queue_list) still counts only what a limit holds.
--
-- Which workers serve a queue is read by queue_served_v1, a definer: a tenant's login sees
-- under row-level security only the workers dedicated to it (0019), not the shared ones,
-- and would read "no worker" beside a shared worker that serves it. The function answers
-- only for the session's own tenant (or for any, to the installation and a web login acting
-- for every tenant), and only whether one serves: no worker's name, host or number.

CREATE FUNCTION pgsched_internal.queue_served_v1(t text, q text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
    SELECT CASE
        WHEN pgsched_internal.is_instance_v1()
             OR pgsched_internal.session_tenant_v1() IN (t, '*')
        THEN EXISTS (SELECT FROM pgsched.worker w
                      WHERE w.state = 'running'
                        AND now() - w.last_heartbeat_at <= 3 * w.heartbeat_interval * interval '1 second'
                        AND q = ANY (w.queues)
                        AND (w.tenants IS NULL OR t = ANY (w.tenants)))
    END;
$$;
COMMENT ON FUNCTION pgsched_internal.queue_served_v1(text, text) IS
    'whether a live worker (running, heartbeat within 3 intervals) serves queue q of tenant t; '
    'NULL when the session may not ask about t (migration 0033)';

CREATE FUNCTION pgsched_internal.at_text_v1(at timestamptz) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT format('%s UTC (in %s s)', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
                  greatest(ceil(extract(epoch FROM at - now())), 0)::bigint);
$$;
COMMENT ON FUNCTION pgsched_internal.at_text_v1(timestamptz) IS
    'a time of a pending reason: UTC, and in how many seconds by now() (migration 0033)';

CREATE FUNCTION pgsched_internal.pending_reason_v1(e pgsched.execution) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    reason text;
BEGIN
    IF e.state <> 'pending' THEN
        RETURN NULL;
    END IF;
    IF e.run_at > now() THEN
        IF e.attempt >= 1 THEN
            RETURN format('attempt %s failed; attempt %s waits out its retry backoff until %s',
                          e.attempt, e.attempt + 1, pgsched_internal.at_text_v1(e.run_at))
                   || CASE WHEN e.budget_delay_seconds > 0
                           THEN format(' (%s s of it for the retry budget)',
                                       ceil(e.budget_delay_seconds)::bigint)
                           ELSE '' END;
        END IF;
        RETURN 'due at ' || pgsched_internal.at_text_v1(e.run_at);
    END IF;
    reason := pgsched_internal.wait_reason_v1(e);
    IF reason IS NOT NULL THEN
        RETURN reason;
    END IF;
    IF NOT pgsched_internal.queue_served_v1(e.tenant, e.queue) THEN
        RETURN format('no running worker serves queue %s of tenant %s', e.queue, e.tenant);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION pgsched_internal.pending_reason_v1(pgsched.execution) IS
    'why a pending execution has not started: its backoff, its due time, a limit '
    '(wait_reason_v1), or no worker serving its queue; NULL when none holds (migration 0033)';

-- secure_v1 (0029) takes EXECUTE on every definer in pgsched_internal from the engine and
-- web logins but for a list of names written into its body. Rather than copy that body to
-- add one name, 0029's function is kept under another name and secure_v1 becomes it plus
-- the definers opened since, so every later migration's SELECT secure_v1() keeps them open.
ALTER FUNCTION pgsched_internal.secure_v1() RENAME TO secure_0029_v1;

CREATE FUNCTION pgsched_internal.secure_v1() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pgsched_internal.secure_0029_v1();
    REVOKE EXECUTE ON FUNCTION pgsched_internal.secure_v1(), pgsched_internal.secure_0029_v1()
        FROM PUBLIC, pgsched_engine, pgsched_web;
    -- 0033: answers only for the caller's own tenant, and only whether a worker serves
    GRANT EXECUTE ON FUNCTION pgsched_internal.queue_served_v1(text, text)
        TO pgsched_engine, pgsched_web;
END $$;
COMMENT ON FUNCTION pgsched_internal.secure_v1() IS
    'ownership, grants and row-level security of every pgsched object (0029), and the '
    'definers opened to engine and web logins since (0033); run at the end of each migration';

SELECT pgsched_internal.secure_v1();
