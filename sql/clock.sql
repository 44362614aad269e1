-- The database's clock: the only clock that decides when anything fires, retries or
-- counts as late (DESIGN.md "Time"). Host clocks are never compared with stored times.

-- name: clock_now :one
-- PostgreSQL's now(): the start of the current transaction (of this statement alone on an
-- autocommit connection), as an aware UTC instant.
SELECT now() AS now
