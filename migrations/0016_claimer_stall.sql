-- 0016: a worker whose claimer is stuck says so (issue 15, item 6).
--
-- A claimer blocked on a connection that went silent (a half-open socket, a proxy that
-- stopped forwarding) starved the worker's queues while its heartbeat went on: the worker
-- looked alive and well. Its heartbeat now watches the claimer; when the claimer has not
-- gone round its loop for longer than its limit (3 poll intervals plus the statement
-- deadline or the connect timeout, whichever is longer), the worker logs it, cuts the
-- claimer's connection so that it opens another, and records since when the claimer is
-- stalled here (NULL again once it goes round; `pgsched status` shows it). A claimer still
-- stalled one more limit later makes the worker exit non-zero, so that its supervisor
-- starts it again and the leader's rescue takes its executions back.

ALTER TABLE pgsched.worker ADD COLUMN claimer_stalled_since timestamptz;
