-- Secrets by reference (migration 0029; docs/security.md, "Secrets"). The values come and
-- go sealed (pgsched/secret_keys.py): the database sees ciphertext, nonce and key id only.

-- name: secret_set :one
-- Set secret %(name)s of %(tenant)s (NULL: the caller's) to a sealed value; created: false
-- when it replaced one.
SELECT pgsched.secret_set_v1(%(name)s::text, %(ciphertext)s::bytea, %(nonce)s::bytea,
                             %(key_id)s::text, %(tenant)s::text, %(by)s::text) AS created

-- name: secret_list :many
-- The secrets of %(tenant)s (NULL: the caller's): names and metadata, no ciphertext.
SELECT secret_name AS name, key_id, created_at, created_by, updated_at, updated_by
  FROM pgsched.secret_list_v1(%(tenant)s::text)

-- name: secret_delete :exec
-- Delete secret %(name)s of %(tenant)s (NULL: the caller's); no_data_found when absent.
SELECT pgsched.secret_delete_v1(%(name)s::text, %(tenant)s::text)

-- name: secret_fetch :many
-- The sealed rows of %(names)s in %(tenant)s, for a worker resolving an execution's references.
SELECT secret_name AS name, ciphertext, nonce, key_id
  FROM pgsched_internal.secret_fetch_v1(%(tenant)s::text, %(names)s::text[])

-- name: secret_authored_params :one
-- The params task %(id)s of %(tenant)s was defined with: where its author may have written
-- references (an execution's params are these merged with its enqueuer's, whose references
-- a worker never resolves: docs/security.md, "Secrets").
SELECT params FROM pgsched.task WHERE id = %(id)s AND tenant = %(tenant)s

-- name: secret_referencing_tasks :many
-- The live tasks of the tenant whose env or params name stored secret %(ref)s
-- ('{{secret:NAME}}', found as written: strpos, no pattern), by name.
SELECT t.name FROM pgsched.task t
 WHERE t.tenant = %(tenant)s AND t.deleted_at IS NULL
   AND (strpos(t.env::text, %(ref)s) > 0 OR strpos(t.params::text, %(ref)s) > 0)
 ORDER BY t.name
