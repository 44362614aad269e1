-- The leader's usage job (pgsched/scheduler/usage.py; migrations 0021, 0025): the slow
-- quotas measured and every quota's alert opened or resolved, in one statement.

-- name: usage_lock :one
-- One usage run at a time (two leaders for a moment): each writes totals computed from the
-- row it read, so two at once would lose one's deltas.
-- The key comes from the secret seed (internal_key_v1, 0027): no tenant's login can hold it.
SELECT pg_try_advisory_xact_lock(pgsched_internal.internal_key_v1('usage')) AS locked

-- name: usage_measure :many
-- Adds the usage written since the last run (usage_delta, consumed) to each tenant's
-- totals: compute seconds of the attempts that ended this calendar month (UTC; a new month
-- starts from 0) and stored log bytes. Judges every quota with a limit: `over` is the slow
-- quotas (compute_minutes, log_bytes) at or past their limit, which the claim then holds;
-- `alerted` is the quotas reached (running executions at max_running, this hour's starts at
-- max_starts_per_hour, compute, log bytes), kept until the use falls to 80 % of the quota so
-- that a tenant hovering at its limit is not alerted every run. A quota newly alerted opens
-- a 'quota' alert, and queues a delivery to the tenant's alert_webhook when it has one
-- (0034); one no longer alerted resolves it. A tenant whose `over` empties is woken
-- (pgsched_execution, its workers claim again). Writes only the tenants whose usage
-- changed. Returns one row per change: change (opened, resolved, held, released), tenant,
-- quota, details.
WITH counted AS (
    DELETE FROM pgsched.usage_delta d RETURNING d.tenant, d.month_start, d.compute_seconds, d.log_bytes
), added AS (
    SELECT c.tenant,
           coalesce(sum(c.compute_seconds)
                    FILTER (WHERE c.month_start = date_trunc('month', now(), 'UTC')), 0) AS compute_seconds,
           coalesce(sum(c.log_bytes), 0) AS log_bytes
      FROM counted c
     GROUP BY c.tenant
), running AS (
    SELECT e.tenant, count(*) AS n FROM pgsched.execution e WHERE e.state = 'running' GROUP BY e.tenant
), measured AS (
    SELECT u.tenant, u.over AS was_over, u.alerted AS was_alerted, a.tenant IS NOT NULL AS added,
           u.month_start IS DISTINCT FROM date_trunc('month', now(), 'UTC') AS new_month,
           CASE WHEN u.month_start = date_trunc('month', now(), 'UTC') THEN u.compute_seconds ELSE 0 END
               + coalesce(a.compute_seconds, 0) AS compute_seconds,
           u.log_bytes + coalesce(a.log_bytes, 0) AS log_bytes,
           coalesce(r.n, 0) AS running,
           CASE WHEN u.hour_start = date_trunc('hour', now(), 'UTC') THEN u.hour_starts ELSE 0 END AS hour_starts,
           t.max_running, t.max_starts_per_hour, t.max_compute_minutes_per_month, t.max_log_bytes
      FROM pgsched.tenant_usage u
      JOIN pgsched.tenant t ON t.name = u.tenant
      LEFT JOIN added a ON a.tenant = u.tenant
      LEFT JOIN running r ON r.tenant = u.tenant
), quotas AS (
    SELECT m.tenant, q.quota, q.used, q.lim, q.quota IN ('compute_minutes', 'log_bytes') AS slow,
           q.used >= q.lim AS reached, q.quota = ANY (m.was_alerted) AND q.used > q.lim * 0.8 AS still
      FROM measured m
     CROSS JOIN LATERAL (VALUES
           ('running', m.running::numeric, m.max_running::numeric),
           ('starts_per_hour', m.hour_starts::numeric, m.max_starts_per_hour::numeric),
           ('compute_minutes', (m.compute_seconds / 60)::numeric, m.max_compute_minutes_per_month::numeric),
           ('log_bytes', m.log_bytes::numeric, m.max_log_bytes::numeric)) AS q (quota, used, lim)
     WHERE q.lim IS NOT NULL
), judged AS (
    SELECT m.tenant, m.was_over, m.was_alerted,
           coalesce((SELECT array_agg(q.quota ORDER BY q.quota) FROM quotas q
                      WHERE q.tenant = m.tenant AND q.slow AND q.reached), '{}') AS over,
           coalesce((SELECT array_agg(q.quota ORDER BY q.quota) FROM quotas q
                      WHERE q.tenant = m.tenant AND (q.reached OR q.still)), '{}') AS alerted
      FROM measured m
), written AS (
    UPDATE pgsched.tenant_usage u
       SET month_start = date_trunc('month', now(), 'UTC'),
           compute_seconds = m.compute_seconds,
           log_bytes = m.log_bytes,
           over = j.over,
           alerted = j.alerted,
           measured_at = now()
      FROM measured m JOIN judged j ON j.tenant = m.tenant
     WHERE u.tenant = m.tenant
       AND (m.added OR m.new_month OR j.over <> m.was_over OR j.alerted <> m.was_alerted)
    RETURNING u.tenant, u.over
), opened AS (
    INSERT INTO pgsched.alert (tenant, task_id, kind, opened_at, details)
    SELECT q.tenant, NULL, 'quota', now(),
           jsonb_build_object('quota', q.quota, 'used', q.used, 'limit', q.lim)
      FROM quotas q JOIN judged j ON j.tenant = q.tenant
     WHERE q.reached AND NOT (q.quota = ANY (j.was_alerted))
    ON CONFLICT (tenant, (details ->> 'quota')) WHERE kind = 'quota' AND resolved_at IS NULL DO NOTHING
    RETURNING id, tenant, opened_at, details
), hooks AS (
    -- the tenant's own webhook (0034), in this statement: an alert is never opened unsent
    INSERT INTO pgsched.webhook_delivery (tenant, task_id, event, url, payload)
    SELECT o.tenant, NULL, 'quota', t.alert_webhook,
           jsonb_build_object('event', 'quota', 'alert_id', o.id, 'tenant', o.tenant,
                              'opened_at', o.opened_at, 'details', o.details)
      FROM opened o JOIN pgsched.tenant t ON t.name = o.tenant
     WHERE t.alert_webhook IS NOT NULL
    RETURNING id
), resolved AS (
    UPDATE pgsched.alert al
       SET resolved_at = now()
      FROM judged j
     WHERE al.kind = 'quota' AND al.resolved_at IS NULL AND al.tenant = j.tenant  -- alert_open_quota_key
       AND NOT (al.details ->> 'quota' = ANY (j.alerted))
    RETURNING al.tenant, al.details
), woken AS (
    SELECT w.tenant, pg_notify('pgsched_execution', w.tenant)
      FROM written w JOIN judged j ON j.tenant = w.tenant
     WHERE w.over = '{}' AND j.was_over <> '{}'
)
SELECT 'opened' AS change, o.tenant, o.details ->> 'quota' AS quota, o.details FROM opened o
UNION ALL
SELECT 'resolved', r.tenant, r.details ->> 'quota', r.details FROM resolved r
UNION ALL
SELECT 'held', w.tenant, array_to_string(w.over, ','), NULL
  FROM written w JOIN judged j ON j.tenant = w.tenant
 WHERE w.over <> '{}' AND w.over <> j.was_over
UNION ALL
SELECT 'released', k.tenant, NULL, NULL FROM woken k

