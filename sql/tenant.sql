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
-- Every tenant with its logins and how many live tasks and DAGs it has.
SELECT t.name, t.created_at,
       coalesce((SELECT array_agg(m.role_name::text || ':' || m.purpose ORDER BY m.role_name)
                   FROM pgsched.tenant_role m WHERE m.tenant = t.name), '{}') AS logins,
       (SELECT count(*) FROM pgsched.task k WHERE k.tenant = t.name AND k.deleted_at IS NULL) AS tasks,
       (SELECT count(*) FROM pgsched.dag d WHERE d.tenant = t.name AND d.deleted_at IS NULL) AS dags
  FROM pgsched.tenant t
 ORDER BY t.name

-- name: tenant_get :one
SELECT t.name,
       (SELECT count(*) FROM pgsched.task k WHERE k.tenant = t.name AND k.deleted_at IS NULL) AS tasks,
       (SELECT count(*) FROM pgsched.dag d WHERE d.tenant = t.name AND d.deleted_at IS NULL) AS dags,
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
