-- Settings of the sessions pgsched opens (pgsched.db).

-- name: session_statement_timeout :one
-- The server's own statement_timeout for this session (seconds; 0: none), as the role, the
-- database or the server set it: the client-side statement deadline stays above it, so
-- the server ends a long statement first, with a clear error (pgsched.deadline).
SELECT extract(epoch FROM current_setting('statement_timeout')::interval)::float8 AS seconds
