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
