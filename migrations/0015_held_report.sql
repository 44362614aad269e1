-- 0015: a worker reports what it holds; the rescue takes back every execution held without
-- a live holder that reports it, whatever the worker registry holds (issue 15, items 1, 5, 7).
--
-- A worker's lease is its heartbeat (one statement per interval per worker, never one per
-- execution: DESIGN "Processes"). Until now the rescue found an execution to take back by
-- joining its worker's row: an execution whose worker row was removed stayed 'running' for
-- ever, and so did one claimed by a statement whose reply the worker never received (the
-- server restarted between the commit and the reply): its worker, alive, heartbeated on,
-- never knowing it held it.
--
-- Now each heartbeat also reports the ids the worker holds (claimed and buffered, running,
-- or having their end written): worker.held, at held_at; held_prev_at is the previous
-- report's time. The rescue takes back a running execution when
--   * no worker row names it, or its worker is not running (stopped, declared dead), or
--   * its worker is alive but its latest report leaves it out although the execution was
--     claimed before the previous report: a claim's reply that arrived at all was in the
--     worker's hands long before the next heartbeat was composed (one interval later), so
--     only a claim the worker never heard of is left out of two reports in a row.
-- Workers of an older version report nothing (held_prev_at stays NULL): the second rule
-- never applies to them.
--
-- The rules for what becomes of a taken-back execution are 0008's (requeued, unclaimed,
-- dead, cancelled); an attempt lost with a live worker counts like one lost with a dead
-- worker whose start was not recorded (it may never have started: a lost claim reply).
--
-- Rows of workers that stopped or died more than worker_retention_days ago, holding
-- nothing, are removed by the leader's maintenance (worker_prune_v1): the registry does not
-- grow for ever, and nothing depends on its old rows (attempts keep the worker's id).

ALTER TABLE pgsched.worker
    ADD COLUMN held         bigint[],
    ADD COLUMN held_at      timestamptz,
    ADD COLUMN held_prev_at timestamptz;

INSERT INTO pgsched.setting (name, value) VALUES
    -- Rows of stopped or dead workers are kept this many days (worker_prune_v1).
    ('worker_retention_days', '7')
ON CONFLICT (name) DO NOTHING;

CREATE OR REPLACE FUNCTION pgsched.rescue_v1()
RETURNS TABLE (execution_id bigint, worker_id bigint, outcome text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    e pgsched.execution;
    holder_alive boolean;
    dead_after integer := (pgsched.setting_v1('worker_dead_after_heartbeats'))::integer;
    max_lost integer := (pgsched.setting_v1('max_lost_attempts'))::integer;
    lost text;
    why text;
BEGIN
    UPDATE pgsched.worker w SET state = 'dead', stopped_at = now(), running = 0
     WHERE w.state = 'running'
       AND w.last_heartbeat_at < now() - dead_after * w.heartbeat_interval * interval '1 second';
    FOR e IN
        SELECT x.*
          FROM pgsched.execution x
          LEFT JOIN pgsched.worker w ON w.id = x.worker_id
         WHERE x.state = 'running'
           AND (w.id IS NULL OR w.state <> 'running'
                OR (w.held IS NOT NULL AND w.held_prev_at IS NOT NULL AND x.started_at < w.held_prev_at
                    AND NOT (x.id = ANY (coalesce(w.held, '{}')))))
           FOR UPDATE OF x SKIP LOCKED
    LOOP
        execution_id := e.id;
        worker_id := e.worker_id;
        holder_alive := EXISTS (SELECT 1 FROM pgsched.worker w WHERE w.id = e.worker_id AND w.state = 'running');
        lost := CASE
            WHEN holder_alive THEN format('worker %s, alive, no longer reports attempt %s as its own (a claim '
                                          'whose reply it never received)', e.worker_id, e.attempt)
            ELSE format('worker %s was lost (no heartbeat) while running attempt %s', e.worker_id, e.attempt)
        END;
        IF e.cancel_requested_at IS NOT NULL THEN
            INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state,
                                                   started_at, finished_at, error, lease_id)
            VALUES (e.id, e.attempt, e.tenant, e.worker_id, 'lost',
                    coalesce(e.start_confirmed_at, e.started_at, now()), now(), lost, e.lease_id);
            PERFORM pgsched.finish_v1(e, 'cancelled', lost || '; cancel was requested');
            outcome := 'cancelled';
        ELSIF e.confirm_start AND e.start_confirmed_at IS NULL THEN
            -- Its start had to be recorded before it ran, and was not: it never started.
            UPDATE pgsched.execution x
               SET state = 'pending', attempt = x.attempt - 1, worker_id = NULL, started_at = NULL,
                   lease_id = NULL
             WHERE x.id = e.id;
            outcome := 'unclaimed';
        ELSIF e.confirm_start THEN
            e.lost_attempts := e.lost_attempts + 1;
            why := format('%s (started at %s)', lost, e.start_confirmed_at);
            INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state,
                                                   started_at, finished_at, error, lease_id)
            VALUES (e.id, e.attempt, e.tenant, e.worker_id, 'lost', e.start_confirmed_at, now(), why,
                    e.lease_id);
            IF e.lost_attempts >= max_lost THEN
                PERFORM pgsched.finish_v1(e, 'dead', why || format('; lost %s times, so it is dead', e.lost_attempts));
                outcome := 'dead';
            ELSE
                UPDATE pgsched.execution x
                   SET state = 'pending', run_at = now(), worker_id = NULL, lease_id = NULL,
                       started_at = NULL, start_confirmed_at = NULL, lost_attempts = e.lost_attempts,
                       max_attempts = x.max_attempts + 1
                 WHERE x.id = e.id;
                outcome := 'requeued';
            END IF;
        ELSE
            why := lost || ', whose start was not recorded: it may have waited unstarted in the worker''s '
                   'buffer, so this loss does not count toward max_lost_attempts; its next worker records '
                   'the start before running it';
            INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state,
                                                   started_at, finished_at, error, lease_id)
            VALUES (e.id, e.attempt, e.tenant, e.worker_id, 'lost', coalesce(e.started_at, now()), now(),
                    why, e.lease_id);
            UPDATE pgsched.execution x
               SET state = 'pending', run_at = now(), worker_id = NULL, lease_id = NULL,
                   started_at = NULL, start_confirmed_at = NULL, confirm_start = true,
                   max_attempts = x.max_attempts + 1
             WHERE x.id = e.id;
            outcome := 'requeued';
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

-- Remove rows of workers that stopped or died more than worker_retention_days ago and hold
-- nothing. Returns how many were removed.
CREATE FUNCTION pgsched.worker_prune_v1() RETURNS bigint LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM pgsched.worker w
         WHERE w.state <> 'running'
           AND w.stopped_at < now() - (pgsched.setting_v1('worker_retention_days'))::float8 * interval '1 day'
           AND NOT EXISTS (SELECT 1 FROM pgsched.execution x WHERE x.worker_id = w.id AND x.state = 'running')
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;
