-- Batched reference in one transaction: claim up to 100 queued jobs with SKIP LOCKED and
-- complete them before the commit (one commit per 100 jobs: the cheapest shape).
BEGIN;
WITH c AS (SELECT id FROM pgb_jobs WHERE status = 0 ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED),
     u AS (UPDATE pgb_jobs j SET status = 1, updated_at = now() FROM c WHERE j.id = c.id RETURNING j.id)
SELECT coalesce(array_agg(id), '{}') AS ids FROM u \gset
UPDATE pgb_jobs SET status = 2, updated_at = now() WHERE id = ANY (:ids::bigint[]);
END;
