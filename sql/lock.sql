-- name: lock_try :one
-- Take the caller's tenant's lock %(name)s if it is free (pgsched/locks.py; migration 0023).
SELECT pgsched.lock_try_v1(%(name)s::text, %(scope)s::text, %(tenant)s::text) AS got

-- name: lock_wait :one
-- Take it, waiting up to %(timeout)s seconds (NULL: no limit).
SELECT pgsched.lock_wait_v1(%(name)s::text, %(timeout)s::float8, %(scope)s::text, %(tenant)s::text) AS got

-- name: lock_release :one
-- Release one hold of this session on it; false when it held none.
SELECT pgsched.lock_release_v1(%(name)s::text, %(tenant)s::text) AS released

-- name: lock_list :many
-- The caller's tenant's locks (%(tenant)s '*': every tenant's), held and waited for.
SELECT lock_tenant AS tenant, lock_name AS name, lock_key AS key, granted, pid, waiting_since,
       application_name, execution_id
  FROM pgsched.lock_list_v1(%(tenant)s::text)

-- name: lock_session_end :one
-- End an execution's lock session that a cancel did not free (pgsched/worker/execution_locks.py):
-- its locks go with it. The worker's own login may end its own sessions.
SELECT pg_terminate_backend(%(pid)s::integer) AS ended

-- name: lock_session_check :one
-- `pgsched lock run`: its session (and so its lock) is still there while the command runs.
SELECT 1 AS alive
