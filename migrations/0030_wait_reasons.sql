-- 0030: a wait reason says when the wait ends (issue 18, what a new user met: "started its
-- rate limit of 60 per 60 s" gave the period in raw seconds and no time at which a start
-- would be free).
--
-- wait_reason_v1 (0021, 0022) names a rate's period in its largest whole unit (60 s is
-- "1m", 3600 s "1h", 90 s "90s": period_text_v1, the rule of pgsched.limits.format_rate)
-- and, for a rate limit or the hourly quota, appends when the next start is free, by the
-- database's clock: for a rate, the oldest start in the window leaving it
-- (limit_frees_at_v1, the time the claim itself wakes the waiting work at, 0022); for the
-- hourly quota, the top of the next hour, UTC. frees_text_v1 writes that time as
-- "; a start is free at 2026-12-03 10:20:31 UTC (in 12 s)". Nothing else changes: the
-- reasons are tried in the same order, and a limit that does not hold gives none.

CREATE FUNCTION pgsched_internal.period_text_v1(seconds double precision) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE
        WHEN seconds >= 86400 AND seconds::numeric % 86400 = 0 THEN (seconds / 86400)::bigint || 'd'
        WHEN seconds >= 3600 AND seconds::numeric % 3600 = 0 THEN (seconds / 3600)::bigint || 'h'
        WHEN seconds >= 60 AND seconds::numeric % 60 = 0 THEN (seconds / 60)::bigint || 'm'
        WHEN seconds::numeric % 1 = 0 THEN seconds::bigint || 's'
        ELSE seconds || 's' END;
$$;
COMMENT ON FUNCTION pgsched_internal.period_text_v1(double precision) IS
    'a rate period in its largest whole unit: 60 is 1m, 3600 1h, 90 90s (migration 0030)';

CREATE FUNCTION pgsched_internal.frees_text_v1(at timestamptz) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT format('; a start is free at %s UTC (in %s s)',
                  to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
                  greatest(ceil(extract(epoch FROM at - now())), 0)::bigint);
$$;
COMMENT ON FUNCTION pgsched_internal.frees_text_v1(timestamptz) IS
    'the tail of a wait reason: when a start is free, UTC, and in how many seconds by now() (migration 0030)';

CREATE OR REPLACE FUNCTION pgsched_internal.wait_reason_v1(e pgsched.execution) RETURNS text
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
                      ten.max_starts_per_hour)
               || pgsched_internal.frees_text_v1(date_trunc('hour', now(), 'UTC') + interval '1 hour');
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
            RETURN format('queue %s started its rate limit of %s per %s', e.queue, g.rate_limit,
                          pgsched_internal.period_text_v1(g.rate_period_seconds))
                   || pgsched_internal.frees_text_v1(pgsched_internal.limit_frees_at_v1(
                          e.tenant, 'queue_rate', e.queue, g.rate_period_seconds, now()));
        END IF;
    END IF;
    SELECT * INTO k FROM pgsched.task t WHERE t.id = e.task_id;
    IF k.overlap_policy = 'queue_one' AND coalesce(k.max_running, 1) >= 1 THEN  -- 0022
        SELECT count(*) INTO n FROM pgsched.execution x
         WHERE x.tenant = e.tenant AND x.task_id = e.task_id AND x.state = 'running';
        IF n >= 1 THEN
            RETURN format('task %s runs one execution at a time (overlap policy queue_one)', k.name);
        END IF;
    END IF;
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
            RETURN format('task %s started its rate limit of %s per %s', k.name, k.rate_limit,
                          pgsched_internal.period_text_v1(k.rate_period_seconds))
                   || pgsched_internal.frees_text_v1(pgsched_internal.limit_frees_at_v1(
                          e.tenant, 'task_rate', e.task_id::text, k.rate_period_seconds, now()));
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
            RETURN format('key %s started its rate limit of %s per %s', e.concurrency_key,
                          k.key_rate_limit, pgsched_internal.period_text_v1(k.key_rate_period_seconds))
                   || pgsched_internal.frees_text_v1(pgsched_internal.limit_frees_at_v1(
                          e.tenant, 'key_rate', e.concurrency_key, k.key_rate_period_seconds, now()));
        END IF;
    END IF;
    RETURN NULL;
END $$;

SELECT pgsched_internal.secure_v1();
