-- 0032: a task's own sandbox settings (issue 19, item 1): resource limits that override its
-- worker's defaults (pgsched worker --limit-*), and whether its commands may use the host's
-- network in a sandbox (pgsched worker --isolation sandbox; NULL: the worker's
-- --allow-network). The worker reads them with the task's definition
-- (sql/task.sql task_sandbox) and applies them only when it isolates its commands: with
-- --isolation none they change nothing (docs/security.md, "Sandbox").
ALTER TABLE pgsched.task
    ADD COLUMN limit_cpu_seconds integer CHECK (limit_cpu_seconds > 0),
    ADD COLUMN limit_memory_bytes bigint CHECK (limit_memory_bytes > 0),
    ADD COLUMN limit_nofile integer CHECK (limit_nofile > 0),
    ADD COLUMN limit_nproc integer CHECK (limit_nproc > 0),
    ADD COLUMN limit_fsize_bytes bigint CHECK (limit_fsize_bytes > 0),
    ADD COLUMN network boolean;
COMMENT ON COLUMN pgsched.task.limit_cpu_seconds IS
    'RLIMIT_CPU of its commands, seconds (NULL: the worker''s --limit-cpu)';
COMMENT ON COLUMN pgsched.task.limit_memory_bytes IS
    'RLIMIT_AS of its commands'' processes, bytes (NULL: the worker''s --limit-memory)';
COMMENT ON COLUMN pgsched.task.limit_nofile IS
    'RLIMIT_NOFILE of its commands'' processes (NULL: the worker''s --limit-nofile)';
COMMENT ON COLUMN pgsched.task.limit_nproc IS
    'RLIMIT_NPROC of its commands'' user (NULL: the worker''s --limit-nproc)';
COMMENT ON COLUMN pgsched.task.limit_fsize_bytes IS
    'RLIMIT_FSIZE of its commands, bytes (NULL: the worker''s --limit-fsize)';
COMMENT ON COLUMN pgsched.task.network IS
    'whether its sandboxed commands may use the host''s network (NULL: the worker''s --allow-network)';

SELECT pgsched_internal.secure_v1();
