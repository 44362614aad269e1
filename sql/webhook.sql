-- The webhook outbox (pgsched.webhooks; table webhook_delivery, 0006_observability.sql).

-- name: webhook_claim :many
-- Up to %(limit)s deliveries due at %(now)s, leased for %(lease)s seconds (a sender that
-- dies mid-POST leaves them to be tried again after the lease); attempts counts this one.
WITH due AS MATERIALIZED (
    SELECT id FROM pgsched.webhook_delivery
     WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= %(now)s
     ORDER BY next_attempt_at, id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE pgsched.webhook_delivery w
   SET attempts = w.attempts + 1, next_attempt_at = %(now)s + make_interval(secs => %(lease)s)
  FROM due
 WHERE w.id = due.id
RETURNING w.id, w.tenant, w.task_id, w.event, w.url, w.payload, w.attempts

-- name: webhook_delivered :exec
UPDATE pgsched.webhook_delivery SET delivered_at = %(now)s, last_error = NULL
 WHERE id = %(id)s AND attempts = %(attempts)s

-- name: webhook_failed :exec
-- A failed POST: tried again at %(retry_at)s, or given up when that is NULL.
UPDATE pgsched.webhook_delivery
   SET last_error = %(error)s, next_attempt_at = coalesce(%(retry_at)s, next_attempt_at),
       gave_up_at = CASE WHEN %(retry_at)s::timestamptz IS NULL THEN %(now)s END
 WHERE id = %(id)s AND attempts = %(attempts)s
