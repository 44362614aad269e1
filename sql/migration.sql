-- Queries of the migrator (pgsched/migrate.py). The tracking table itself is created by
-- migration_bootstrap so that `pgsched migrate --status` works on an empty database.

-- name: migration_lock :exec
-- Serialise concurrent migrators (session-level lock on the migrator's own connection).
SELECT pg_advisory_lock(%(key)s)

-- name: migration_unlock :exec
SELECT pg_advisory_unlock(%(key)s)

-- name: migration_bootstrap :exec
CREATE SCHEMA IF NOT EXISTS pgsched

-- name: migration_bootstrap_table :exec
CREATE TABLE IF NOT EXISTS pgsched.schema_migration (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: migration_table_exists :one
SELECT to_regclass('pgsched.schema_migration') IS NOT NULL AS present

-- name: migration_applied :many
SELECT version, name, checksum, applied_at FROM pgsched.schema_migration ORDER BY version

-- name: migration_record :exec
INSERT INTO pgsched.schema_migration (version, name, checksum) VALUES (%(version)s, %(name)s, %(checksum)s)

-- name: migration_server_version :one
SELECT current_setting('server_version_num')::int AS version

-- name: migration_set_lock_timeout :exec
-- How long any one lock may be waited for, in milliseconds (0: for ever), the migrator's
-- session only (https://www.postgresql.org/docs/current/runtime-config-client.html).
SELECT set_config('lock_timeout', %(ms)s::text, false)

-- name: migration_blockers :many
-- The sessions that hold what the migrator's session %(pid)s waits for: an advisory lock or a
-- table's (pg_blocking_pids, https://www.postgresql.org/docs/current/functions-info.html).
-- Without pg_read_all_stats a login reads other logins' pid, name and application only.
SELECT a.pid, a.usename AS login, a.application_name AS application,
       a.client_addr::text AS client, a.xact_start, a.state
  FROM pg_stat_activity a
 WHERE a.pid = ANY (pg_blocking_pids(%(pid)s))
 ORDER BY a.pid
