-- The pgbench reference's job table: the minimum a queue needs (cf. the research's
-- peer-bench/pgbench/schema.sql). Jobs are bulk-inserted before each run.
DROP TABLE IF EXISTS pgb_jobs;
CREATE TABLE pgb_jobs (
    id          bigserial   PRIMARY KEY,
    status      smallint    NOT NULL DEFAULT 0,   -- 0 queued, 1 running, 2 done
    payload     jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz
);
CREATE INDEX pgb_jobs_queued ON pgb_jobs (id) WHERE status = 0;
