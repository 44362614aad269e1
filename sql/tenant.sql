-- Tenants and the logins that act for them (migration 0018; docs/security.md).

-- name: tenant_create :one
-- A tenant; made is false when it was there already.
INSERT INTO pgsched.tenant AS t (name) VALUES (%(name)s)
ON CONFLICT (name) DO UPDATE SET name = t.name
RETURNING t.name, t.created_at, (xmax = 0) AS made

-- name: tenant_login :one
-- A login made (or given) the purpose's group role and mapped to the tenant: needs
-- CREATEROLE. made: whether the role is new.
SELECT pgsched_internal.tenant_login_v1(%(role)s, %(tenant)s, %(purpose)s, %(password)s) AS made

-- name: tenant_list :many
-- Every tenant with its logins and how many live tasks and DAGs it has (tasks as task_list
-- counts them: a DAG's node tasks are part of their DAG).
SELECT t.name, t.created_at,
       coalesce((SELECT array_agg(m.role_name::text || ':' || m.purpose ORDER BY m.role_name)
                   FROM pgsched.tenant_role m WHERE m.tenant = t.name), '{}') AS logins,
       (SELECT count(*) FROM pgsched.task k WHERE k.tenant = t.name AND k.deleted_at IS NULL
           AND k.handler_kind <> 'dag' AND (k.source IS NULL OR k.source NOT LIKE 'dag:%%')) AS tasks,
       (SELECT count(*) FROM pgsched.dag d WHERE d.tenant = t.name AND d.deleted_at IS NULL) AS dags
  FROM pgsched.tenant t
 ORDER BY t.name

-- name: tenant_get :one
-- A tenant locked for its deletion, with what would be left in it: live tasks (a DAG's
-- node tasks counted with their DAG), DAGs, live API tokens and web users.
SELECT t.name,
       (SELECT count(*) FROM pgsched.task k WHERE k.tenant = t.name AND k.deleted_at IS NULL
           AND k.handler_kind <> 'dag' AND (k.source IS NULL OR k.source NOT LIKE 'dag:%%')) AS tasks,
       (SELECT count(*) FROM pgsched.dag d WHERE d.tenant = t.name AND d.deleted_at IS NULL) AS dags,
       (SELECT count(*) FROM pgsched.api_token a WHERE a.tenant = t.name AND a.revoked_at IS NULL) AS tokens,
       (SELECT count(*) FROM pgsched.web_user u WHERE u.tenant = t.name) AS users,
       coalesce((SELECT array_agg(m.role_name::text ORDER BY m.role_name)
                   FROM pgsched.tenant_role m WHERE m.tenant = t.name), '{}') AS logins
  FROM pgsched.tenant t
 WHERE t.name = %(name)s
   FOR UPDATE OF t

-- name: tenant_delete :exec
-- The tenant and its logins' mapping (the roles themselves stay unless dropped).
DELETE FROM pgsched.tenant WHERE name = %(name)s

-- name: tenant_drop_login :exec
-- A login dropped (cluster-wide): only one that acts for this tenant.
SELECT pgsched_internal.tenant_drop_login_v1(%(role)s, %(tenant)s)

-- name: tenant_of_login :one
-- The tenant this session's login acts for, when it is a tenant's login (0018).
SELECT tenant FROM pgsched.tenant_role WHERE role_name = session_user

-- name: tenant_alert_webhook :one
-- Where the tenant's own alerts go (0034); a tenant's login reads its own row only.
SELECT t.name AS tenant, t.alert_webhook FROM pgsched.tenant t WHERE t.name = %(tenant)s

-- name: tenant_alert_webhook_set :one
-- Set or (NULL) remove it: the installation, or the web acting for the tenant.
SELECT s.name AS tenant, s.alert_webhook
  FROM pgsched_internal.tenant_alert_webhook_set_v1(%(tenant)s, %(url)s::text) s
