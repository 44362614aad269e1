-- The audit log of the web admin's access (pgsched.web.audit; table audit_event,
-- 0019_web_sessions.sql).

-- name: audit_insert :one
-- Record one event (pgsched_internal.audit_record_v1, 0019: as the owner, whatever tenant the
-- transaction acts for). tenant NULL: not known (a sign-in as an unknown user). A failed
-- sign-in or a role refusal (anyone can cause those, as often as they like) is recorded
-- only while fewer than the setting audit_noisy_per_minute of that action and tenant were
-- recorded in the last minute; id is NULL when it was left out.
SELECT pgsched_internal.audit_record_v1(%(tenant)s, %(actor_kind)s, %(actor)s, %(action)s,
                                        %(target)s, %(detail)s, %(ip)s) AS id

-- name: audit_sign_in_failed :one
-- A failed sign-in: as a known user (their tenant), with a known but revoked or expired
-- token (its tenant and id), or unknown (tenant NULL). The token itself is never stored.
-- Capped as audit_insert caps it. (web_user and api_token are the web's own tables, which
-- it reads across tenants.)
WITH who AS (
    SELECT coalesce(
               (SELECT tenant FROM pgsched.web_user WHERE username = %(username)s),
               (SELECT tenant FROM pgsched.api_token WHERE token_sha256 = %(token_sha256)s)
           ) AS tenant,
           (SELECT id::text FROM pgsched.api_token WHERE token_sha256 = %(token_sha256)s) AS token_id
)
SELECT pgsched_internal.audit_record_v1(
           who.tenant, 'anonymous', '', 'sign_in_failed',
           CASE WHEN %(username)s::text <> '' THEN 'user ' || %(username)s
                WHEN who.token_id IS NOT NULL THEN 'token ' || who.token_id
                WHEN length(%(token_sha256)s) > 0 THEN 'token'
                ELSE '' END,
           %(detail)s, %(ip)s) AS id
  FROM who

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
-- The leader's maintenance (pgsched_internal.access_prune_v1, 0019): audit events older than
-- the setting audit_retention_days (90) and web sessions that ended more than a day ago,
-- of every tenant; how many of each were removed.
SELECT events, sessions FROM pgsched_internal.access_prune_v1()
