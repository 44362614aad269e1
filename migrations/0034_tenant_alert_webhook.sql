-- A tenant's own webhook for its tenant-wide alerts (issue 18, item 1: "a tenant's admin
-- gets an alert when a quota is reached"). A quota alert (0025) opened on the dashboard and
-- in `pgsched alert list` only: a task's webhooks are per task, and a quota is no task's.
-- The tenant's admin now names one URL; the usage run that opens a quota alert writes its
-- delivery to the webhook outbox (0006) in the same statement, sent as every other
-- webhook is (pgsched/webhooks.py: retried with backoff, at least once).
ALTER TABLE pgsched.tenant ADD COLUMN alert_webhook text
    CONSTRAINT tenant_alert_webhook_check
    CHECK (alert_webhook ~ '^https?://[^/?#[:space:]]+' AND length(alert_webhook) <= 2000);
COMMENT ON COLUMN pgsched.tenant.alert_webhook IS
    'where the tenant''s own alerts (quota) are POSTed; NULL: none (migration 0034)';

ALTER TABLE pgsched.webhook_delivery DROP CONSTRAINT webhook_delivery_event_check;
ALTER TABLE pgsched.webhook_delivery ADD CONSTRAINT webhook_delivery_event_check
    CHECK (event IN ('failure', 'dlq', 'missed_schedule', 'failure_rate', 'quota'));

-- The tenant's admin sets it (the web, acting for the tenant) or the installation (the
-- CLI); not a tenant's engine or application login: a worker or an application has no say
-- in where its tenant's alerts go. NULL removes it. Returns the tenant's row.
CREATE FUNCTION pgsched_internal.tenant_alert_webhook_set_v1(t text, url text)
    RETURNS pgsched.tenant
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    r pgsched.tenant;
BEGIN
    IF NOT (pgsched_internal.is_instance_v1() OR pgsched_internal.session_tenant_v1() IN (t, '*')) THEN
        RAISE EXCEPTION 'tenant: this login may not set the alert webhook of tenant %', quote_literal(t)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE pgsched.tenant SET alert_webhook = url WHERE name = t RETURNING * INTO r;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant: no tenant %', quote_literal(t) USING ERRCODE = 'no_data_found';
    END IF;
    RETURN r;
END $$;
COMMENT ON FUNCTION pgsched_internal.tenant_alert_webhook_set_v1(text, text) IS
    'set (NULL: remove) where tenant t''s own alerts are POSTed: the installation, or the web '
    'acting for t (migration 0034)';

-- secure_v1 as 0033 made it, and the web's EXECUTE on the setter (the loop of 0029 makes
-- every pgsched_internal definer the installation's alone).
CREATE OR REPLACE FUNCTION pgsched_internal.secure_v1() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pgsched_internal.secure_0029_v1();
    REVOKE EXECUTE ON FUNCTION pgsched_internal.secure_v1(), pgsched_internal.secure_0029_v1()
        FROM PUBLIC, pgsched_engine, pgsched_web;
    -- 0033: answers only for the caller's own tenant, and only whether a worker serves
    GRANT EXECUTE ON FUNCTION pgsched_internal.queue_served_v1(text, text)
        TO pgsched_engine, pgsched_web;
    -- 0034: the web sets the webhook of the tenant it acts for
    GRANT EXECUTE ON FUNCTION pgsched_internal.tenant_alert_webhook_set_v1(text, text) TO pgsched_web;
END $$;

SELECT pgsched_internal.secure_v1();
