-- 0035: where a task's Python handler runs (issue 19, item 2): in a child process of the
-- worker's pool ('process': killed on its timeout or stop) or in the worker's slot thread
-- ('thread': no fork, no pickling of params across a pipe, but a call blocked in C code is
-- abandoned, not stopped), over the worker's --python-isolation; NULL: the worker's. The
-- worker reads it with the task's definition (sql/task.sql task_sandbox) and honours it per
-- execution (docs/security.md, "Python handlers"). Commands ignore it.
ALTER TABLE pgsched.task
    ADD COLUMN python_isolation text CHECK (python_isolation IN ('process', 'thread'));
COMMENT ON COLUMN pgsched.task.python_isolation IS
    'where its Python handler runs: process or thread (NULL: the worker''s --python-isolation)';

SELECT pgsched_internal.secure_v1();
