-- 0006: observability (docs/observability.md). Hourly roll-ups of finished executions for
-- dashboards and Prometheus, alerts (missed schedules, failure rates), per-task
-- notification webhooks and their delivery outbox.
--
-- Depends only on 0001-0004.

------------------------------------------------------------------------------------------
-- Settings (seconds, ratios, counts); a task's own row in task_alerting overrides the
-- alert thresholds.
------------------------------------------------------------------------------------------
INSERT INTO pgsched.setting (name, value) VALUES
    -- A due fire not started this many seconds after its run_at is a missed schedule.
    ('alert_missed_after_seconds', '60'),
    -- A task whose failures / (failures + successes) in the window is above this ...
    ('alert_failure_rate', '0.5'),
    -- ... over this many seconds ...
    ('alert_failure_window_seconds', '3600'),
    -- ... with at least this many finished executions, has a failure-rate alert.
    ('alert_failure_min_executions', '5'),
    -- Webhook delivery: attempts before giving up, backoff (exponential) and POST timeout.
    ('webhook_max_attempts', '8'),
    ('webhook_backoff_base_seconds', '5'),
    ('webhook_backoff_max_seconds', '600'),
    ('webhook_timeout_seconds', '5'),
    -- Prometheus: per-task series for at most this many tasks (the rest as task="other").
    ('metrics_task_limit', '100')
ON CONFLICT (name) DO NOTHING;

------------------------------------------------------------------------------------------
-- Roll-ups. Histogram buckets are cumulative counts per upper bound (Prometheus "le"),
-- bounds in seconds listed once here; the +Inf bucket is the row's count.
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.stats_bucket (
    kind    text    PRIMARY KEY CHECK (kind IN ('latency', 'duration')),
    bounds  float8[] NOT NULL
);
INSERT INTO pgsched.stats_bucket (kind, bounds) VALUES
    ('latency',  '{0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2,5,10,30,60,300,900,3600}'),
    ('duration', '{0.01,0.05,0.1,0.25,0.5,1,2.5,5,10,30,60,300,900,3600,10800}');

-- One row per (UTC hour of finished_at, task, final state): how many, and the latency
-- (started_at - run_at: from when the execution was due to when its last attempt started)
-- and duration (finished_at - started_at) sums and buckets of those that started.
CREATE TABLE pgsched.stats_hourly (
    hour             timestamptz NOT NULL,
    tenant           text        NOT NULL,
    task_id          bigint      NOT NULL,
    state            text        NOT NULL,
    executions       bigint      NOT NULL,
    started          bigint      NOT NULL,   -- of which had started (latency/duration known)
    retries          bigint      NOT NULL,   -- attempts after the first (attempt - 1)
    latency_sum      float8      NOT NULL,
    duration_sum     float8      NOT NULL,
    latency_le       bigint[]    NOT NULL,
    duration_le      bigint[]    NOT NULL,
    PRIMARY KEY (hour, tenant, task_id, state)
);
CREATE INDEX stats_hourly_task_idx ON pgsched.stats_hourly (task_id, hour);

-- All-time totals per (task, state) of the hours the roll-up has made final (every hour
-- before stats_rollup_state.dirty_from is in here, once). Counters read these plus the
-- open hours of stats_hourly, so they stay monotonic and cheap however long history is.
CREATE TABLE pgsched.stats_total (
    tenant           text        NOT NULL,
    task_id          bigint      NOT NULL,
    state            text        NOT NULL,
    executions       bigint      NOT NULL,
    started          bigint      NOT NULL,
    retries          bigint      NOT NULL,
    latency_sum      float8      NOT NULL,
    duration_sum     float8      NOT NULL,
    latency_le       bigint[]    NOT NULL,
    duration_le      bigint[]    NOT NULL,
    PRIMARY KEY (tenant, task_id, state)
);

-- The first hour a roll-up must recompute (earlier hours are final).
CREATE TABLE pgsched.stats_rollup_state (
    singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    dirty_from   timestamptz NOT NULL,
    rolled_at    timestamptz NOT NULL
);

-- Exact percentiles over a window are computed from raw rows, read through
-- execution_history_finished_idx (0001): a covering index measured no faster with 1M rows
-- and would cost every finished execution an index insert. This one counts (and lists) a
-- tenant's dead-letter queue; only dead rows pay for it.
CREATE INDEX execution_history_dead_tenant_idx ON pgsched.execution_history (tenant, finished_at)
    WHERE state = 'dead';

-- The executions page filters by state and by worker, newest first. With a million rows
-- a rare state or an old worker otherwise means reading the whole history backwards
-- (350 ms measured by benchmarks/observability.py). Succeeded rows, nearly all of them,
-- skip the state index; the worker index costs each finished execution one insert at
-- the right edge of its worker's range.
CREATE INDEX execution_history_state_id_idx ON pgsched.execution_history (state, id)
    WHERE state <> 'succeeded';
CREATE INDEX execution_history_worker_id_idx ON pgsched.execution_history (worker_id, id);

-- Element-wise sum of two equal-length arrays (NULL counts as zeros).
CREATE FUNCTION pgsched.stats_add_v1(a bigint[], b bigint[]) RETURNS bigint[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE
        ARRAY(SELECT x + y FROM unnest(a, b) AS u(x, y)) END;
$$;
CREATE AGGREGATE pgsched.stats_sum_v1(bigint[]) (SFUNC = pgsched.stats_add_v1, STYPE = bigint[]);

-- Recompute the hourly roll-up from dirty_from (default: 24 hours back) to now; add the
-- hours that are final now (ended over 5 minutes ago: rows reach history at most seconds
-- after their finished_at) to stats_total, once, and move dirty_from past them; drop
-- hourly rows older than keep_hours (already in stats_total). Idempotent; callers
-- serialise on an advisory lock. Returns the number of hourly rows written.
CREATE FUNCTION pgsched.stats_rollup_v1(keep_hours integer DEFAULT 48) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    since timestamptz;
    final timestamptz;
    lat text;
    dur text;
    written integer;
BEGIN
    PERFORM pg_advisory_xact_lock(8099569325639558148);  -- 0x7067736368656404: the roll-up
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
               pgsched.stats_sum_v1(latency_le) AS latency_le, pgsched.stats_sum_v1(duration_le) AS duration_le
          FROM pgsched.stats_hourly WHERE hour >= since AND hour < final
         GROUP BY 1, 2, 3
    )
    INSERT INTO pgsched.stats_total AS t SELECT * FROM closed
    ON CONFLICT (tenant, task_id, state) DO UPDATE
       SET executions = t.executions + EXCLUDED.executions, started = t.started + EXCLUDED.started,
           retries = t.retries + EXCLUDED.retries,
           latency_sum = t.latency_sum + EXCLUDED.latency_sum,
           duration_sum = t.duration_sum + EXCLUDED.duration_sum,
           latency_le = pgsched.stats_add_v1(t.latency_le, EXCLUDED.latency_le),
           duration_le = pgsched.stats_add_v1(t.duration_le, EXCLUDED.duration_le);
    -- at least a day: the dashboard's last day reads these hours
    DELETE FROM pgsched.stats_hourly
     WHERE hour < date_trunc('hour', now()) - make_interval(hours => greatest(keep_hours, 24));
    INSERT INTO pgsched.stats_rollup_state (singleton, dirty_from, rolled_at)
    VALUES (true, greatest(final, since), now())
    ON CONFLICT (singleton) DO UPDATE SET dirty_from = EXCLUDED.dirty_from, rolled_at = EXCLUDED.rolled_at;
    RETURN written;
END $$;

------------------------------------------------------------------------------------------
-- Alerting per task: webhooks and threshold overrides (NULL = the global setting).
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.task_alerting (
    task_id                  bigint      PRIMARY KEY REFERENCES pgsched.task (id),
    on_failure               text        CHECK (on_failure ~ '^https?://'),
    on_dlq                   text        CHECK (on_dlq ~ '^https?://'),
    on_missed                text        CHECK (on_missed ~ '^https?://'),
    missed_after_seconds     float8      CHECK (missed_after_seconds > 0),
    failure_rate             float8      CHECK (failure_rate >= 0 AND failure_rate <= 1),
    failure_window_seconds   float8      CHECK (failure_window_seconds > 0),
    failure_min_executions   integer     CHECK (failure_min_executions >= 1),
    updated_at               timestamptz NOT NULL DEFAULT now()
);

-- Missed fires counted by the scheduler (misfire policies) that the alert detection has
-- seen; a task whose missed_fires grew has missed a schedule.
ALTER TABLE pgsched.task ADD COLUMN missed_fires_seen bigint NOT NULL DEFAULT 0;
CREATE INDEX task_missed_unseen_idx ON pgsched.task (id) WHERE missed_fires <> missed_fires_seen;

CREATE TABLE pgsched.alert (
    id           bigserial   PRIMARY KEY,
    tenant       text        NOT NULL,
    task_id      bigint      NOT NULL REFERENCES pgsched.task (id),
    kind         text        NOT NULL CHECK (kind IN ('missed_schedule', 'failure_rate')),
    opened_at    timestamptz NOT NULL DEFAULT now(),
    resolved_at  timestamptz,
    details      jsonb       NOT NULL DEFAULT '{}'::jsonb
);
-- At most one open alert of a kind per task.
CREATE UNIQUE INDEX alert_open_key ON pgsched.alert (task_id, kind) WHERE resolved_at IS NULL;
CREATE INDEX alert_tenant_idx ON pgsched.alert (tenant, opened_at DESC);

-- When alerts were last detected: events since then (late starts) are looked at next.
CREATE TABLE pgsched.alert_state (
    singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    checked_at   timestamptz NOT NULL
);

------------------------------------------------------------------------------------------
-- Webhook outbox: a row is written in the transaction of its event; the scheduler
-- leader's sender POSTs it (JSON) and records the outcome.
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.webhook_delivery (
    id               bigserial   PRIMARY KEY,
    tenant           text        NOT NULL,
    task_id          bigint,
    event            text        NOT NULL CHECK (event IN ('failure', 'dlq', 'missed_schedule', 'failure_rate')),
    url              text        NOT NULL,
    payload          jsonb       NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    gave_up_at       timestamptz,
    last_error       text
);
CREATE INDEX webhook_delivery_due_idx ON pgsched.webhook_delivery (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;

-- An execution reached history failed, timed out or dead: queue its task's on_failure
-- webhook, and on_dlq for a dead one, in the same transaction. Rows of other states never
-- call this (the trigger's WHEN), so the success path pays nothing.
CREATE FUNCTION pgsched.webhook_execution_finished_v1() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    a pgsched.task_alerting;
    body jsonb;
BEGIN
    SELECT * INTO a FROM pgsched.task_alerting WHERE task_id = NEW.task_id;
    IF NOT FOUND OR (a.on_failure IS NULL AND a.on_dlq IS NULL) THEN RETURN NULL; END IF;
    body := jsonb_build_object(
        'task', (SELECT name FROM pgsched.task WHERE id = NEW.task_id), 'tenant', NEW.tenant,
        'execution_id', NEW.id, 'state', NEW.state, 'attempt', NEW.attempt,
        'scheduled_at', NEW.scheduled_at, 'started_at', NEW.started_at, 'finished_at', NEW.finished_at,
        'exit_code', NEW.exit_code, 'error', left(NEW.error, 2000));
    IF a.on_failure IS NOT NULL THEN
        INSERT INTO pgsched.webhook_delivery (tenant, task_id, event, url, payload)
        VALUES (NEW.tenant, NEW.task_id, 'failure', a.on_failure, body || '{"event": "failure"}');
    END IF;
    IF NEW.state = 'dead' AND a.on_dlq IS NOT NULL THEN
        INSERT INTO pgsched.webhook_delivery (tenant, task_id, event, url, payload)
        VALUES (NEW.tenant, NEW.task_id, 'dlq', a.on_dlq, body || '{"event": "dlq"}');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER webhook_execution_finished AFTER INSERT ON pgsched.execution_history
    FOR EACH ROW WHEN (NEW.state IN ('failed', 'timed_out', 'dead'))
    EXECUTE FUNCTION pgsched.webhook_execution_finished_v1();
