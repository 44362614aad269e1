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
