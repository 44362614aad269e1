-- The REST API's bearer tokens (pgsched.web.credentials; table api_token, 0005_web.sql).

-- name: api_token_insert :one
-- expires_in: seconds from now (the database's clock) until it expires; NULL: never.
-- instance: the token may see and act on what spans tenants (migration 0020); may_reveal: the
-- web reads env values and sensitive params for it (migration 0036).
INSERT INTO pgsched.api_token (tenant, role, name, token_sha256, expires_at, instance, may_reveal)
VALUES (%(tenant)s, %(role)s, %(name)s, %(token_sha256)s,
        now() + %(expires_in)s::float8 * interval '1 second', %(instance)s, %(may_reveal)s)
RETURNING id, tenant, role, instance, may_reveal, name, created_at, expires_at

-- name: api_token_list :many
-- Every token of a tenant (all tenants when tenant is NULL), newest first.
SELECT id, tenant, role, instance, may_reveal, name, created_at, last_used_at, expires_at,
       revoked_at
  FROM pgsched.api_token
 WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s
 ORDER BY id DESC

-- name: api_token_revoke :one
-- Revoke a token (idempotent: a revoked token keeps its first revocation time).
UPDATE pgsched.api_token SET revoked_at = coalesce(revoked_at, now())
 WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
RETURNING id, tenant, role, instance, may_reveal, name, created_at, last_used_at, expires_at,
          revoked_at

-- name: api_token_revoke_named :exec
-- Revoke the live tokens of a tenant with a given name (pgsched dev replaces its own).
UPDATE pgsched.api_token SET revoked_at = now()
 WHERE tenant = %(tenant)s AND name = %(name)s AND revoked_at IS NULL

-- name: api_token_authenticate :one
-- The live token with this hash (not revoked, not expired by now()); its last use is recorded at most once a minute so that
-- reads do not write on every request.
WITH hit AS (
    SELECT id, tenant, role, instance, may_reveal, name, last_used_at FROM pgsched.api_token
     WHERE token_sha256 = %(token_sha256)s AND revoked_at IS NULL
       AND (expires_at IS NULL OR expires_at > now())
), touch AS (
    UPDATE pgsched.api_token t SET last_used_at = now()
      FROM hit
     WHERE t.id = hit.id AND (hit.last_used_at IS NULL OR hit.last_used_at < now() - interval '1 minute')
)
SELECT id, tenant, role, instance, may_reveal, name FROM hit

-- name: api_token_set_reveal :one
-- Grant or withdraw the reveal permission (migration 0036) of a token of tenant (any when
-- NULL); it holds from the token's next request. before: what it was.
UPDATE pgsched.api_token t SET may_reveal = %(may_reveal)s
  FROM (SELECT id, may_reveal FROM pgsched.api_token WHERE id = %(id)s FOR UPDATE) old
 WHERE t.id = old.id AND (%(tenant)s::text IS NULL OR t.tenant = %(tenant)s)
RETURNING t.id, t.tenant, t.role, t.instance, t.may_reveal, t.name, old.may_reveal AS before
