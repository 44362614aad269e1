-- 0008: a rescue no longer charges a lost attempt to an execution that never started.
--
-- A worker claims executions ahead into a local buffer: a claimed execution is 'running'
-- under the worker's lease whether a slot started it or it still waits in the buffer, and
-- the worker records nothing when a slot starts one (a write per execution on the hot
-- path). So when the worker is SIGKILLed, rescue_v1 (0002) cannot tell the buffered ones
-- from those that ran, and charged each a lost attempt: an innocent execution held in
-- the buffers of max_lost_attempts killed workers went to the dead-letter queue without
-- ever running.
--
-- Now a rescue that cannot tell asks for proof next time, and only such executions pay a
-- write when they start:
--   confirm_start       the rescue could not prove whether the last claim started it: the
--                       next worker records its start (start_confirmed_at) before running it
--   start_confirmed_at  when a worker recorded that start; every claim, retry, hand-back
--                       (execution_unclaim) and rescue clears it
-- rescue_v1, per execution of a dead worker (a requested cancel is handled as in 0002):
--   confirm_start, start recorded      it surely started: a 'lost' attempt that counts
--                                      (lost_attempts + 1; 'dead' at max_lost_attempts)
--   confirm_start, start not recorded  it surely never started: pending again as
--                                      execution_unclaim does (attempt number back, no
--                                      attempt row, nothing used up); outcome 'unclaimed'
--   not confirm_start                  unknown: a 'lost' attempt row that does not count
--                                      (its number is kept: the output of a run that did
--                                      start is logged under it), the attempt given back
--                                      (max_attempts + 1), and confirm_start set
-- A poison execution (its handler kills its worker every time) is charged from its second
-- loss on, so it is 'dead' after max_lost_attempts + 1 losses, not max_lost_attempts.
--
-- The columns are the live row's bookkeeping: history and the execution_all view do not
-- carry them (the story is in the attempt rows). confirm_start stays set for the rest of
-- the execution's life; a retry from the dead-letter queue starts afresh (as lost_attempts
-- does). Both columns are added without a table rewrite (a constant default).

ALTER TABLE pgsched.execution
    ADD COLUMN confirm_start      boolean NOT NULL DEFAULT false,
    ADD COLUMN start_confirmed_at timestamptz;

-- Declare workers silent for too long dead and rescue what they held (as in 0002, with the
-- rules above). Run by the scheduler leader; SKIP LOCKED so two callers never rescue the
-- same execution, and a start being recorded (its row locked) is waited for at the next
-- call rather than guessed. Returns one row per execution: its id, the dead worker and the
-- outcome: 'requeued', 'unclaimed' (back in the queue as if never claimed), 'dead' or
-- 'cancelled'.
CREATE OR REPLACE FUNCTION pgsched.rescue_v1()
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
        execution_id := e.id;
        worker_id := e.worker_id;
        IF e.cancel_requested_at IS NOT NULL THEN
            why := format('worker %s was lost (no heartbeat) while running attempt %s', e.worker_id, e.attempt);
            INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, worker_id, state,
                                                   started_at, finished_at, error, lease_id)
            VALUES (e.id, e.attempt, e.tenant, e.worker_id, 'lost',
                    coalesce(e.start_confirmed_at, e.started_at, now()), now(), why, e.lease_id);
            PERFORM pgsched.finish_v1(e, 'cancelled', why || '; cancel was requested');
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
            why := format('worker %s was lost (no heartbeat) while running attempt %s (started at %s)',
                          e.worker_id, e.attempt, e.start_confirmed_at);
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
            why := format('worker %s was lost (no heartbeat) holding attempt %s, whose start was not recorded: '
                          'it may have waited unstarted in the worker''s buffer, so this loss does not count '
                          'toward max_lost_attempts; its next worker records the start before running it',
                          e.worker_id, e.attempt);
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
