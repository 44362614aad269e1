-- The audit log of the web admin's access (pgsched.web.audit; table audit_event,
-- 0019_web_sessions.sql).

-- name: audit_insert :one
-- Record one event. tenant NULL: not known (a sign-in as an unknown user). A failed sign-in
-- or a role refusal (anyone can cause those, as often as they like) is recorded only while
-- fewer than the setting audit_noisy_per_minute of that action and tenant were recorded in
-- the last minute: a flood shows as that many rows a minute, and fills nothing. No row
-- when it was left out.
INSERT INTO pgsched.audit_event (tenant, actor_kind, actor, action, target, detail, ip)
SELECT %(tenant)s, %(actor_kind)s, %(actor)s, %(action)s, %(target)s, %(detail)s, %(ip)s
 WHERE %(action)s NOT IN ('sign_in_failed', 'forbidden')
    OR (SELECT count(*) FROM (
            SELECT 1 FROM pgsched.audit_event
             WHERE action = %(action)s AND tenant_key = coalesce(%(tenant)s::text, '')
               AND action IN ('sign_in_failed', 'forbidden')
               AND at > now() - interval '1 minute'
             LIMIT coalesce((pgsched_internal.setting_v1('audit_noisy_per_minute'))::integer, 600)
        ) recent)
       < coalesce((pgsched_internal.setting_v1('audit_noisy_per_minute'))::integer, 600)
RETURNING id, at

-- name: audit_sign_in_failed :one
-- A failed sign-in: as a known user (their tenant), with a known but revoked or expired
-- token (its tenant and id), or unknown (tenant NULL). The token itself is never stored.
-- Capped as audit_insert caps it.
WITH who AS (
    SELECT coalesce(
               (SELECT tenant FROM pgsched.web_user WHERE username = %(username)s),
               (SELECT tenant FROM pgsched.api_token WHERE token_sha256 = %(token_sha256)s)
           ) AS tenant,
           (SELECT id::text FROM pgsched.api_token WHERE token_sha256 = %(token_sha256)s) AS token_id
)
INSERT INTO pgsched.audit_event (tenant, actor_kind, actor, action, target, detail, ip)
SELECT who.tenant, 'anonymous', '', 'sign_in_failed',
       CASE WHEN %(username)s::text <> '' THEN 'user ' || %(username)s
            WHEN who.token_id IS NOT NULL THEN 'token ' || who.token_id
            WHEN length(%(token_sha256)s) > 0 THEN 'token'
            ELSE '' END,
       %(detail)s, %(ip)s
  FROM who
 WHERE (SELECT count(*) FROM (
            SELECT 1 FROM pgsched.audit_event
             WHERE action = 'sign_in_failed' AND tenant_key = coalesce(who.tenant, '')
               AND at > now() - interval '1 minute'
             LIMIT coalesce((pgsched_internal.setting_v1('audit_noisy_per_minute'))::integer, 600)
        ) recent)
       < coalesce((pgsched_internal.setting_v1('audit_noisy_per_minute'))::integer, 600)
RETURNING id, at

-- name: audit_list :many
-- Events of a tenant (every tenant, and those of none, when tenant is NULL), newest first,
-- before the id cursor; action filters when given.
SELECT id, at, tenant, actor_kind, actor, action, target, detail, ip
  FROM pgsched.audit_event
 WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
   AND (%(action)s::text IS NULL OR action = %(action)s)
   AND (%(before)s::bigint IS NULL OR id < %(before)s)
 ORDER BY id DESC
 LIMIT %(limit)s

-- name: audit_prune :one
-- Remove events older than the setting audit_retention_days (90); count: how many.
WITH gone AS (
    DELETE FROM pgsched.audit_event
     WHERE at < now() - coalesce((pgsched_internal.setting_v1('audit_retention_days'))::float8, 90)
                        * interval '1 day'
    RETURNING 1
)
SELECT count(*) AS count FROM gone
