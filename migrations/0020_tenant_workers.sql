-- 0020: workers bound to tenants, and an instance scope for web users and API tokens
-- (issue 17, items 4 and 6).
--
-- A worker served its queues for every tenant: a tenant that enqueued into a queue named
-- like another tenant's sent its work to that tenant's worker pool (and its code ran with
-- that pool's rights). A worker now serves the tenants it is told (`pgsched worker --tenant
-- A`, repeatable, or `--all-tenants`; by default its login's tenant, else the global
-- --tenant), and its claim reads only those tenants' fronts: a queue is named within a
-- tenant, so (A, q) and (B, q) are two queues. Row-level security (0018) is the second wall.
--
-- execution_ready_tenant_idx leads with the tenant, (tenant, queue, priority, run_at, id)
-- WHERE state = 'pending', so that a tenant-bound worker reads each (tenant, queue,
-- priority) front on its own, as 0014 made each (queue, priority) one: another tenant's
-- backlog in a queue of the same name costs its claim nothing (on execution_ready_queue_idx
-- it would walk and filter out every such row ahead of its own). A worker serving every
-- tenant keeps reading execution_ready_queue_idx, which the tenant-first index cannot
-- serve without a list of the tenants. Both are kept: the second costs every insert and
-- retry one more index entry (one INSERT of 20,000 executions: 145-173 ms with it, 126-140
-- ms without, best of 3 on a shared 2-core machine; a claim's move to running, within noise).
-- A claim of 10 of tenant a chose its rows touching 21 buffers, and 41 beside 100,000 ready
-- executions of tenant b on the same queue (tests/db/test_claim_tenants.py).
--
-- worker.tenants: the tenants a worker serves, NULL for every tenant (pgsched status and the
-- web's workers page show them). The column worker.tenant of 0001 is not used by anything.
--
-- The NOTIFY of an INSERT into execution carries the tenant (one per distinct tenant of the
-- statement, where it was one empty payload), so that a worker of A is not woken to claim
-- for nothing by B's enqueues. An empty payload (execution_wake: a retry, a hand-back, a
-- rescue) still wakes every worker.
--
-- web_user.instance and api_token.instance: an instance principal may see and act on what
-- spans tenants (the workers and schedulers with their hostnames, a forced failover, the
-- installation-wide metrics); a principal without it sees only its own tenant's rows, as
-- before, whatever its role.

CREATE INDEX execution_ready_tenant_idx ON pgsched.execution (tenant, queue, priority, run_at, id)
    WHERE state = 'pending';

ALTER TABLE pgsched.worker ADD COLUMN tenants text[];

ALTER TABLE pgsched.web_user ADD COLUMN instance boolean NOT NULL DEFAULT false;
ALTER TABLE pgsched.api_token ADD COLUMN instance boolean NOT NULL DEFAULT false;

-- 0018's body (an execution's tenant is its task's), with the wake-up naming the tenant.
CREATE OR REPLACE FUNCTION pgsched_internal.execution_inserted_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    bad record;
BEGIN
    WITH wanted AS (SELECT n.task_id, n.tenant, min(n.scheduled_at) FILTER (WHERE n.trigger = 'schedule') AS first_fire
                      FROM new_executions n GROUP BY n.task_id, n.tenant),
         locked AS (SELECT k.id, k.tenant, k.name, k.last_fire_at FROM pgsched.task k
                     WHERE k.id IN (SELECT w.task_id FROM wanted w)
                       FOR KEY SHARE OF k)
    SELECT w.task_id, w.tenant, w.first_fire, l.id IS NULL AS missing, l.tenant <> w.tenant AS foreign,
           l.tenant AS task_tenant, l.name, l.last_fire_at INTO bad
      FROM wanted w LEFT JOIN locked l ON l.id = w.task_id
     WHERE l.id IS NULL OR l.tenant <> w.tenant OR w.first_fire <= l.last_fire_at
     ORDER BY l.id IS NULL DESC, l.tenant <> w.tenant DESC
     LIMIT 1;
    IF FOUND AND bad.missing THEN
        RAISE EXCEPTION 'execution: task_id % is not a task', bad.task_id
            USING ERRCODE = 'foreign_key_violation', TABLE = 'execution', COLUMN = 'task_id';
    ELSIF FOUND AND bad.foreign THEN
        RAISE EXCEPTION 'execution: task % belongs to tenant %, not %', quote_literal(bad.name),
            quote_literal(bad.task_tenant), quote_literal(bad.tenant)
            USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'tenant';
    ELSIF FOUND THEN  -- rare: looked at row by row, only now
        SELECT k.name, k.last_fire_at, n.scheduled_at AS first_fire INTO bad
          FROM new_executions n JOIN pgsched.task k ON k.id = n.task_id
         WHERE n.trigger = 'schedule' AND n.scheduled_at <= k.last_fire_at
           AND NOT EXISTS (SELECT FROM pgsched.execution_history h
                            WHERE h.id = n.id AND h.task_id = n.task_id AND h.scheduled_at = n.scheduled_at
                              AND h.created_at = n.created_at AND h.state = 'dead')
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'execution: task % already fired through % (last_fire_at); a scheduled fire at % '
                            'would run an instant that was dealt with', quote_literal(bad.name), bad.last_fire_at,
                            bad.first_fire
                USING ERRCODE = 'check_violation', TABLE = 'execution', COLUMN = 'scheduled_at';
        END IF;
    END IF;
    -- one wake-up per tenant of the statement (nearly always one): workers of other tenants
    -- ignore it
    PERFORM pg_notify('pgsched_execution', t.tenant) FROM (SELECT DISTINCT n.tenant FROM new_executions n) t;
    RETURN NULL;
END $$;

-- The owner, grants and row-level security of what this migration added (0018).
SELECT pgsched_internal.secure_v1();
