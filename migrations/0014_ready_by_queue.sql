-- 0014: the ready index leads with the queue (issue 14, item 4).
--
-- execution_ready_idx was (priority, run_at, id) WHERE state = 'pending', with no queue: a
-- claim on 'default' walked, and filtered out one by one, every ready execution of every
-- other queue that sorts before default's (100,000 ready rows on 'bulk' took a claim on
-- 'default' from 0.1 ms to 16-100 ms, about 2,700 buffers read). With the queue first, a
-- claim reads only its own queues' part of the index.
--
-- A claim keeps its order (priority, run_at, id) across the worker's queues: a plain
-- queue = ANY(...) on this index returns each queue's rows in turn and would sort the
-- worker's whole backlog, so execution_claim (sql/execution.sql) reads each queue's front
-- on its own (a LATERAL per queue) and merges them. The next-due lookup of an idle worker
-- (execution_next_due) reads the first entry of each (queue, priority).
--
-- No other query used execution_ready_idx (EXPLAIN of every named query and of the SQL
-- functions' statements on a table with 100,000 pending rows): retry_slot_v1 counts
-- through execution_retry_idx, the alerts' waiting executions through execution_fire_key,
-- the queue depths scan the table. Dropped: every insert, claim and retry paid to keep it.
--
-- Both statements lock the table (SHARE, then ACCESS EXCLUSIVE) for as long as building an
-- index of the live executions takes: the hot table holds only pending and running rows.

CREATE INDEX execution_ready_queue_idx ON pgsched.execution (queue, priority, run_at, id)
    WHERE state = 'pending';

DROP INDEX pgsched.execution_ready_idx;
