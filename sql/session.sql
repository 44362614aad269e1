-- Settings of the sessions pgsched opens (pgsched.db).

-- name: session_statement_timeout :one
-- The server's own statement_timeout for this session (seconds; 0: none), as the role, the
-- database or the server set it: the client-side statement deadline stays above it, so
-- the server ends a long statement first, with a clear error (pgsched.deadline).
SELECT extract(epoch FROM current_setting('statement_timeout')::interval)::float8 AS seconds

-- name: session_act_for :one
-- The tenant this transaction acts for, as row-level security reads it for a web login
-- (pgsched_internal.session_tenant_v1; '*': every tenant), and whether it reads sensitive
-- values ('on' or 'off': pgsched_internal.may_reveal_v1, migration 0031). Local: gone at
-- COMMIT.
SELECT set_config('pgsched.tenant', %(tenant)s, true) AS tenant,
       set_config('pgsched.reveal', %(reveal)s, true) AS reveal
