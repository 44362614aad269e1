-- Sessions of the web admin (pgsched.web.session_store; table web_session, 0019_web_sessions.sql).

-- name: web_session_insert :one
-- A new session of a token (token_id) or a user (username), lasting max_age seconds by the
-- database's clock; the tenant is the backer's. No row when the backer is gone (revoked,
-- expired, deleted) by now.
INSERT INTO pgsched.web_session (id_sha256, tenant, token_id, username, csrf, ip, expires_at)
SELECT %(id_sha256)s, b.tenant, %(token_id)s, %(username)s, %(csrf)s, %(ip)s,
       now() + %(max_age)s * interval '1 second'
  FROM (SELECT tenant FROM pgsched.api_token
         WHERE id = %(token_id)s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
        UNION ALL
        SELECT tenant FROM pgsched.web_user WHERE username = %(username)s) b
RETURNING tenant, expires_at

-- name: web_session_trim :exec
-- Keep at most keep live sessions per token or user (the newest): a principal signing in
-- in a loop cannot grow the table without bound.
UPDATE pgsched.web_session SET revoked_at = now()
 WHERE id_sha256 IN (
       SELECT id_sha256 FROM pgsched.web_session
        WHERE (token_id = %(token_id)s OR username = %(username)s)
          AND revoked_at IS NULL AND expires_at > now()
        ORDER BY created_at DESC, id_sha256
       OFFSET %(keep)s)

-- name: web_session_resolve :one
-- The live session with this id hash and who it signs in: nothing when it was revoked, has
-- expired, or its token was revoked or has expired (now(): the database's clock). Its last
-- use is recorded at most once a minute.
WITH s AS (
    SELECT id_sha256, token_id, username, csrf, last_seen_at FROM pgsched.web_session
     WHERE id_sha256 = %(id_sha256)s AND revoked_at IS NULL AND expires_at > now()
), backer AS (
    SELECT s.id_sha256, s.csrf, 'token' AS kind, t.id::text AS ref,
           coalesce(nullif(t.name, ''), 'token ' || t.id) AS name, t.role, t.tenant,
           NULL::timestamptz AS since, t.instance, t.may_reveal
      FROM s JOIN pgsched.api_token t ON t.id = s.token_id
     WHERE t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
    UNION ALL
    SELECT s.id_sha256, s.csrf, 'user', u.username, u.username, u.role, u.tenant, u.created_at,
           u.instance, u.may_reveal
      FROM s JOIN pgsched.web_user u ON u.username = s.username
), touch AS (
    UPDATE pgsched.web_session w SET last_seen_at = now()
      FROM s
     WHERE w.id_sha256 = s.id_sha256 AND s.last_seen_at < now() - interval '1 minute'
)
SELECT csrf, kind, ref, name, role, tenant, since, instance, may_reveal FROM backer

-- name: web_session_revoke :one
-- End one session (sign-out); idempotent.
UPDATE pgsched.web_session SET revoked_at = coalesce(revoked_at, now())
 WHERE id_sha256 = %(id_sha256)s
RETURNING tenant, token_id, username

-- name: web_session_revoke_all :one
-- End every live session of a token (token_id) or a user (username): sign out everywhere,
-- a password change, a revoked token. count: how many were live.
WITH ended AS (
    UPDATE pgsched.web_session SET revoked_at = now()
     WHERE (token_id = %(token_id)s OR username = %(username)s)
       AND revoked_at IS NULL AND expires_at > now()
    RETURNING 1
)
SELECT count(*) AS count FROM ended

-- name: web_session_list :many
-- The live sessions of a token or a user, newest first (never their ids).
SELECT created_at, last_seen_at, expires_at, ip FROM pgsched.web_session
 WHERE (token_id = %(token_id)s OR username = %(username)s)
   AND revoked_at IS NULL AND expires_at > now()
 ORDER BY created_at DESC
