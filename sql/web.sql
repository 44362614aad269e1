-- The web admin's users and keys (pgsched.web; tables web_user and web_key, 0005_web.sql).

-- name: web_user_insert :one
-- instance: the user may see and act on what spans tenants (migration 0020); may_reveal: the
-- web reads env values and sensitive params for them (migration 0036).
INSERT INTO pgsched.web_user (username, tenant, role, password_hash, instance, may_reveal)
VALUES (%(username)s, %(tenant)s, %(role)s, %(password_hash)s, %(instance)s, %(may_reveal)s)
ON CONFLICT (username) DO NOTHING
RETURNING username, tenant, role, instance, may_reveal, created_at

-- name: web_user_get :one
SELECT username, tenant, role, instance, may_reveal, password_hash, created_at
  FROM pgsched.web_user
 WHERE username = %(username)s

-- name: web_user_rehash :exec
-- Store a password hash made with newer argon2 parameters.
UPDATE pgsched.web_user SET password_hash = %(password_hash)s, updated_at = now() WHERE username = %(username)s

-- name: web_key_ensure :one
-- The key called name, stored first as the given value if there is none yet. When another
-- process stored one meanwhile this returns no row; ask again with web_key_get.
WITH added AS (
    INSERT INTO pgsched.web_key (name, value) VALUES (%(name)s, %(value)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING value
)
SELECT value FROM added
UNION ALL
SELECT value FROM pgsched.web_key WHERE name = %(name)s

-- name: web_key_get :one
SELECT value FROM pgsched.web_key WHERE name = %(name)s

-- name: web_user_list :many
SELECT username, tenant, role, instance, may_reveal, created_at, updated_at FROM pgsched.web_user
 WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s
 ORDER BY username

-- name: web_user_delete :one
-- Remove a user (of tenant, when not NULL); their sessions are deleted with them
-- (web_session's ON DELETE CASCADE), so they end at their next request.
DELETE FROM pgsched.web_user
 WHERE username = %(username)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
RETURNING username, tenant

-- name: web_user_set_password :one
-- A new password hash (a password change; the caller ends the user's sessions with it).
UPDATE pgsched.web_user SET password_hash = %(password_hash)s, updated_at = now()
 WHERE username = %(username)s
RETURNING username, tenant

-- name: web_user_set_reveal :one
-- Grant or withdraw the reveal permission (migration 0036) of a user of tenant (any when NULL);
-- it holds from the user's next request. before: what it was.
UPDATE pgsched.web_user u SET may_reveal = %(may_reveal)s, updated_at = now()
  FROM (SELECT username, may_reveal FROM pgsched.web_user WHERE username = %(username)s
         FOR UPDATE) old
 WHERE u.username = old.username AND (%(tenant)s::text IS NULL OR u.tenant = %(tenant)s)
RETURNING u.username, u.tenant, u.role, u.instance, u.may_reveal, old.may_reveal AS before
