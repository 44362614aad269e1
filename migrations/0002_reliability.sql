-- 0002: reliability. Leases on claims, cancel, the dead-letter queue, rescue of dead
-- workers' executions, misfire policies, retry rules and the retry budget, and the
-- registry of scheduler processes (docs/reliability.md).

------------------------------------------------------------------------------------------
-- Settings shared by every process (one row per setting).
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.setting (
    name        text        PRIMARY KEY,
    value       jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO pgsched.setting (name, value) VALUES
    -- Retries may be at most this share of the attempts started per minute ...
    ('retry_budget_ratio', '0.2'),
    -- ... but this many retries per minute are always allowed (a quiet system may retry).
    ('retry_budget_min_per_minute', '10'),
    -- A worker silent for this many of its heartbeat intervals is dead.
    ('worker_dead_after_heartbeats', '3'),
    -- An execution lost with its worker this many times is dead (a poison pill), not requeued.
    ('max_lost_attempts', '3'),
    -- misfire_policy 'all' creates at most this many catch-up runs per task.
    ('misfire_all_cap', '100'),
    -- A fire later than this (seconds) counts as missed (misfire_policy 'skip').
    ('misfire_grace_seconds', '60');

------------------------------------------------------------------------------------------
-- Tasks: what is not retried, what happens to missed fires, derived idempotency keys.
------------------------------------------------------------------------------------------
ALTER TABLE pgsched.task
    ADD COLUMN no_retry_exit_codes integer[] NOT NULL DEFAULT '{}',
    ADD COLUMN no_retry_exceptions text[]    NOT NULL DEFAULT '{}',
    ADD COLUMN misfire_policy      text      NOT NULL DEFAULT 'once'
               CHECK (misfire_policy IN ('skip', 'once', 'all')),
    ADD COLUMN idempotent          boolean   NOT NULL DEFAULT false,
    ADD COLUMN missed_fires        bigint    NOT NULL DEFAULT 0;

------------------------------------------------------------------------------------------
-- Executions: a lease per claim, cancel requests, lost attempts, budget delays.
------------------------------------------------------------------------------------------
CREATE SEQUENCE pgsched.lease_id_seq;

ALTER TABLE pgsched.execution
    ADD COLUMN lease_id             bigint,
    ADD COLUMN cancel_requested_at  timestamptz,
    ADD COLUMN lost_attempts        integer NOT NULL DEFAULT 0,
    ADD COLUMN budget_delay_seconds double precision;
-- Retries waiting to run, by time: the retry budget counts those due in a window.
CREATE INDEX execution_retry_idx ON pgsched.execution (run_at) WHERE state = 'pending' AND attempt > 0;

ALTER TABLE pgsched.execution_history
    ADD COLUMN lost_attempts integer NOT NULL DEFAULT 0;
CREATE INDEX execution_history_dead_idx ON pgsched.execution_history (finished_at)
    WHERE state = 'dead';

ALTER TABLE pgsched.execution_attempt
    ADD COLUMN lease_id             bigint,
    ADD COLUMN error_type           text,
    ADD COLUMN next_run_at          timestamptz,
    ADD COLUMN budget_delay_seconds double precision;
-- The retry budget counts attempts started in the last minute.
CREATE INDEX execution_attempt_started_idx ON pgsched.execution_attempt (started_at);

CREATE OR REPLACE VIEW pgsched.execution_all AS
    SELECT id, tenant, task_id, scheduled_at, run_at, state, trigger, priority, queue, params,
           idempotency_key, attempt, max_attempts, worker_id, leader_epoch, created_at,
           started_at, NULL::timestamptz AS finished_at, NULL::integer AS exit_code,
           NULL::text AS error, NULL::jsonb AS result, lost_attempts, cancel_requested_at,
           budget_delay_seconds
      FROM pgsched.execution
    UNION ALL
    SELECT id, tenant, task_id, scheduled_at, run_at, state, trigger, priority, queue, params,
           idempotency_key, attempt, max_attempts, worker_id, leader_epoch, created_at,
           started_at, finished_at, exit_code, error, result, lost_attempts,
           NULL::timestamptz, NULL::double precision
      FROM pgsched.execution_history;

-- The leader's own heartbeat (a thread, every second): a standby ends the session of a
-- leader silent for too long (hung, not dead: its lock would otherwise never be freed).
ALTER TABLE pgsched.leader ADD COLUMN heartbeat_at timestamptz;

------------------------------------------------------------------------------------------
-- Scheduler processes: leader and standbys, for status and failover figures.
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.scheduler_node (
    id           bigserial   PRIMARY KEY,
    name         text        NOT NULL,
    hostname     text        NOT NULL,
    pid          integer     NOT NULL,
    role         text        NOT NULL DEFAULT 'standby' CHECK (role IN ('leader', 'standby', 'stopped')),
    epoch        bigint,
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    stopped_at   timestamptz
);

------------------------------------------------------------------------------------------
-- Public SQL API, continued.
------------------------------------------------------------------------------------------

CREATE FUNCTION pgsched.setting_v1(setting_name text) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT value FROM pgsched.setting WHERE name = setting_name;
$$;

-- Record, without running it, an execution whose idempotency key already succeeded in
-- execution succeeded_id: a 'skipped' row in history. Returns the new execution's id.
CREATE FUNCTION pgsched.record_skipped_v1(t pgsched.task, scheduled timestamptz, how text,
                                          run_params jsonb, key text, succeeded_id bigint)
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
        trigger, priority, queue, params, idempotency_key, attempt, max_attempts, created_at,
        finished_at, error)
    VALUES (nextval('pgsched.execution_id_seq'), t.tenant, t.id, scheduled, scheduled, 'skipped',
            how, t.priority, t.queue, run_params, key, 0, t.max_attempts, now(), clock_timestamp(),
            format('idempotency key %s already succeeded in execution %s', quote_literal(key), succeeded_id))
    RETURNING id;
$$;

-- The key of a run of an idempotent task that was given none: task, params and scheduled
-- time (microseconds since the epoch), hashed.
CREATE FUNCTION pgsched.derived_key_v1(task_id bigint, run_params jsonb, scheduled timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'auto:' || task_id || ':' || md5(run_params::text || '@' ||
           (extract(epoch FROM scheduled) * 1000000)::bigint);
$$;

-- Enqueue one run of a task (as in 0001), now with idempotency keys that skip: a key that
-- is live returns that execution's id (nothing new); a key that already succeeded records
-- a 'skipped' execution and returns its id; an idempotent task derives a key when given
-- none.
CREATE OR REPLACE FUNCTION pgsched.enqueue_v1(
    task_name       text,
    params          jsonb       DEFAULT NULL,
    run_at          timestamptz DEFAULT NULL,
    priority        integer     DEFAULT NULL,
    idempotency_key text        DEFAULT NULL,
    tenant          text        DEFAULT 'default',
    trigger         text        DEFAULT 'api'
) RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t pgsched.task;
    new_id bigint;
    fire_at timestamptz := coalesce(enqueue_v1.run_at, clock_timestamp());
    run_params jsonb;
    key text := enqueue_v1.idempotency_key;
BEGIN
    SELECT * INTO t FROM pgsched.task k
     WHERE k.tenant = enqueue_v1.tenant AND k.name = enqueue_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(enqueue_v1.task_name), quote_literal(enqueue_v1.tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    IF enqueue_v1.priority IS NOT NULL AND enqueue_v1.priority NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'priority: % is out of range 1-10', enqueue_v1.priority USING ERRCODE = 'check_violation';
    END IF;
    IF NOT isfinite(fire_at) OR fire_at < '1970-01-01 00:00:00+00' OR fire_at >= '9000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at: % is outside 1970 to 9000', enqueue_v1.run_at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v1.trigger IS NULL OR enqueue_v1.trigger NOT IN ('api', 'manual', 'insert') THEN
        -- 'schedule' is the scheduler's alone: it is what makes a scheduled fire unique.
        RAISE EXCEPTION 'trigger: % must be api, manual or insert', quote_nullable(enqueue_v1.trigger)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v1.params IS NOT NULL AND jsonb_typeof(enqueue_v1.params) <> 'object' THEN
        RAISE EXCEPTION 'params: % is not a JSON object', enqueue_v1.params USING ERRCODE = 'invalid_parameter_value';
    END IF;
    run_params := t.params || coalesce(enqueue_v1.params, '{}'::jsonb);
    IF key IS NULL AND t.idempotent THEN
        key := pgsched.derived_key_v1(t.id, run_params, fire_at);
    END IF;
    IF key IS NOT NULL THEN
        SELECT e.id INTO new_id FROM pgsched.execution e
         WHERE e.tenant = enqueue_v1.tenant AND e.idempotency_key = key;
        IF FOUND THEN RETURN new_id; END IF;
        SELECT h.id INTO new_id FROM pgsched.execution_history h
         WHERE h.tenant = enqueue_v1.tenant AND h.idempotency_key = key AND h.state = 'succeeded'
         LIMIT 1;
        IF FOUND THEN
            RETURN pgsched.record_skipped_v1(t, fire_at, enqueue_v1.trigger, run_params, key, new_id);
        END IF;
    END IF;
    -- scheduled_at is the instant asked for (clock_timestamp(), not the transaction's now(),
    -- when none is); only schedule fires are unique on (task_id, scheduled_at).
    INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                        queue, params, idempotency_key, max_attempts)
    VALUES (t.tenant, t.id, fire_at, fire_at, enqueue_v1.trigger, coalesce(enqueue_v1.priority, t.priority),
            t.queue, run_params, key, t.max_attempts)
    ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING e.id INTO new_id;
    IF new_id IS NULL THEN  -- lost a race on the idempotency key to a concurrent enqueue
        SELECT e.id INTO new_id FROM pgsched.execution e
         WHERE e.tenant = enqueue_v1.tenant AND e.idempotency_key = key;
    END IF;
    RETURN new_id;
END $$;

-- Cancel an execution. Pending: it moves to history as 'cancelled' at once. Running: the
-- request is recorded and the worker holding it is told (NOTIFY pgsched_cancel, payload
-- the id); it kills the process group and records 'cancelled'. Returns 'cancelled',
-- 'cancelling', or 'finished' for an execution that had already ended (left as it was).
CREATE FUNCTION pgsched.cancel_v1(execution_id bigint, tenant text DEFAULT 'default')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    e pgsched.execution;
BEGIN
    SELECT * INTO e FROM pgsched.execution x
     WHERE x.id = cancel_v1.execution_id AND x.tenant = cancel_v1.tenant FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM FROM pgsched.execution_history h
         WHERE h.id = cancel_v1.execution_id AND h.tenant = cancel_v1.tenant;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'execution: no execution % in tenant %', cancel_v1.execution_id, quote_literal(cancel_v1.tenant)
                USING ERRCODE = 'no_data_found';
        END IF;
        RETURN 'finished';
    END IF;
    IF e.state = 'pending' THEN
        PERFORM pgsched.finish_v1(e, 'cancelled', 'cancelled while pending');
        RETURN 'cancelled';
    END IF;
    UPDATE pgsched.execution x SET cancel_requested_at = coalesce(x.cancel_requested_at, now())
     WHERE x.id = e.id;
    PERFORM pg_notify('pgsched_cancel', e.id::text);
    RETURN 'cancelling';
END $$;

-- Move a live execution to history in state final_state with error text why (used by
-- cancel and rescue; the worker's own finish is the execution_finish query).
CREATE FUNCTION pgsched.finish_v1(e pgsched.execution, final_state text, why text)
RETURNS void LANGUAGE sql AS $$
    DELETE FROM pgsched.execution WHERE id = e.id;
    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
        trigger, priority, queue, params, idempotency_key, attempt, max_attempts, worker_id,
        leader_epoch, created_at, started_at, finished_at, error, lost_attempts)
    VALUES (e.id, e.tenant, e.task_id, e.scheduled_at, e.run_at, final_state, e.trigger,
            e.priority, e.queue, e.params, e.idempotency_key, e.attempt, e.max_attempts,
            e.worker_id, e.leader_epoch, e.created_at, e.started_at, clock_timestamp(), why,
            e.lost_attempts);
$$;

-- Declare workers silent for too long dead and rescue what they were running: each such
-- execution gets a 'lost' attempt row and goes back to the queue at once, without using up
-- its retry budget (max_attempts grows by one), unless it was lost max_lost_attempts times
-- (then 'dead') or a cancel was asked (then 'cancelled'). Run by the scheduler leader;
-- SKIP LOCKED so two callers never rescue the same execution. Returns what it did.
CREATE FUNCTION pgsched.rescue_v1()
RETURNS TABLE (execution_id bigint, worker_id bigint, outcome text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    e pgsched.execution;
    dead_after integer := (pgsched.setting_v1('worker_dead_after_heartbeats'))::integer;
    max_lost integer := (pgsched.setting_v1('max_lost_attempts'))::integer;
    why text;
BEGIN
    UPDATE pgsched.worker w SET state = 'dead', stopped_at = now(), running = 0
     WHERE w.state = 'running'
       AND w.last_heartbeat_at < now() - dead_after * w.heartbeat_interval * interval '1 second';
    FOR e IN
        SELECT x.* FROM pgsched.execution x JOIN pgsched.worker w ON w.id = x.worker_id
         WHERE x.state = 'running' AND w.state <> 'running'
           FOR UPDATE OF x SKIP LOCKED
    LOOP
        why := format('worker %s was lost (no heartbeat) while running attempt %s', e.worker_id, e.attempt);
        INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state,
                                               started_at, finished_at, error, lease_id)
        VALUES (e.id, e.attempt, e.tenant, e.worker_id, 'lost', coalesce(e.started_at, now()), now(),
                why, e.lease_id);
        execution_id := e.id;
        worker_id := e.worker_id;
        IF e.cancel_requested_at IS NOT NULL THEN
            PERFORM pgsched.finish_v1(e, 'cancelled', why || '; cancel was requested');
            outcome := 'cancelled';
        ELSIF e.lost_attempts + 1 >= max_lost THEN
            e.lost_attempts := e.lost_attempts + 1;
            PERFORM pgsched.finish_v1(e, 'dead', why || format('; lost %s times, so it is dead', e.lost_attempts));
            outcome := 'dead';
        ELSE
            UPDATE pgsched.execution x
               SET state = 'pending', run_at = now(), worker_id = NULL, lease_id = NULL,
                   started_at = NULL, lost_attempts = x.lost_attempts + 1,
                   max_attempts = x.max_attempts + 1
             WHERE x.id = e.id;
            outcome := 'requeued';
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

-- When a retry proposed for proposed_at may run under the retry budget. Retries may be
-- at most retry_budget_ratio of the attempts started in the last minute, and always
-- retry_budget_min_per_minute. The budget is counted per clock minute: retries already
-- started in it (finished or running) plus those queued to start in it. While the
-- proposed minute is full the retry moves to the start of the next one (up to an hour
-- on). Never drops a retry. Callers serialise on a transaction advisory lock, so two
-- workers cannot both take the last place.
CREATE FUNCTION pgsched.retry_slot_v1(proposed_at timestamptz) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    started integer;
    allowed integer;
    slot timestamptz := proposed_at;
    minute timestamptz;
    used integer;
BEGIN
    PERFORM pg_advisory_xact_lock(8099569325639558147);  -- 0x7067736368656403: the retry budget
    SELECT count(*) INTO started FROM pgsched.execution_attempt a
     WHERE a.started_at > now() - interval '1 minute';
    allowed := greatest((pgsched.setting_v1('retry_budget_min_per_minute'))::integer,
                        floor((pgsched.setting_v1('retry_budget_ratio'))::float8 * started)::integer);
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

-- Dead-letter queue: bring one dead execution back for a fresh set of attempts (its
-- earlier attempts are kept; attempt numbers go on). When its idempotency key has since
-- succeeded, or is held by a live execution, it is recorded as skipped instead. Returns
-- the execution's id.
CREATE FUNCTION pgsched.dlq_retry_v1(execution_id bigint, tenant text DEFAULT 'default')
RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    h pgsched.execution_history;
    holder bigint;
    max_tries integer;
BEGIN
    SELECT * INTO h FROM pgsched.execution_history x
     WHERE x.id = dlq_retry_v1.execution_id AND x.tenant = dlq_retry_v1.tenant AND x.state = 'dead'
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: % is not in the dead-letter queue of tenant %', dlq_retry_v1.execution_id,
            quote_literal(dlq_retry_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
    IF h.idempotency_key IS NOT NULL THEN
        SELECT x.id INTO holder FROM pgsched.execution x
         WHERE x.tenant = h.tenant AND x.idempotency_key = h.idempotency_key;
        IF NOT FOUND THEN
            SELECT x.id INTO holder FROM pgsched.execution_history x
             WHERE x.tenant = h.tenant AND x.idempotency_key = h.idempotency_key AND x.state = 'succeeded'
             LIMIT 1;
        END IF;
        IF holder IS NOT NULL THEN
            UPDATE pgsched.execution_history x
               SET state = 'skipped',
                   error = format('idempotency key %s already taken by execution %s', quote_literal(h.idempotency_key), holder)
             WHERE x.id = h.id AND x.finished_at = h.finished_at;
            RETURN h.id;
        END IF;
    END IF;
    SELECT k.max_attempts INTO max_tries FROM pgsched.task k WHERE k.id = h.task_id AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: % belongs to a deleted task; it stays in the dead-letter queue', h.id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM pgsched.execution_history x WHERE x.id = h.id AND x.finished_at = h.finished_at;
    INSERT INTO pgsched.execution (id, tenant, task_id, scheduled_at, run_at, state, trigger,
        priority, queue, params, idempotency_key, attempt, max_attempts, leader_epoch,
        created_at, lost_attempts)
    VALUES (h.id, h.tenant, h.task_id, h.scheduled_at, now(), 'pending', h.trigger, h.priority,
            h.queue, h.params, h.idempotency_key, h.attempt, h.attempt + coalesce(max_tries, 1),
            h.leader_epoch, h.created_at, 0);
    RETURN h.id;
END $$;

-- Retry every dead execution of a live task (of task_name when given). Returns how many.
CREATE FUNCTION pgsched.dlq_retry_all_v1(task_name text DEFAULT NULL, tenant text DEFAULT 'default')
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    dead_id bigint;
BEGIN
    FOR dead_id IN
        SELECT h.id FROM pgsched.execution_history h JOIN pgsched.task k ON k.id = h.task_id
         WHERE h.state = 'dead' AND h.tenant = dlq_retry_all_v1.tenant AND k.deleted_at IS NULL
           AND (dlq_retry_all_v1.task_name IS NULL OR k.name = dlq_retry_all_v1.task_name)
         ORDER BY h.id
           FOR UPDATE OF h SKIP LOCKED  -- rows a concurrent purge or retry holds are theirs
    LOOP
        PERFORM pgsched.dlq_retry_v1(dead_id, dlq_retry_all_v1.tenant);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- Delete dead executions (and nothing else) that died more than older_than ago. Returns
-- how many. Their attempts and logs go with their partitions' retention.
CREATE FUNCTION pgsched.dlq_purge_v1(older_than interval DEFAULT interval '0', tenant text DEFAULT 'default')
RETURNS integer LANGUAGE sql AS $$
    WITH doomed AS (
        SELECT h.id, h.finished_at FROM pgsched.execution_history h
         WHERE h.state = 'dead' AND h.tenant = dlq_purge_v1.tenant
           AND h.finished_at < now() - dlq_purge_v1.older_than
         ORDER BY h.id
           FOR UPDATE SKIP LOCKED  -- rows a concurrent retry holds are being retried
    ), gone AS (
        DELETE FROM pgsched.execution_history h USING doomed d
         WHERE h.id = d.id AND h.finished_at = d.finished_at
        RETURNING 1)
    SELECT count(*)::integer FROM gone;
$$;
