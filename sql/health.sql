-- The health of what pgsched runs on (pgsched.health): each live process's clock offset
-- from the database, and what holds back the cleanup of dead rows (migration 0011).

-- name: health_thresholds :one
-- Above these a clock offset (seconds, either way) or a snapshot's age (seconds) is warned
-- about (settings clock_offset_warn_seconds, snapshot_age_warn_seconds).
SELECT coalesce((pgsched_internal.setting_v1('clock_offset_warn_seconds'))::float8, 1) AS clock_offset_warn_seconds,
       coalesce((pgsched_internal.setting_v1('snapshot_age_warn_seconds'))::float8, 300) AS snapshot_age_warn_seconds

-- name: health_clock_offsets :many
-- Live processes and their host's clock offset from the database (host - database,
-- seconds; NULL until measured): running workers not yet silent for
-- worker_dead_after_heartbeats intervals, and scheduler processes seen in the last 30 s.
-- measured_at: the database's time of the measurement.
SELECT 'worker' AS kind, w.id, w.name, w.hostname, w.pid, NULL::text AS role,
       w.clock_offset_seconds AS offset_seconds, w.clock_round_trip_seconds AS round_trip_seconds,
       w.last_heartbeat_at AS measured_at
  FROM pgsched.worker w
 WHERE w.state = 'running'
   AND w.last_heartbeat_at > now() - coalesce((pgsched_internal.setting_v1('worker_dead_after_heartbeats'))::float8, 3)
                                     * w.heartbeat_interval * interval '1 second'
UNION ALL
SELECT 'scheduler', n.id, n.name, n.hostname, n.pid, n.role, n.clock_offset_seconds,
       n.clock_round_trip_seconds, n.last_seen_at
  FROM pgsched.scheduler_node n
 WHERE n.role <> 'stopped' AND n.last_seen_at > now() - interval '30 seconds'
 ORDER BY kind, id

-- name: health_snapshot_holders :many
-- What holds back this database's cleanup horizon (VACUUM keeps every row version that
-- one of these may still see, so dead rows of the hot execution table pile up), oldest
-- first, at most %(limit)s: sessions of this database with a snapshot (backend_xmin) or a
-- transaction id (backend_xid), and walsenders (no database: their horizon counts for every
-- database); prepared transactions of this database; replication slots with an xmin
-- (hot_standby_feedback; catalog_xmin is left out: it holds back only system catalogs).
-- Since PostgreSQL 14 other databases' sessions do not hold back this database's tables.
-- Autovacuum workers and this session are left out. age_seconds: since the transaction
-- (or the prepared one) began, NULL for a slot (no time is kept); xid_age: transactions
-- since the horizon it holds. Other roles' sessions show only with pg_read_all_stats.
WITH holder AS (
    SELECT 'session' AS kind, a.pid, a.application_name, a.usename::text AS usename,
           host(a.client_addr) AS client_addr, a.state, a.backend_type AS detail, a.xact_start AS since,
           CASE WHEN a.backend_xmin IS NULL THEN a.backend_xid
                WHEN a.backend_xid IS NULL THEN a.backend_xmin
                WHEN age(a.backend_xid) > age(a.backend_xmin) THEN a.backend_xid
                ELSE a.backend_xmin END AS horizon
      FROM pg_stat_activity a
     WHERE a.pid <> pg_backend_pid()
       AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
       AND (a.datname = current_database() OR a.datid IS NULL)
       AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
    UNION ALL
    SELECT 'prepared', NULL, NULL, p.owner::text, NULL, 'prepared', p.gid, p.prepared, p.transaction
      FROM pg_prepared_xacts p
     WHERE p.database = current_database()
    UNION ALL
    SELECT 'replication_slot', s.active_pid, NULL, NULL, NULL,
           CASE WHEN s.active THEN 'active' ELSE 'inactive' END, s.slot_name, NULL, s.xmin
      FROM pg_replication_slots s
     WHERE s.xmin IS NOT NULL
)
SELECT kind, pid, application_name, usename, client_addr, state, detail, since,
       extract(epoch FROM statement_timestamp() - since)::float8 AS age_seconds,
       age(horizon)::bigint AS xid_age
  FROM holder
 ORDER BY age(horizon) DESC, since
 LIMIT %(limit)s
