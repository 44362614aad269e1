-- 0005: the web admin and REST API. API tokens, web users, and the key that signs
-- session cookies (docs/web.md).

------------------------------------------------------------------------------------------
-- API tokens: shown once when created, stored as their SHA-256 only.
------------------------------------------------------------------------------------------
-- A token is 32 random bytes (secrets.token_urlsafe): a hash of it cannot be reversed or
-- guessed, so a fast unsalted hash is enough, and it lets a request find its token by an
-- indexed equality. (Passwords, chosen by people, get a slow salted hash: argon2.)
CREATE TABLE pgsched.api_token (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant        text        NOT NULL DEFAULT 'default',
    role          text        NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    name          text        NOT NULL DEFAULT '',
    token_sha256  bytea       NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX api_token_tenant_idx ON pgsched.api_token (tenant, id);

------------------------------------------------------------------------------------------
-- People who sign in to the web admin with a password. A username is unique across
-- tenants, so the sign-in form needs no tenant.
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.web_user (
    username       text        PRIMARY KEY CHECK (length(username) BETWEEN 1 AND 200),
    tenant         text        NOT NULL DEFAULT 'default',
    role           text        NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash  text        NOT NULL,   -- argon2id, in its PHC string format
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

------------------------------------------------------------------------------------------
-- Keys of the web admin (the session-signing key), generated once by the first web
-- process. A table of their own, not pgsched.setting, which is read and shown in full.
------------------------------------------------------------------------------------------
CREATE TABLE pgsched.web_key (
    name        text        PRIMARY KEY,
    value       text        NOT NULL CHECK (length(value) >= 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);

------------------------------------------------------------------------------------------
-- Tags on tasks, for finding them (the task list's filter, GET /api/v1/tasks?tag=).
------------------------------------------------------------------------------------------
ALTER TABLE pgsched.task ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
CREATE INDEX task_tags_idx ON pgsched.task USING gin (tags) WHERE deleted_at IS NULL;
