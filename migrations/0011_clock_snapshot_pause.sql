-- 0011: what the faces tell about the processes, the database around them and paused
-- tasks (issue 14): each live process's clock offset from the database, the thresholds of
-- the warnings about clock offsets and old snapshots (docs/observability.md, "Health"), and
-- why and since when a task is paused.

------------------------------------------------------------------------------------------
-- Clock offsets: the host's wall clock minus the database's, as measured by the worker
-- heartbeat (and registration) and by the scheduler's scheduler_node_seen. Reported, never
-- corrected for: every decision uses the database's now(). The round trip of the statement
-- the offset was measured on bounds its error (about half of it).
------------------------------------------------------------------------------------------
ALTER TABLE pgsched.worker
    ADD COLUMN clock_offset_seconds     double precision,
    ADD COLUMN clock_round_trip_seconds double precision;
ALTER TABLE pgsched.scheduler_node
    ADD COLUMN clock_offset_seconds     double precision,
    ADD COLUMN clock_round_trip_seconds double precision;

INSERT INTO pgsched.setting (name, value) VALUES
    -- A live process whose clock is further than this (seconds, either way) from the
    -- database's is warned about by status, the dashboard and /metrics.
    ('clock_offset_warn_seconds', '1'),
    -- A snapshot (an open transaction, a prepared transaction) older than this (seconds)
    -- that holds back the cleanup of dead rows is warned about.
    ('snapshot_age_warn_seconds', '300')
ON CONFLICT (name) DO NOTHING;

------------------------------------------------------------------------------------------
-- Why a task is paused. paused_by: 'operator' (pause_v1, created paused, an UPDATE of
-- enabled) or 'scheduler' (it could not compute the task's schedule: pause_reason says
-- why); NULL for a task paused before this migration (who paused it is not known). A
-- task that is enabled has none of the three: a trigger clears them whenever a task is
-- resumed, and fills paused_at / paused_by whenever one is paused without saying so, so
-- every path that pauses or resumes (the SQL API, the CLI, a plain UPDATE) keeps them
-- true.
------------------------------------------------------------------------------------------
ALTER TABLE pgsched.task
    ADD COLUMN paused_at    timestamptz,
    ADD COLUMN paused_by    text CHECK (paused_by IN ('operator', 'scheduler')),
    ADD COLUMN pause_reason text,
    ADD CONSTRAINT task_pause_only_when_paused
        CHECK (NOT enabled OR (paused_at IS NULL AND paused_by IS NULL AND pause_reason IS NULL));

CREATE FUNCTION pgsched.task_pause_track_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.enabled THEN
        NEW.paused_at := NULL;
        NEW.paused_by := NULL;
        NEW.pause_reason := NULL;
    ELSIF NEW.deleted_at IS NULL THEN
        NEW.paused_at := coalesce(NEW.paused_at, now());
        NEW.paused_by := coalesce(NEW.paused_by, 'operator');
    END IF;
    RETURN NEW;
END $$;

-- Only rows whose enabled changes call it (UPDATE OF enabled and the WHEN): the
-- scheduler's fire statement, which updates every due task's next_fire_at, never does.
CREATE TRIGGER task_pause_track_update BEFORE UPDATE OF enabled ON pgsched.task
    FOR EACH ROW WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled)
    EXECUTE FUNCTION pgsched.task_pause_track_v1();
CREATE TRIGGER task_pause_track_insert BEFORE INSERT ON pgsched.task
    FOR EACH ROW WHEN (NOT NEW.enabled OR NEW.paused_at IS NOT NULL OR NEW.paused_by IS NOT NULL
                       OR NEW.pause_reason IS NOT NULL)
    EXECUTE FUNCTION pgsched.task_pause_track_v1();
