-- 0025: the slow quotas measured (issue 18, item 1): compute minutes per calendar month and
-- stored log bytes, by the scheduler leader's usage job (pgsched/scheduler/usage.py,
-- sql/usage.sql), and an alert to the tenant when it reaches any of its quotas.
--
-- 0021 made the claim take nothing for a tenant whose tenant_usage.over is not empty; this
-- migration fills it in. Usage is counted where it is written, never recounted from
-- history: a statement trigger on execution_attempt (an attempt's row is written once, when
-- it ends) and on execution_log appends what a statement added, summed per tenant, to
-- usage_delta; the usage job consumes the deltas (DELETE ... RETURNING: a delta a
-- transaction has not committed yet is counted at the next run, never twice, never lost)
-- and adds them to tenant_usage. A run costs what happened since the last one, whatever the
-- size of the month's history. A dropped log partition (retention) subtracts its bytes in
-- the transaction that drops it; attempts' partitions need nothing (compute is counted when
-- an attempt ends, and only the current month's counts).

-- What statements added to a tenant's usage since the usage job last ran. month_start:
-- the calendar month (UTC) of an attempt's finish, for compute; NULL for log bytes (which
-- may be negative: lines deleted, partitions dropped).
CREATE TABLE pgsched.usage_delta (
    tenant text NOT NULL,
    month_start timestamptz,
    compute_seconds double precision NOT NULL DEFAULT 0,
    log_bytes bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE pgsched.usage_delta IS
    'compute seconds and log bytes written since the usage job last counted them (it deletes '
    'what it adds to tenant_usage)';
-- Row-level security with no policy for the engine or the web: a tenant's login cannot
-- write itself a negative usage (the triggers are definer functions), nor read another's.
ALTER TABLE pgsched.usage_delta ENABLE ROW LEVEL SECURITY;
CREATE POLICY instance_rows ON pgsched.usage_delta TO pgsched_instance USING (true) WITH CHECK (true);

CREATE FUNCTION pgsched_internal.usage_attempts_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    INSERT INTO pgsched.usage_delta (tenant, month_start, compute_seconds)
    SELECT n.tenant, date_trunc('month', n.finished_at, 'UTC'),
           sum(greatest(extract(epoch FROM n.finished_at - n.started_at), 0))
      FROM new_attempts n
     GROUP BY 1, 2;
    RETURN NULL;
END $$;
CREATE TRIGGER usage_attempts AFTER INSERT ON pgsched.execution_attempt
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT
    EXECUTE FUNCTION pgsched_internal.usage_attempts_v1();

CREATE FUNCTION pgsched_internal.usage_log_added_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    INSERT INTO pgsched.usage_delta (tenant, log_bytes)
    SELECT n.tenant, sum(octet_length(n.line)) FROM new_lines n GROUP BY 1;
    RETURN NULL;
END $$;
CREATE TRIGGER usage_log_added AFTER INSERT ON pgsched.execution_log
    REFERENCING NEW TABLE AS new_lines FOR EACH STATEMENT
    EXECUTE FUNCTION pgsched_internal.usage_log_added_v1();

CREATE FUNCTION pgsched_internal.usage_log_removed_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    INSERT INTO pgsched.usage_delta (tenant, log_bytes)
    SELECT o.tenant, -sum(octet_length(o.line)) FROM old_lines o GROUP BY 1;
    RETURN NULL;
END $$;
CREATE TRIGGER usage_log_removed AFTER DELETE ON pgsched.execution_log
    REFERENCING OLD TABLE AS old_lines FOR EACH STATEMENT
    EXECUTE FUNCTION pgsched_internal.usage_log_removed_v1();

-- What is there already: the month's compute so far and every stored log line (once, here).
INSERT INTO pgsched.usage_delta (tenant, month_start, compute_seconds)
SELECT a.tenant, date_trunc('month', a.finished_at, 'UTC'),
       sum(greatest(extract(epoch FROM a.finished_at - a.started_at), 0))
  FROM pgsched.execution_attempt a
 WHERE a.finished_at >= date_trunc('month', now(), 'UTC')
 GROUP BY 1, 2;
INSERT INTO pgsched.usage_delta (tenant, log_bytes)
SELECT l.tenant, sum(octet_length(l.line)) FROM pgsched.execution_log l GROUP BY 1;

-- 0018's partition_drop_v1, which now takes a log partition's bytes off its tenants' usage
-- in the transaction that drops it.
CREATE OR REPLACE FUNCTION pgsched_internal.partition_drop_v1(partition_name text, parent text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pgsched', 'pg_temp'
    AS $_$
BEGIN
    IF parent NOT IN ('execution_history', 'execution_attempt', 'execution_log')
       OR partition_name !~ '_p[0-9]{8}$' THEN
        RAISE EXCEPTION 'partition: % is not a daily partition of pgsched history', partition_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('LOCK TABLE pgsched.%I IN ACCESS EXCLUSIVE MODE', partition_name);
    IF pgsched_internal.partition_is_live_v1(partition_name, parent) THEN
        RETURN false;
    END IF;
    IF parent = 'execution_log' THEN
        EXECUTE format('INSERT INTO pgsched.usage_delta (tenant, log_bytes) '
                       'SELECT tenant, -sum(octet_length(line)) FROM pgsched.%I GROUP BY 1',
                       partition_name);
    END IF;
    EXECUTE format('ALTER TABLE pgsched.%I DETACH PARTITION pgsched.%I', parent, partition_name);
    EXECUTE format('DROP TABLE pgsched.%I', partition_name);
    RETURN true;
END $_$;

-- A quota alert is the tenant's, not a task's: kind 'quota', no task, details->>'quota'
-- names the quota (running, starts_per_hour, compute_minutes, log_bytes); at most one open
-- per tenant and quota. Row-level security (0018) already shows a tenant its own alerts only.
ALTER TABLE pgsched.alert ALTER COLUMN task_id DROP NOT NULL;
ALTER TABLE pgsched.alert DROP CONSTRAINT alert_kind_check;
ALTER TABLE pgsched.alert
    ADD CONSTRAINT alert_kind_check CHECK (kind IN ('missed_schedule', 'failure_rate', 'quota')),
    ADD CONSTRAINT alert_quota_has_no_task CHECK ((kind = 'quota') = (task_id IS NULL)),
    ADD CONSTRAINT alert_quota_named CHECK (kind <> 'quota' OR details ? 'quota');
CREATE UNIQUE INDEX alert_open_quota_key ON pgsched.alert (tenant, (details ->> 'quota'))
    WHERE kind = 'quota' AND resolved_at IS NULL;

COMMENT ON COLUMN pgsched.tenant_usage.alerted IS
    'the quotas the tenant has an open quota alert for (reached; resolved below 80 % of the quota)';

SELECT pgsched_internal.secure_v1();
