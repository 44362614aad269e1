-- 0019: sessions of the web admin stored in the database, tokens that expire, and an audit
-- log (issue 17, item 7; docs/web.md "Sessions, revocation and the audit log").

------------------------------------------------------------------------------------------
-- A signed-in browser. The cookie carries only a random id (32 bytes); the row is found by
-- its SHA-256, as a token is (a hash of a random value cannot be reversed, so a fast one is
-- enough). Every request looks its row up against now(): a session revoked (sign-out,
-- password change, "sign out everywhere"), expired, or whose token was revoked or expired
-- or whose user was deleted, signs nobody in at its next request.
--
-- A session is backed by exactly one token or one user; deleting either deletes its
-- sessions (a user deleted and made again under the same name inherits none).
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.web_session (
    id_sha256     bytea       PRIMARY KEY CHECK (length(id_sha256) = 32),
    tenant        text        NOT NULL,
    token_id      bigint      REFERENCES pgsched.api_token (id) ON DELETE CASCADE,
    username      text        REFERENCES pgsched.web_user (username) ON DELETE CASCADE,
    csrf          text        NOT NULL CHECK (length(csrf) >= 32),  -- the synchronizer token
    ip            text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    CHECK (num_nonnulls(token_id, username) = 1)
);
-- "every session of this token / user": sign out everywhere, revocation, the cap per backer
CREATE INDEX web_session_token_idx ON pgsched.web_session (token_id) WHERE token_id IS NOT NULL;
CREATE INDEX web_session_username_idx ON pgsched.web_session (username) WHERE username IS NOT NULL;
CREATE INDEX web_session_expires_idx ON pgsched.web_session (expires_at);

------------------------------------------------------------------------------------------
-- A token may expire (NULL: never); an expired token is refused like a revoked one.
------------------------------------------------------------------------------------------
ALTER TABLE pgsched.api_token ADD COLUMN expires_at timestamptz;

------------------------------------------------------------------------------------------
-- What was done to the web admin's access, by whom: sign-ins, failed sign-ins, sign-outs,
-- token and user changes, role refusals and instance actions (a forced failover).
-- tenant: the tenant the event belongs to; NULL when none is known (a failed sign-in as an
-- unknown user), which only an instance-wide reader sees.
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.audit_event (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    tenant      text,
    actor_kind  text        NOT NULL CHECK (actor_kind IN ('token', 'user', 'cli', 'anonymous')),
    actor       text        NOT NULL DEFAULT '' CHECK (length(actor) <= 200),
    action      text        NOT NULL CHECK (action ~ '^[a-z_]{1,40}$'),
    target      text        NOT NULL DEFAULT '' CHECK (length(target) <= 500),
    detail      jsonb       NOT NULL DEFAULT '{}',
    ip          text,
    -- the tenant as an indexable key ('' for none: no tenant is named '')
    tenant_key  text        GENERATED ALWAYS AS (coalesce(tenant, '')) STORED
);
CREATE INDEX audit_event_tenant_idx ON pgsched.audit_event (tenant, id);
CREATE INDEX audit_event_at_idx ON pgsched.audit_event (at);
-- the per-minute cap of the events anyone can cause (failed sign-ins, refusals)
CREATE INDEX audit_event_noisy_idx ON pgsched.audit_event (action, tenant_key, at)
    WHERE action IN ('sign_in_failed', 'forbidden');

INSERT INTO pgsched.setting (name, value) VALUES
    -- Audit events are kept this many days (the leader's audit prune).
    ('audit_retention_days', '90'),
    -- At most this many failed sign-ins, and as many role refusals, are recorded per
    -- minute per tenant (and as many for the unknown tenant): a flood is seen, not stored.
    ('audit_noisy_per_minute', '600')
ON CONFLICT (name) DO NOTHING;

------------------------------------------------------------------------------------------
-- Writing and pruning the audit log. audit_event has a tenant, so row-level security
-- (0018) shows a web login only the rows of the tenant its transaction acts for; but an
-- event is often written outside its tenant's transaction (a failed sign-in acts for no
-- tenant, and one as an unknown user belongs to none), and the per-minute cap must count
-- the rows of the event's own tenant. So events are written through this function, which
-- runs as the owner; its callers (engine and web logins) name the event, not the table.
------------------------------------------------------------------------------------------
CREATE FUNCTION pgsched_internal.audit_record_v1(
    tenant text, actor_kind text, actor text, action text, target text, detail jsonb, ip text
) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
DECLARE
    cap integer := coalesce((pgsched_internal.setting_v1('audit_noisy_per_minute'))::integer, 600);
    made bigint;
BEGIN
    -- failed sign-ins and refusals, which anyone can cause as often as they like: at most
    -- cap a minute per action and tenant (a flood shows as that many rows, and fills nothing)
    IF action IN ('sign_in_failed', 'forbidden') AND (
           SELECT count(*) FROM (
               SELECT 1 FROM pgsched.audit_event e
                WHERE e.action = audit_record_v1.action
                  AND e.tenant_key = coalesce(audit_record_v1.tenant, '')
                  AND e.at > now() - interval '1 minute'
                LIMIT cap) recent) >= cap THEN
        RETURN NULL;
    END IF;
    INSERT INTO pgsched.audit_event AS e (tenant, actor_kind, actor, action, target, detail, ip)
    VALUES (audit_record_v1.tenant, audit_record_v1.actor_kind, audit_record_v1.actor,
            audit_record_v1.action, audit_record_v1.target, audit_record_v1.detail,
            audit_record_v1.ip)
    RETURNING e.id INTO made;
    RETURN made;
END $$;
COMMENT ON FUNCTION pgsched_internal.audit_record_v1(text, text, text, text, text, jsonb, text) IS
    'records one audit event (capped per minute for failed sign-ins and refusals); its id, or '
    'NULL when the cap left it out (migration 0019)';

-- The leader's maintenance (pgsched.scheduler.access_prune): audit events past
-- audit_retention_days and sessions that ended over a day ago, of every tenant (the engine
-- login has no rights on the web's own tables, nor sees other tenants' rows).
CREATE FUNCTION pgsched_internal.access_prune_v1(OUT events bigint, OUT sessions bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pgsched, pg_temp
    AS $$
BEGIN
    DELETE FROM pgsched.audit_event
     WHERE at < now() - coalesce((pgsched_internal.setting_v1('audit_retention_days'))::float8, 90)
                        * interval '1 day';
    GET DIAGNOSTICS events = ROW_COUNT;
    DELETE FROM pgsched.web_session
     WHERE least(expires_at, coalesce(revoked_at, 'infinity')) < now() - interval '1 day';
    GET DIAGNOSTICS sessions = ROW_COUNT;
END $$;
COMMENT ON FUNCTION pgsched_internal.access_prune_v1() IS
    'removes audit events past retention and web sessions ended over a day ago (migration 0019)';

-- Owner, grants and row-level security of the new objects, by 0018's rules: web_session is
-- the web's own (looked up across tenants at each request, as web_user is); audit_event
-- gets the tenant policies.
SELECT pgsched_internal.secure_v1();
