-- 0010: a scheduled fire never runs twice, also after its execution has left the hot
-- table.
--
-- A fire is unique on (task_id, scheduled_at) only while its execution is live
-- (execution_fire_key on pgsched.execution): once it has finished and moved to history,
-- nothing stopped the same instant from being fired again. An update that re-planned a
-- task into the past (a client whose clock was behind, a 'once' task given an instant it
-- had already run) did exactly that. task.last_fire_at becomes a watermark: the latest
-- fire instant the scheduler has dealt with (run, or counted as missed), and no fire at or
-- before it is ever created again. Four rules, each enforced here:
--   1. next_fire_at is after last_fire_at (task_next_fire_after_last): no plan can bring
--      back a dealt-with instant, whoever writes the row;
--   2. last_fire_at never moves back, nor is cleared (task_last_fire_forward);
--   3. the scheduler fires only a task's next_fire_at and the fires after it, and moves
--      last_fire_at to the latest of them in the same transaction, after inserting them
--      (sql/scheduler.sql: scheduler_fire, scheduler_advance);
--   4. an INSERT of a 'schedule' execution at or before its task's last_fire_at is refused
--      (the statement trigger below), whatever sends it, unless it is the requeue of that
--      very fire's dead execution: dlq_retry_v1 (0012) inserts a dead execution again under
--      its own id, for its own task and instant and with its created_at, then deletes the
--      dead row from history. That is the same fire run again on request, not a new one;
--      and a row put back so must find its dead row gone when the transaction commits
--      (execution_requeued, deferred), so a copy of a dead row cannot run it beside the
--      dead one kept for a retry. An UPDATE that makes an execution such a fire is refused
--      likewise (execution_fire_changed).
-- So each (task, instant) is fired at most once, live or not: docs/architecture.md.

-- Rows planned before this rule: the scheduler plans them again (after last_fire_at).
UPDATE pgsched.task SET next_fire_at = NULL
 WHERE next_fire_at IS NOT NULL AND last_fire_at IS NOT NULL AND next_fire_at <= last_fire_at;

ALTER TABLE pgsched.task ADD CONSTRAINT task_next_fire_after_last
    CHECK (next_fire_at > last_fire_at);

CREATE FUNCTION pgsched_internal.task_last_fire_forward_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'task %: last_fire_at cannot move back from % to % (the fires up to it were dealt with)',
        quote_literal(OLD.name), OLD.last_fire_at, coalesce(NEW.last_fire_at::text, 'NULL')
        USING ERRCODE = 'check_violation', TABLE = 'task', COLUMN = 'last_fire_at';
END $$;

-- The WHEN clause is evaluated without calling the function: a tick's update of thousands
-- of tasks pays nothing for it.
CREATE TRIGGER task_last_fire_forward BEFORE UPDATE OF last_fire_at ON pgsched.task
    FOR EACH ROW WHEN (OLD.last_fire_at IS NOT NULL
                       AND (NEW.last_fire_at IS NULL OR NEW.last_fire_at < OLD.last_fire_at))
    EXECUTE FUNCTION pgsched_internal.task_last_fire_forward_v1();

-- 0009's statement trigger, which checks each inserted execution's task and wakes the
-- workers, also refuses a 'schedule' execution at or before its task's last_fire_at. One
-- pass over the new rows as before (grouped by task instead of DISTINCT), one lookup of
-- each task, which it locks FOR KEY SHARE as before.
CREATE OR REPLACE FUNCTION pgsched_internal.execution_inserted_v1() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    WITH wanted AS (SELECT n.task_id, min(n.scheduled_at) FILTER (WHERE n.trigger = 'schedule') AS first_fire
                      FROM new_executions n GROUP BY n.task_id),
         locked AS (SELECT k.id, k.name, k.last_fire_at FROM pgsched.task k
                     WHERE k.id IN (SELECT w.task_id FROM wanted w)
                       FOR KEY SHARE OF k)
    SELECT w.task_id, w.first_fire, l.id IS NULL AS missing, l.name, l.last_fire_at INTO bad
      FROM wanted w LEFT JOIN locked l ON l.id = w.task_id
     WHERE l.id IS NULL OR w.first_fire <= l.last_fire_at
     LIMIT 1;
    IF FOUND AND bad.missing THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', bad.task_id
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    ELSIF FOUND THEN  -- rare: looked at row by row, only now
        SELECT k.name, k.last_fire_at, n.scheduled_at AS first_fire INTO bad
          FROM new_executions n JOIN pgsched.task k ON k.id = n.task_id
         WHERE n.trigger = 'schedule' AND n.scheduled_at <= k.last_fire_at
           AND NOT EXISTS (SELECT FROM pgsched.execution_history h
                            WHERE h.id = n.id AND h.task_id = n.task_id AND h.scheduled_at = n.scheduled_at
                              AND h.created_at = n.created_at AND h.state = 'dead')
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'execution: task % already fired through % (last_fire_at); a scheduled fire at % '
                            'would run an instant that was dealt with', quote_literal(bad.name), bad.last_fire_at,
                            bad.first_fire
                USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'scheduled_at';
        END IF;
    END IF;
    PERFORM pg_notify('pgsched_execution', '');
    RETURN NULL;
END $$;

-- A scheduled fire put back in the queue with its old created_at (the requeue of its dead
-- execution, above) must have left history by commit: a copy of a dead row, the dead row
-- kept, would run the fire now and again at its retry. Checked at commit, and only for
-- such rows: the WHEN clause leaves the scheduler's fires (created now) out at no cost.
CREATE FUNCTION pgsched_internal.execution_requeued_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM pgsched.execution_history h WHERE h.id = NEW.id AND h.state = 'dead') THEN
        RAISE EXCEPTION 'execution: % is a scheduled fire of task_id % at % that is still in the dead-letter '
                        'queue; retry it from there (pgsched dlq retry %)', NEW.id, NEW.task_id, NEW.scheduled_at,
                        NEW.id
            USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'scheduled_at';
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER execution_requeued AFTER INSERT ON pgsched.execution
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.trigger = 'schedule' AND NEW.created_at < now())
    EXECUTE FUNCTION pgsched_internal.execution_requeued_v1();

-- An UPDATE that makes an execution a scheduled fire at or before its task's last_fire_at
-- (a changed trigger, instant or task) is refused, as such an INSERT is. pgsched itself
-- never changes these columns.
CREATE FUNCTION pgsched_internal.execution_fire_changed_v1() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    fired timestamptz;
BEGIN
    SELECT k.last_fire_at INTO fired FROM pgsched.task k WHERE k.id = NEW.task_id;
    IF NEW.scheduled_at <= fired THEN
        RAISE EXCEPTION 'execution: task_id % already fired through % (last_fire_at); execution % cannot '
                        'become its scheduled fire at %', NEW.task_id, fired, NEW.id, NEW.scheduled_at
            USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'scheduled_at';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER execution_fire_changed BEFORE UPDATE OF trigger, scheduled_at, task_id ON pgsched.execution
    FOR EACH ROW WHEN (NEW.trigger = 'schedule' AND (OLD.trigger IS DISTINCT FROM NEW.trigger
                       OR OLD.scheduled_at IS DISTINCT FROM NEW.scheduled_at OR OLD.task_id IS DISTINCT FROM NEW.task_id))
    EXECUTE FUNCTION pgsched_internal.execution_fire_changed_v1();

-- Resume re-plans a paused task from now (its missed fires are skipped) by clearing
-- next_fire_at, and the scheduler plans tasks without one (scheduler_unplanned_tasks), but
-- never a one-shot that has fired (it would be picked again every tick). A one-shot given a
-- new instant after it fired, then paused and resumed, so never fired again. A one-shot's
-- plan is its instant whatever the time, so resume keeps it.
CREATE OR REPLACE FUNCTION pgsched.resume_v1(task_name text, tenant text DEFAULT 'default')
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgsched.task k
       SET enabled = true, next_fire_at = CASE WHEN k.enabled OR k.schedule_kind = 'once' THEN k.next_fire_at END,
           updated_at = now()
     WHERE k.tenant = resume_v1.tenant AND k.name = resume_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(task_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN true;
END $$;
