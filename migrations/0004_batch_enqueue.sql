-- 0004: enqueue many runs of a task in one statement.

-- Enqueue one run of task_name per element of params (each a JSON object, merged over the
-- task's params), all at run_at (default now) with one priority, in one INSERT (one
-- NOTIFY). Returns the execution ids in the order of params. A task that derives
-- idempotency keys (idempotent) goes through enqueue_v1 run by run, so that keys already
-- taken are found as enqueue_v1 finds them.
CREATE FUNCTION pgsched.enqueue_many_v1(
    task_name   text,
    params      jsonb[],
    run_at      timestamptz DEFAULT NULL,
    priority    integer     DEFAULT NULL,
    tenant      text        DEFAULT 'default',
    trigger     text        DEFAULT 'api'
) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t pgsched.task;
    fire_at timestamptz := coalesce(enqueue_many_v1.run_at, clock_timestamp());
    bad integer;
BEGIN
    SELECT * INTO t FROM pgsched.task k
     WHERE k.tenant = enqueue_many_v1.tenant AND k.name = enqueue_many_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(enqueue_many_v1.task_name),
            quote_literal(enqueue_many_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
    IF t.handler_kind = 'dag' THEN
        RAISE EXCEPTION 'task: % is a DAG; start a run with pgsched dag trigger or pgsched.dag_trigger_v1()',
            quote_literal(enqueue_many_v1.task_name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_many_v1.priority IS NOT NULL AND enqueue_many_v1.priority NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'priority: % is out of range 1-10', enqueue_many_v1.priority USING ERRCODE = 'check_violation';
    END IF;
    IF NOT isfinite(fire_at) OR fire_at < '1970-01-01 00:00:00+00' OR fire_at >= '9000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at: % is outside 1970 to 9000', enqueue_many_v1.run_at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_many_v1.trigger IS NULL OR enqueue_many_v1.trigger NOT IN ('api', 'manual', 'insert') THEN
        RAISE EXCEPTION 'trigger: % must be api, manual or insert', quote_nullable(enqueue_many_v1.trigger)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT min(i) INTO bad FROM unnest(enqueue_many_v1.params) WITH ORDINALITY AS p(value, i)
     WHERE p.value IS NOT NULL AND jsonb_typeof(p.value) <> 'object';
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'params[%]: % is not a JSON object', bad - 1, enqueue_many_v1.params[bad]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF t.idempotent THEN
        RETURN QUERY SELECT pgsched.enqueue_v1(t.name, p.value, fire_at, enqueue_many_v1.priority, NULL, t.tenant,
                                               enqueue_many_v1.trigger)
                       FROM unnest(enqueue_many_v1.params) WITH ORDINALITY AS p(value, i) ORDER BY p.i;
        RETURN;
    END IF;
    RETURN QUERY
    WITH made AS (
        INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority, queue,
                                            params, max_attempts)
        SELECT t.tenant, t.id, fire_at, fire_at, enqueue_many_v1.trigger,
               coalesce(enqueue_many_v1.priority, t.priority), t.queue,
               t.params || coalesce(p.value, '{}'::jsonb), t.max_attempts
          FROM unnest(enqueue_many_v1.params) WITH ORDINALITY AS p(value, i)
         ORDER BY p.i
        RETURNING e.id
    )
    SELECT id FROM made ORDER BY id;  -- ids come from a sequence in insert order
END $$;
