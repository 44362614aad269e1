-- 0037: a params key a task marks sensitive stays marked for who is shown it masked (attack 20;
-- docs/security.md, "Sensitive values and who sees them").
--
-- 0031 masks a params value under a key the task marks (sensitive_params) for a session that
-- may not reveal; an operator of the web without the reveal permission (0036) may edit the
-- task, and an update that set sensitive_params to [] answered with the params unmasked: the
-- permission was a field the operator could clear. Now an update that drops a mark (compared
-- in any case, as the masking compares keys) is refused unless the session reveals
-- (may_reveal_v1: the engine's logins, the installation, the web for a principal granted it);
-- adding a mark, or keeping one, is anyone's who may edit the task.

CREATE FUNCTION pgsched_internal.task_marks_kept_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT pgsched_internal.may_reveal_v1()
       AND EXISTS (SELECT FROM unnest(OLD.sensitive_params) o(k)
                    WHERE lower(o.k) <> ALL (SELECT lower(n.k)
                                               FROM unnest(NEW.sensitive_params) n(k))) THEN
        RAISE EXCEPTION 'sensitive_params: % drops a mark of task %; only a session that reads sensitive values may unmark one (the reveal permission, pgsched user update --may-reveal)',
            to_jsonb(NEW.sensitive_params), quote_literal(OLD.name)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER task_marks_kept BEFORE UPDATE OF sensitive_params ON pgsched.task
    FOR EACH ROW WHEN (OLD.sensitive_params IS DISTINCT FROM NEW.sensitive_params)
    EXECUTE FUNCTION pgsched_internal.task_marks_kept_v1();

SELECT pgsched_internal.secure_v1();

-- A concurrency key is rendered from the execution's params (0021) and shown to whoever
-- reads the pending run's wait reason ("key K runs its limit ..."), the queues and the
-- windows: a template naming a param that is masked ('k:{api_token}') showed its value to
-- every viewer (attack 20). The key is now rendered from the params as a viewer is shown
-- them: a value under a key whose name says secret, at any depth, renders as the mask (so
-- every execution of such a template shares one key, which limits more, never less).
-- The task's own marks are not known here; a template naming a marked key, and a mark on
-- a key the template names, are refused on the task instead (below).
CREATE OR REPLACE FUNCTION pgsched_internal.concurrency_key_v1(template text, params jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    out text := '';
    rest text := template;
    open int;
    close int;
BEGIN
    IF template IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(params) = 'object' THEN
        params := pgsched_internal.params_masked_v1(params, '{}');
    END IF;
    LOOP
        open := strpos(rest, '{');
        EXIT WHEN open = 0;
        close := strpos(substr(rest, open + 1), '}');
        EXIT WHEN close = 0;
        out := out || substr(rest, 1, open - 1)
                   || left(coalesce(CASE WHEN jsonb_typeof(params) = 'object'
                                         THEN params ->> substr(rest, open + 1, close - 1) END, ''),
                           500);  -- a key is cut at 500: a 10 MB param costs no more
        EXIT WHEN length(out) >= 500;
        rest := substr(rest, open + close + 1);
    END LOOP;
    RETURN left(out || rest, 500);
END $$;

CREATE FUNCTION pgsched_internal.task_key_unmarked_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    place text;
BEGIN
    SELECT m[1] INTO place
      FROM regexp_matches(NEW.concurrency_key, '\{([^{}]*)\}', 'g') AS m
     WHERE lower(m[1]) IN (SELECT lower(k) FROM unnest(NEW.sensitive_params) AS k)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'concurrency_key: % names the param %, which task % marks sensitive (sensitive_params): its value would be the key every viewer reads; key on another param',
            quote_literal(NEW.concurrency_key), quote_literal(place), quote_literal(NEW.name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER task_key_unmarked BEFORE INSERT OR UPDATE OF concurrency_key, sensitive_params
    ON pgsched.task FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL)
    EXECUTE FUNCTION pgsched_internal.task_key_unmarked_v1();

SELECT pgsched_internal.secure_v1();
