-- 0013: under the DAG failure policy 'continue', a failed upstream node counts as a success
-- for every trigger rule that waits for success, one_success included.
--
-- 0003's dag_decide_v1 applied that to all_success, none_failed and
-- none_failed_min_one_success only, so a one_success node whose upstream nodes all failed
-- ended upstream_failed under 'continue', though its own comment (and docs/dags.md) promised
-- that downstream of a failure runs. Checked against Airflow's TriggerRule for the rest:
-- all_failed and one_failed wait for failures and all_done for anything, so they keep their
-- meaning under every policy. The function keeps its name and signature: this is the rule
-- its documented contract already stated (the engine, dag_propagate_v1, is its caller), and
-- pgsched.dag.decide (SUCCESS_RULES) is changed the same way; a test compares the two on
-- every rule, policy and split of up to four upstream nodes. An unknown rule now gets the
-- error naming it (0003's CASE had no ELSE, so PostgreSQL's 'case not found' came first).
CREATE OR REPLACE FUNCTION pgsched.dag_decide_v1(rule text, policy text, total integer,
                                                 succeeded integer, failed integer,
                                                 skipped integer, upstream_failed integer)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    all_done boolean := succeeded + failed + skipped + upstream_failed = total;
    failures integer := failed + upstream_failed;
BEGIN
    IF total = 0 THEN RETURN 'run'; END IF;
    IF policy = 'continue'
       AND rule IN ('all_success', 'one_success', 'none_failed', 'none_failed_min_one_success') THEN
        -- downstream of a failure runs: a failure counts as a success for these rules
        succeeded := succeeded + failed + upstream_failed;
        failures := 0;
    END IF;
    CASE rule
    WHEN 'all_success' THEN
        IF failures > 0 THEN RETURN 'upstream_failed'; END IF;
        IF skipped > 0 THEN RETURN 'skipped'; END IF;
        RETURN CASE WHEN succeeded = total THEN 'run' ELSE 'wait' END;
    WHEN 'all_failed' THEN
        IF succeeded > 0 OR skipped > 0 THEN RETURN 'skipped'; END IF;
        RETURN CASE WHEN all_done THEN 'run' ELSE 'wait' END;
    WHEN 'all_done' THEN
        RETURN CASE WHEN all_done THEN 'run' ELSE 'wait' END;
    WHEN 'one_success' THEN
        IF succeeded > 0 THEN RETURN 'run'; END IF;
        IF NOT all_done THEN RETURN 'wait'; END IF;
        RETURN CASE WHEN failures > 0 THEN 'upstream_failed' ELSE 'skipped' END;
    WHEN 'one_failed' THEN
        IF failures > 0 THEN RETURN 'run'; END IF;
        RETURN CASE WHEN all_done THEN 'skipped' ELSE 'wait' END;
    WHEN 'none_failed' THEN
        IF failures > 0 THEN RETURN 'upstream_failed'; END IF;
        RETURN CASE WHEN all_done THEN 'run' ELSE 'wait' END;
    WHEN 'none_failed_min_one_success' THEN
        IF failures > 0 THEN RETURN 'upstream_failed'; END IF;
        IF NOT all_done THEN RETURN 'wait'; END IF;
        RETURN CASE WHEN succeeded > 0 THEN 'run' ELSE 'skipped' END;
    ELSE
        NULL;  -- 0003 had no ELSE: an unknown rule raised CASE_NOT_FOUND, not the error below
    END CASE;
    RAISE EXCEPTION 'trigger_rule: % is not a trigger rule', quote_literal(rule)
        USING ERRCODE = 'invalid_parameter_value';
END $$;
