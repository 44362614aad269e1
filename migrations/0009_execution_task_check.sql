-- 0009: an execution's task is checked once per statement, not once per row; a worker's
-- heartbeat finds cancel requests through an index of its own.
--
-- The foreign key execution.task_id -> task.id ran PostgreSQL's check trigger for every
-- inserted row (a lookup of the task row, locked FOR KEY SHARE): EXPLAIN ANALYZE of
-- enqueue_many_v2 with 1,000 params showed it at 4.5-9 ms of a 10-19 ms statement, the
-- largest single cost of a bulk enqueue and of the scheduler's fire of a batch of due
-- tasks, though every row of such a statement names the same task or a few. The key is
-- replaced by triggers that keep its rules:
--   an INSERT into execution        once per statement, each distinct task_id must be a
--                                   task row, which is locked FOR KEY SHARE until commit
--                                   (as the key's check does), so that no DELETE of the
--                                   task can commit first
--   an UPDATE of execution.task_id  the same, row by row (nothing in pgsched does it)
--   a DELETE of task rows           refused while an execution names one of them (pgsched
--                                   never deletes a task: it soft-deletes, deleted_at)
--   an UPDATE of task.id            refused while an execution names the old id
--   TRUNCATE of task                refused while executions exist (other keys still
--                                   reference task, so it needs CASCADE anyway)
-- The error is foreign_key_violation (23503), as the key's. One difference: a task DELETE
-- run in REPEATABLE READ can miss an execution inserted by a transaction that committed
-- after its snapshot (a foreign key checks against a newer snapshot, a trigger cannot);
-- pgsched itself never deletes task rows.
--
-- The heartbeat's cancel_ids (worker_heartbeat) looked through execution_worker_idx, the
-- worker's running executions, for those with a cancel requested: with workers draining,
-- that index holds the entries of every execution claimed since the last vacuum (about
-- 8,500 read per heartbeat in a burst of 100,000). execution_cancel_idx holds only
-- running executions whose cancel was asked, nearly always none.

ALTER TABLE pgsched.execution DROP CONSTRAINT execution_task_id_fkey;

-- Statement-level check of the rows an INSERT added (transition table new_executions).
CREATE FUNCTION pgsched_internal.execution_task_check_v1() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing bigint;
BEGIN
    WITH wanted AS (SELECT DISTINCT n.task_id FROM new_executions n),
         locked AS (SELECT k.id FROM pgsched.task k WHERE k.id IN (SELECT w.task_id FROM wanted w)
                       FOR KEY SHARE OF k)
    SELECT w.task_id INTO missing FROM wanted w
     WHERE NOT EXISTS (SELECT FROM locked l WHERE l.id = w.task_id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', missing
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER execution_task_check AFTER INSERT ON pgsched.execution
    REFERENCING NEW TABLE AS new_executions
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.execution_task_check_v1();

-- Row-level: transition tables cannot go with a column list (UPDATE OF).
CREATE FUNCTION pgsched_internal.execution_task_recheck_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM pgsched.task k WHERE k.id = NEW.task_id FOR KEY SHARE OF k;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', NEW.task_id
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER execution_task_recheck AFTER UPDATE OF task_id ON pgsched.execution
    FOR EACH ROW WHEN (OLD.task_id IS DISTINCT FROM NEW.task_id)
    EXECUTE FUNCTION pgsched_internal.execution_task_recheck_v1();

-- The task side: a DELETE (statement, transition table old_tasks), an UPDATE of id (row),
-- a TRUNCATE.
CREATE FUNCTION pgsched_internal.task_referenced_v1() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    named bigint;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        SELECT e.task_id INTO named FROM pgsched.execution e LIMIT 1;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT e.task_id INTO named FROM pgsched.execution e WHERE e.task_id = OLD.id LIMIT 1;
    ELSE
        SELECT e.task_id INTO named FROM pgsched.execution e
         WHERE e.task_id IN (SELECT o.id FROM old_tasks o) LIMIT 1;
    END IF;
    IF FOUND THEN
        RAISE EXCEPTION 'task: % is still named by executions (soft-delete it: pgsched task delete)', named
            USING ERRCODE = 'foreign_key_violation', TABLE = 'task', COLUMN = 'id';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER task_referenced_delete AFTER DELETE ON pgsched.task
    REFERENCING OLD TABLE AS old_tasks
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.task_referenced_v1();
CREATE TRIGGER task_referenced_update AFTER UPDATE OF id ON pgsched.task
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION pgsched_internal.task_referenced_v1();
CREATE TRIGGER task_referenced_truncate BEFORE TRUNCATE ON pgsched.task
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched_internal.task_referenced_v1();

CREATE INDEX execution_cancel_idx ON pgsched.execution (worker_id)
    WHERE state = 'running' AND cancel_requested_at IS NOT NULL;
