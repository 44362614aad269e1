-- 0036: reading sensitive values is a permission of its own, and secrets are set by who
-- runs the tenant (issue 19, items 3-4; docs/security.md, "Sensitive values and who sees
-- them" and "Secrets").
--
-- may_reveal on a web user or an API token: whether the web, acting for that principal, sets
-- pgsched.reveal to 'on' (0031's may_reveal_v1), so that it reads env values and sensitive
-- params. Apart from the role: an admin without it is shown the masks, a viewer with it the
-- values. Not granted unless asked for (pgsched user create --may-reveal, pgsched user update,
-- pgsched token create --may-reveal). The admins there are now keep what they had: before this
-- migration being an admin was what revealed (REVEALS = "admin" in the web), so every admin user
-- and every live admin token is given it here; principals made from now on are not.
--
-- Setting and deleting a secret (0029's secret_set_v1, secret_delete_v1) were callable by an
-- application's login (pgsched_app): secure_v1 grants every function of the pgsched schema to
-- it. An application enqueues and reads; choosing what a task's {{secret:NAME}} resolves to is
-- the tenant's operators' (the CLI with the installation's or the tenant's engine login, the
-- web admin's admins). The two functions now check their caller themselves, as secret_fetch_v1
-- does, so that a grant made again by a later secure_v1 changes nothing: an engine or web
-- login, or the installation. Listing (names and metadata, never a value) stays everyone's.

ALTER TABLE pgsched.web_user ADD COLUMN may_reveal boolean NOT NULL DEFAULT false;
ALTER TABLE pgsched.api_token ADD COLUMN may_reveal boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN pgsched.web_user.may_reveal IS
    'the web reads env values and sensitive params for this user (pgsched.reveal, 0031, 0036)';
COMMENT ON COLUMN pgsched.api_token.may_reveal IS
    'the web reads env values and sensitive params for this token (pgsched.reveal, 0031, 0036)';

UPDATE pgsched.web_user SET may_reveal = true WHERE role = 'admin';
UPDATE pgsched.api_token SET may_reveal = true WHERE role = 'admin' AND revoked_at IS NULL;

-- Whether this session may change a tenant's secrets: an engine login (a tenant's operators,
-- the CLI), the web (its admins; the web checks the role), or the installation. Caller's
-- rights, as may_reveal_v1: it asks about session_user.
CREATE FUNCTION pgsched_internal.secret_writer_check_v1() RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF NOT (pgsched_internal.is_instance_v1()
            OR pg_has_role(session_user, 'pgsched_engine', 'MEMBER')
            OR pg_has_role(session_user, 'pgsched_web', 'MEMBER')) THEN
        RAISE EXCEPTION 'secret: role % is an application''s; setting and deleting secrets is for the tenant''s engine login, the web admin or the installation',
            quote_ident(session_user) USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION pgsched.secret_set_v1(name text, ciphertext bytea, nonce bytea, key_id text,
                                                 tenant text DEFAULT NULL, by text DEFAULT NULL) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    who text;
    created boolean;
BEGIN
    secret_set_v1.tenant := pgsched_internal.caller_tenant_v1(secret_set_v1.tenant);
    PERFORM pgsched_internal.secret_writer_check_v1();
    PERFORM pgsched_internal.secret_check_v1(secret_set_v1.tenant, secret_set_v1.name);
    who := pgsched_internal.limits_by_v1(by);
    IF ciphertext IS NULL OR octet_length(ciphertext) NOT BETWEEN 16 AND 65552 THEN
        RAISE EXCEPTION 'ciphertext: % bytes; a sealed value has 16 to 65552 (a value of at most 64 KiB and its tag)',
            coalesce(octet_length(ciphertext)::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    ELSIF nonce IS NULL OR octet_length(nonce) <> 12 THEN
        RAISE EXCEPTION 'nonce: % bytes; AES-GCM''s nonce has 12', coalesce(octet_length(nonce)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF key_id IS NULL OR key_id !~ '^[0-9a-f]{16}$' THEN
        RAISE EXCEPTION 'key_id: % must be 16 hex digits (pgsched/secret_keys.py key_id)',
            coalesce(quote_literal(left(key_id, 40)), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgsched_internal.secret AS s (tenant, name, ciphertext, nonce, key_id, created_by, updated_by)
    VALUES (secret_set_v1.tenant, secret_set_v1.name, secret_set_v1.ciphertext, secret_set_v1.nonce,
            secret_set_v1.key_id, who, who)
    ON CONFLICT ON CONSTRAINT secret_pkey DO UPDATE
       SET ciphertext = excluded.ciphertext, nonce = excluded.nonce, key_id = excluded.key_id,
           updated_at = now(), updated_by = excluded.updated_by
    RETURNING (s.xmax = 0) INTO created;
    RETURN created;
END $$;

CREATE OR REPLACE FUNCTION pgsched.secret_delete_v1(name text, tenant text DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    secret_delete_v1.tenant := pgsched_internal.caller_tenant_v1(secret_delete_v1.tenant);
    PERFORM pgsched_internal.secret_writer_check_v1();
    PERFORM pgsched_internal.secret_check_v1(secret_delete_v1.tenant, secret_delete_v1.name);
    DELETE FROM pgsched_internal.secret s
     WHERE s.tenant = secret_delete_v1.tenant AND s.name = secret_delete_v1.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'secret: no secret % in tenant %', quote_literal(secret_delete_v1.name),
            quote_literal(secret_delete_v1.tenant) USING ERRCODE = 'no_data_found';
    END IF;
END $$;

SELECT pgsched_internal.secure_v1();
