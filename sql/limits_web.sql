-- Reads of the limits for the web admin and /metrics (issue 18), over migrations 0021 and
-- 0024. The changes go through the store (pgsched.stores.limits) and its SQL API.

-- name: limits_web_tenant_usage :many
-- Every tenant the session sees (%(tenant)s: only that one; NULL: all), its quotas beside
-- what it uses now, as pgsched.tenant_usage_v1 reads one tenant: running counted from the
-- rows, hour_starts this clock hour (UTC), compute minutes this calendar month (UTC) and log
-- bytes as last measured (measured_at), over: the slow quotas exceeded. For an instance
-- page and scrape, which read every tenant at once; alert_webhook: where its own alerts go
-- (0034).
SELECT x.name AS tenant, x.max_running,
       (SELECT count(*) FROM pgsched.execution e WHERE e.tenant = x.name AND e.state = 'running') AS running,
       x.max_starts_per_hour,
       CASE WHEN u.hour_start = date_trunc('hour', now(), 'UTC') THEN u.hour_starts ELSE 0 END AS hour_starts,
       x.max_compute_minutes_per_month,
       CASE WHEN u.month_start = date_trunc('month', now(), 'UTC') THEN u.compute_seconds / 60 ELSE 0 END
           AS compute_minutes,
       x.max_log_bytes, coalesce(u.log_bytes, 0) AS log_bytes, x.weight, coalesce(u.over, '{}') AS over,
       u.measured_at, x.alert_webhook
  FROM pgsched.tenant x
  JOIN pgsched.tenant_usage u ON u.tenant = x.name
 WHERE %(tenant)s::text IS NULL OR x.name = %(tenant)s::text
 ORDER BY x.name
