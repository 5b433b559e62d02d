-- The whole schema the service needs: accounts, their sessions and password
-- resets, account lockouts, and the security event log behind the dashboard.

-- +goose Up

-- users are the accounts that sign in through XCloak. Emails are stored
-- normalised (trimmed, lower-cased by auth.NormaliseEmail) so that uniqueness
-- ignores case; the database does not re-check the case folding because its
-- lower() follows the server's locale, not Go's Unicode tables. password_hash is
-- an argon2id hash in PHC string form ($argon2id$v=19$m=...,t=...,p=...$salt$hash).
CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text        NOT NULL UNIQUE,
    password_hash text        NOT NULL,
    is_admin      boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_email_length CHECK (length(email) BETWEEN 1 AND 254),
    CONSTRAINT users_password_hash_present CHECK (password_hash <> '')
);

-- sessions are keyed by the SHA-256 of the session token: the token lives only
-- in the browser's cookie, so a copy of this table opens no session.
CREATE TABLE sessions (
    id_hash      bytea       PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sessions_id_hash_sha256 CHECK (octet_length(id_hash) = 32)
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

-- password_reset_tokens are keyed by the SHA-256 of the emailed token, for the
-- same reason as sessions. used_at is set when the token is spent.
CREATE TABLE password_reset_tokens (
    token_hash bytea       PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    CONSTRAINT password_reset_tokens_token_hash_sha256 CHECK (octet_length(token_hash) = 32)
);
CREATE INDEX password_reset_tokens_user_id_idx ON password_reset_tokens (user_id);

-- lockouts record each time an account was locked after repeated failures.
-- account_key is the normalised identifier that was tried, whether or not an
-- account has it, so that lockouts look the same for unknown accounts. level
-- counts escalations (1 for the first lockout in a row). A lockout ends when
-- locked_until passes or when it is cleared (by a successful sign-in after it
-- expired, an admin, or a password reset); cleared_by says which:
-- 'success', 'admin:<email>' or 'reset'. An expired lockout is not cleared by
-- anyone, so several uncleared rows may exist per account; the newest counts.
CREATE TABLE lockouts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_key  text        NOT NULL,
    user_id      bigint      REFERENCES users (id) ON DELETE SET NULL,
    level        integer     NOT NULL,
    failures     integer     NOT NULL,
    locked_at    timestamptz NOT NULL,
    locked_until timestamptz NOT NULL,
    cleared_at   timestamptz,
    cleared_by   text,
    CONSTRAINT lockouts_account_key_locked_at_key UNIQUE (account_key, locked_at),
    CONSTRAINT lockouts_level_positive CHECK (level >= 1),
    CONSTRAINT lockouts_failures_not_negative CHECK (failures >= 0),
    CONSTRAINT lockouts_until_after_at CHECK (locked_until > locked_at),
    CONSTRAINT lockouts_cleared_with_reason CHECK ((cleared_at IS NULL) = (cleared_by IS NULL))
);
CREATE INDEX lockouts_uncleared_idx ON lockouts (account_key) WHERE cleared_at IS NULL;
CREATE INDEX lockouts_locked_until_idx ON lockouts (locked_until);

-- security_events is the append-only log the dashboard reads: sign-ins,
-- failures, rate-limit refusals, lockouts, resets. It has no foreign key to
-- users because events must outlive the accounts they mention.
CREATE TABLE security_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    kind        text        NOT NULL,
    account_key text,
    user_id     bigint,
    ip          text,
    detail      jsonb       NOT NULL DEFAULT '{}',
    CONSTRAINT security_events_kind_present CHECK (kind <> ''),
    CONSTRAINT security_events_detail_object CHECK (jsonb_typeof(detail) = 'object')
);
CREATE INDEX security_events_at_idx ON security_events (at DESC);
CREATE INDEX security_events_kind_at_idx ON security_events (kind, at DESC);
CREATE INDEX security_events_account_key_at_idx ON security_events (account_key, at DESC);

-- +goose Down
DROP TABLE security_events;
DROP TABLE lockouts;
DROP TABLE password_reset_tokens;
DROP TABLE sessions;
DROP TABLE users;
