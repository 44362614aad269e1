-- 0001_initial: the spine of pgsched.
--
-- Hot path vs history (DESIGN "Keep the hot path small"):
--   pgsched.execution          live executions only (pending, running); small, vacuumed hard
--   pgsched.execution_history  finished executions, range-partitioned by finished_at
--   pgsched.execution_attempt  one row per attempt, range-partitioned by started_at
--   pgsched.execution_log      captured output, range-partitioned by logged_at
-- Partitions are daily (UTC); the scheduler leader creates them ahead of time with
-- pgsched.partition_ensure_v1() and drops expired ones with pgsched.partition_drop_expired_v1().
-- A DEFAULT partition catches strays (rows outside every daily range) and is reported when
-- not empty.

CREATE TABLE pgsched.task (
    id               bigserial PRIMARY KEY,
    tenant           text        NOT NULL DEFAULT 'default',
    name             text        NOT NULL,
    description      text,
    schedule_kind    text        NOT NULL DEFAULT 'none'
                     CHECK (schedule_kind IN ('cron', 'interval', 'once', 'none')),
    schedule_expr    text,
    timezone         text        NOT NULL DEFAULT 'UTC',
    schedule_anchor  timestamptz,
    handler_kind     text        NOT NULL CHECK (handler_kind IN ('shell', 'argv', 'python')),
    command          text,
    argv             text[],
    python_target    text,
    env              jsonb       NOT NULL DEFAULT '{}'::jsonb,
    stdin            text,
    run_as_user      text,
    params           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    timeout_seconds  double precision CHECK (timeout_seconds IS NULL OR timeout_seconds > 0),
    max_attempts     integer     NOT NULL DEFAULT 1 CHECK (max_attempts >= 1),
    retry_policy     text        NOT NULL DEFAULT 'exponential'
                     CHECK (retry_policy IN ('fixed', 'linear', 'exponential', 'exponential_jitter')),
    retry_base_seconds double precision NOT NULL DEFAULT 10 CHECK (retry_base_seconds >= 0),
    retry_max_seconds  double precision NOT NULL DEFAULT 3600 CHECK (retry_max_seconds >= 0),
    priority         smallint    NOT NULL DEFAULT 5 CHECK (priority BETWEEN 1 AND 10),
    queue            text        NOT NULL DEFAULT 'default',
    enabled          boolean     NOT NULL DEFAULT true,
    next_fire_at     timestamptz,
    last_fire_at     timestamptz,
    source           text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,
    CHECK ((handler_kind = 'shell'  AND command IS NOT NULL)
        OR (handler_kind = 'argv'   AND argv IS NOT NULL AND cardinality(argv) > 0)
        OR (handler_kind = 'python' AND python_target IS NOT NULL)),
    CHECK ((schedule_kind = 'none') = (schedule_expr IS NULL))
);

-- Live names are unique per tenant; a soft-deleted task frees its name.
CREATE UNIQUE INDEX task_tenant_name_key ON pgsched.task (tenant, name) WHERE deleted_at IS NULL;
-- The scheduler's priority queue: the front of this index is what is due.
CREATE INDEX task_next_fire_idx ON pgsched.task (next_fire_at)
    WHERE enabled AND deleted_at IS NULL AND next_fire_at IS NOT NULL;
-- Scheduled tasks whose next fire time is still to be computed (new, resumed).
CREATE INDEX task_unplanned_idx ON pgsched.task (id)
    WHERE enabled AND deleted_at IS NULL AND next_fire_at IS NULL AND schedule_kind <> 'none'
      AND (schedule_kind <> 'once' OR last_fire_at IS NULL);

CREATE SEQUENCE pgsched.execution_id_seq;

-- The hot queue: only pending and running executions live here.
CREATE TABLE pgsched.execution (
    id               bigint      PRIMARY KEY DEFAULT nextval('pgsched.execution_id_seq'),
    tenant           text        NOT NULL DEFAULT 'default',
    task_id          bigint      NOT NULL REFERENCES pgsched.task (id),
    scheduled_at     timestamptz NOT NULL,
    run_at           timestamptz NOT NULL,
    state            text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running')),
    trigger          text        NOT NULL DEFAULT 'api'
                     CHECK (trigger IN ('schedule', 'manual', 'api', 'insert')),
    priority         smallint    NOT NULL DEFAULT 5 CHECK (priority BETWEEN 1 AND 10),
    queue            text        NOT NULL DEFAULT 'default',
    params           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    idempotency_key  text,
    attempt          integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL DEFAULT 1,
    worker_id        bigint,
    leader_epoch     bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02);

CREATE INDEX execution_ready_idx ON pgsched.execution (priority, run_at, id) WHERE state = 'pending';
-- One execution per scheduled fire: a second insert of the same fire (a second leader, a
-- retried tick) is a no-op. Only schedule fires: runs enqueued through the API may share an
-- instant with each other and with a fire.
CREATE UNIQUE INDEX execution_fire_key ON pgsched.execution (task_id, scheduled_at)
    WHERE trigger = 'schedule';
CREATE INDEX execution_worker_idx ON pgsched.execution (worker_id) WHERE state = 'running';
CREATE UNIQUE INDEX execution_idempotency_key ON pgsched.execution (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE pgsched.execution_history (
    id               bigint      NOT NULL,
    tenant           text        NOT NULL DEFAULT 'default',
    task_id          bigint      NOT NULL,
    scheduled_at     timestamptz NOT NULL,
    run_at           timestamptz NOT NULL,
    state            text        NOT NULL
                     CHECK (state IN ('succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'dead')),
    trigger          text        NOT NULL,
    priority         smallint    NOT NULL,
    queue            text        NOT NULL,
    params           jsonb       NOT NULL,
    idempotency_key  text,
    attempt          integer     NOT NULL,
    max_attempts     integer     NOT NULL,
    worker_id        bigint,
    leader_epoch     bigint,
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    finished_at      timestamptz NOT NULL,
    exit_code        integer,
    error            text,
    result           jsonb,
    PRIMARY KEY (id, finished_at)
) PARTITION BY RANGE (finished_at);

CREATE INDEX execution_history_task_idx ON pgsched.execution_history (task_id, scheduled_at DESC);
CREATE INDEX execution_history_finished_idx ON pgsched.execution_history (finished_at DESC);
CREATE INDEX execution_history_key_idx ON pgsched.execution_history (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE pgsched.execution_history_default PARTITION OF pgsched.execution_history DEFAULT;

CREATE TABLE pgsched.execution_attempt (
    execution_id     bigint      NOT NULL,
    attempt          integer     NOT NULL,
    tenant           text        NOT NULL DEFAULT 'default',
    worker_id        bigint,
    state            text        NOT NULL
                     CHECK (state IN ('succeeded', 'failed', 'timed_out', 'cancelled', 'lost')),
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    exit_code        integer,
    error            text,
    PRIMARY KEY (execution_id, attempt, started_at)
) PARTITION BY RANGE (started_at);
CREATE TABLE pgsched.execution_attempt_default PARTITION OF pgsched.execution_attempt DEFAULT;

CREATE TABLE pgsched.execution_log (
    execution_id     bigint      NOT NULL,
    attempt          integer     NOT NULL,
    tenant           text        NOT NULL DEFAULT 'default',
    seq              integer     NOT NULL,
    stream           text        NOT NULL CHECK (stream IN ('stdout', 'stderr', 'system')),
    logged_at        timestamptz NOT NULL,
    line             text        NOT NULL
) PARTITION BY RANGE (logged_at);
CREATE INDEX execution_log_execution_idx ON pgsched.execution_log (execution_id, attempt, seq);
CREATE TABLE pgsched.execution_log_default PARTITION OF pgsched.execution_log DEFAULT;

-- Every execution, live or finished, for reads (CLI, API). Not for the hot path.
CREATE VIEW pgsched.execution_all AS
    SELECT id, tenant, task_id, scheduled_at, run_at, state, trigger, priority, queue, params,
           idempotency_key, attempt, max_attempts, worker_id, leader_epoch, created_at,
           started_at, NULL::timestamptz AS finished_at, NULL::integer AS exit_code,
           NULL::text AS error, NULL::jsonb AS result
      FROM pgsched.execution
    UNION ALL
    SELECT id, tenant, task_id, scheduled_at, run_at, state, trigger, priority, queue, params,
           idempotency_key, attempt, max_attempts, worker_id, leader_epoch, created_at,
           started_at, finished_at, exit_code, error, result
      FROM pgsched.execution_history;

CREATE TABLE pgsched.worker (
    id                bigserial   PRIMARY KEY,
    tenant            text        NOT NULL DEFAULT 'default',
    name              text        NOT NULL,
    hostname          text        NOT NULL,
    pid               integer     NOT NULL,
    queues            text[]      NOT NULL,
    concurrency       integer     NOT NULL,
    heartbeat_interval double precision NOT NULL DEFAULT 5,
    state             text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'stopped', 'dead')),
    running           integer     NOT NULL DEFAULT 0,
    started_at        timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
    stopped_at        timestamptz
);

-- One row: who leads, since when, and the term (epoch) it leads in.
CREATE TABLE pgsched.leader (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    tenant           text        NOT NULL DEFAULT 'default',
    epoch            bigint      NOT NULL,
    holder           text        NOT NULL,
    elected_at       timestamptz NOT NULL,
    last_tick_at     timestamptz
);

-- Wake workers once per statement, not once per row (DESIGN "NOTIFY"): a NOTIFY takes a
-- global lock at commit, and Postgres folds identical notifications in one transaction.
CREATE FUNCTION pgsched.execution_notify_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgsched_execution', '');
    RETURN NULL;
END $$;

CREATE TRIGGER execution_notify AFTER INSERT ON pgsched.execution
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched.execution_notify_v1();

-- Wake the scheduler when definitions change outside its own ticks.
CREATE FUNCTION pgsched.task_notify_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgsched_task', '');
    RETURN NULL;
END $$;

CREATE TRIGGER task_notify_insert AFTER INSERT OR DELETE ON pgsched.task
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched.task_notify_v1();
CREATE TRIGGER task_notify_update AFTER UPDATE ON pgsched.task
    FOR EACH ROW
    WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled
          OR (NEW.next_fire_at IS NULL AND NEW.enabled)
          OR OLD.schedule_expr IS DISTINCT FROM NEW.schedule_expr
          OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at)
    EXECUTE FUNCTION pgsched.task_notify_v1();

------------------------------------------------------------------------------------------
-- Public SQL API (stable, versioned names; other applications call these).
------------------------------------------------------------------------------------------

-- Enqueue one run of a task. Returns the execution id. With an idempotency key that is
-- already live or already succeeded, nothing new is created and that execution's id is
-- returned.
CREATE FUNCTION pgsched.enqueue_v1(
    task_name       text,
    params          jsonb       DEFAULT NULL,
    run_at          timestamptz DEFAULT NULL,
    priority        integer     DEFAULT NULL,
    idempotency_key text        DEFAULT NULL,
    tenant          text        DEFAULT 'default',
    trigger         text        DEFAULT 'api'
) RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t pgsched.task;
    new_id bigint;
    fire_at timestamptz := coalesce(enqueue_v1.run_at, clock_timestamp());
BEGIN
    SELECT * INTO t FROM pgsched.task k
     WHERE k.tenant = enqueue_v1.tenant AND k.name = enqueue_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(enqueue_v1.task_name), quote_literal(enqueue_v1.tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    IF enqueue_v1.priority IS NOT NULL AND enqueue_v1.priority NOT BETWEEN 1 AND 10 THEN
        RAISE EXCEPTION 'priority: % is out of range 1-10', enqueue_v1.priority USING ERRCODE = 'check_violation';
    END IF;
    IF NOT isfinite(fire_at) OR fire_at < '1970-01-01 00:00:00+00' OR fire_at >= '9000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at: % is outside 1970 to 9000', enqueue_v1.run_at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v1.trigger IS NULL OR enqueue_v1.trigger NOT IN ('api', 'manual', 'insert') THEN
        -- 'schedule' is the scheduler's alone: it is what makes a scheduled fire unique.
        RAISE EXCEPTION 'trigger: % must be api, manual or insert', quote_nullable(enqueue_v1.trigger)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v1.params IS NOT NULL AND jsonb_typeof(enqueue_v1.params) <> 'object' THEN
        RAISE EXCEPTION 'params: % is not a JSON object', enqueue_v1.params USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_v1.idempotency_key IS NOT NULL THEN
        SELECT e.id INTO new_id FROM pgsched.execution e
         WHERE e.tenant = enqueue_v1.tenant AND e.idempotency_key = enqueue_v1.idempotency_key;
        IF FOUND THEN RETURN new_id; END IF;
        SELECT h.id INTO new_id FROM pgsched.execution_history h
         WHERE h.tenant = enqueue_v1.tenant AND h.idempotency_key = enqueue_v1.idempotency_key
           AND h.state = 'succeeded'
         LIMIT 1;
        IF FOUND THEN RETURN new_id; END IF;
    END IF;
    -- scheduled_at is the instant asked for (clock_timestamp(), not the transaction's now(),
    -- when none is); only schedule fires are unique on (task_id, scheduled_at).
    INSERT INTO pgsched.execution AS e (tenant, task_id, scheduled_at, run_at, trigger, priority,
                                        queue, params, idempotency_key, max_attempts)
    VALUES (t.tenant, t.id, fire_at, fire_at, enqueue_v1.trigger, coalesce(enqueue_v1.priority, t.priority),
            t.queue, t.params || coalesce(enqueue_v1.params, '{}'::jsonb),
            enqueue_v1.idempotency_key, t.max_attempts)
    ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING e.id INTO new_id;
    IF new_id IS NULL THEN  -- lost a race on the idempotency key to a concurrent enqueue
        SELECT e.id INTO new_id FROM pgsched.execution e
         WHERE e.tenant = enqueue_v1.tenant AND e.idempotency_key = enqueue_v1.idempotency_key;
    END IF;
    RETURN new_id;
END $$;

-- Run a task now, whatever its schedule (also when paused). Returns the execution id.
CREATE FUNCTION pgsched.trigger_v1(task_name text, params jsonb DEFAULT NULL,
                                   tenant text DEFAULT 'default')
RETURNS bigint LANGUAGE sql AS $$
    SELECT pgsched.enqueue_v1(task_name, params, NULL, NULL, NULL, tenant, 'manual');
$$;

-- Pause a task: its schedule stops firing; executions already queued still run.
CREATE FUNCTION pgsched.pause_v1(task_name text, tenant text DEFAULT 'default')
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgsched.task k SET enabled = false, updated_at = now()
     WHERE k.tenant = pause_v1.tenant AND k.name = pause_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(task_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN true;
END $$;

-- Resume a task: fires missed while paused are skipped; the scheduler plans the next
-- fire after now (next_fire_at NULL marks it for planning).
CREATE FUNCTION pgsched.resume_v1(task_name text, tenant text DEFAULT 'default')
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgsched.task k
       SET enabled = true, next_fire_at = CASE WHEN k.enabled THEN k.next_fire_at END,
           updated_at = now()
     WHERE k.tenant = resume_v1.tenant AND k.name = resume_v1.task_name AND k.deleted_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task: no task named % in tenant %', quote_literal(task_name), quote_literal(tenant)
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN true;
END $$;

-- The documented table for a plain INSERT of a one-shot run:
--   INSERT INTO pgsched.run_request (task) VALUES ('nightly-report');
--   INSERT INTO pgsched.run_request (task, params, run_at) VALUES ('x', '{"n": 1}', now() + interval '1 hour');
-- Everything else comes from the task. Workers wake through execution_notify (one NOTIFY
-- per statement). The created execution's id is returned with RETURNING execution_id.
CREATE VIEW pgsched.run_request AS
    SELECT NULL::text AS task, NULL::jsonb AS params, NULL::timestamptz AS run_at,
           NULL::integer AS priority, NULL::text AS idempotency_key,
           'default'::text AS tenant, NULL::bigint AS execution_id
     WHERE false;

CREATE FUNCTION pgsched.run_request_insert_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.task IS NULL THEN
        RAISE EXCEPTION 'task: a run request needs a task name' USING ERRCODE = 'not_null_violation';
    END IF;
    NEW.execution_id := pgsched.enqueue_v1(NEW.task, NEW.params, NEW.run_at, NEW.priority,
                                           NEW.idempotency_key, coalesce(NEW.tenant, 'default'),
                                           'insert');
    RETURN NEW;
END $$;

CREATE TRIGGER run_request_insert INSTEAD OF INSERT ON pgsched.run_request
    FOR EACH ROW EXECUTE FUNCTION pgsched.run_request_insert_v1();

------------------------------------------------------------------------------------------
-- Partition maintenance (called by the scheduler leader).
------------------------------------------------------------------------------------------

-- Create the daily (UTC) partitions of every partitioned history table covering
-- [from_day, from_day + days). Idempotent. Returns the names created. Rows that strayed into
-- the DEFAULT partition within a new partition's range are moved into it (a plain CREATE
-- ... PARTITION OF would fail on them): the partition is built standalone, filled, then
-- attached.
CREATE FUNCTION pgsched.partition_ensure_v1(from_day date, days integer)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    parent text;
    key text;
    d date;
    part text;
    lo timestamptz;
    hi timestamptz;
BEGIN
    FOR parent, key IN VALUES ('execution_history', 'finished_at'),
                              ('execution_attempt', 'started_at'),
                              ('execution_log', 'logged_at') LOOP
        FOR i IN 0 .. days - 1 LOOP
            d := from_day + i;
            part := parent || '_p' || to_char(d, 'YYYYMMDD');
            CONTINUE WHEN to_regclass(format('pgsched.%I', part)) IS NOT NULL;
            lo := d::timestamp AT TIME ZONE 'UTC';
            hi := (d + 1)::timestamp AT TIME ZONE 'UTC';
            EXECUTE format('CREATE TABLE pgsched.%I (LIKE pgsched.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                           part, parent);
            EXECUTE format('WITH moved AS (DELETE FROM pgsched.%I WHERE %I >= %L AND %I < %L RETURNING *) '
                           'INSERT INTO pgsched.%I SELECT * FROM moved',
                           parent || '_default', key, lo, key, hi, part);
            EXECUTE format('ALTER TABLE pgsched.%I ATTACH PARTITION pgsched.%I FOR VALUES FROM (%L) TO (%L)',
                           parent, part, lo, hi);
            RETURN NEXT part;
        END LOOP;
    END LOOP;
END $$;

-- Daily partitions whose whole range ended before cutoff, and whether each still holds a
-- row of a live (pending or running) execution. Dropping is pgsched.partition_drop_v1's
-- job, one partition per transaction.
CREATE FUNCTION pgsched.partition_expired_v1(cutoff timestamptz)
RETURNS TABLE (partition_name text, parent text, live boolean) LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.relname::text AS name, p.relname::text AS parent_name
          FROM pg_inherits i
          JOIN pg_class c ON c.oid = i.inhrelid
          JOIN pg_class p ON p.oid = i.inhparent
          JOIN pg_namespace n ON n.oid = p.relnamespace
         WHERE n.nspname = 'pgsched'
           AND p.relname IN ('execution_history', 'execution_attempt', 'execution_log')
           AND c.relname ~ '_p[0-9]{8}$'
         ORDER BY c.relname
    LOOP
        CONTINUE WHEN (to_date(right(r.name, 8), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' > cutoff;
        partition_name := r.name;
        parent := r.parent_name;
        live := pgsched.partition_is_live_v1(r.name, r.parent_name);
        RETURN NEXT;
    END LOOP;
END $$;

-- Whether a partition holds any row of a live (pending or running) execution.
CREATE FUNCTION pgsched.partition_is_live_v1(partition_name text, parent text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    live boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgsched.%I x JOIN pgsched.execution e ON e.id = x.%I)',
                   partition_name, CASE WHEN parent = 'execution_history' THEN 'id' ELSE 'execution_id' END)
       INTO live;
    RETURN live;
END $$;

-- Detach and drop one expired partition, unless it holds a row of a live execution (then
-- returns false and changes nothing). The partition is locked first, so no row can arrive
-- between the check and the drop. Run it with a lock_timeout: DETACH needs an exclusive
-- lock on the parent, and waiting for one would stall every insert queued behind it.
CREATE FUNCTION pgsched.partition_drop_v1(partition_name text, parent text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF parent NOT IN ('execution_history', 'execution_attempt', 'execution_log')
       OR partition_name !~ '_p[0-9]{8}$' THEN
        RAISE EXCEPTION 'partition: % is not a daily partition of pgsched history', partition_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('LOCK TABLE pgsched.%I IN ACCESS EXCLUSIVE MODE', partition_name);
    IF pgsched.partition_is_live_v1(partition_name, parent) THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE pgsched.%I DETACH PARTITION pgsched.%I', parent, partition_name);
    EXECUTE format('DROP TABLE pgsched.%I', partition_name);
    RETURN true;
END $$;
