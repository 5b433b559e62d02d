-- Passkeys (WebAuthn) as second factors, and as a sign-in of their own.

-- +goose Up

-- A passkey is a second_factors row of kind 'webauthn', confirmed when it
-- is stored (the registration ceremony is its proof); its secret is the
-- credential's COSE public key. credential_id is unique across accounts:
-- a passwordless sign-in finds the account by it. sign_count is the
-- authenticator's counter as last seen: an assertion whose counter does
-- not move on (both zero excepted, as synced passkeys send) is refused,
-- by a conditional UPDATE, as a sign of a cloned authenticator.
ALTER TABLE second_factors
    ADD COLUMN credential_id    bytea,
    ADD COLUMN sign_count       bigint  NOT NULL DEFAULT 0,
    ADD COLUMN transports       text[]  NOT NULL DEFAULT '{}',
    ADD COLUMN aaguid           bytea,
    ADD COLUMN attestation_type text    NOT NULL DEFAULT '',
    ADD COLUMN user_verified    boolean NOT NULL DEFAULT false,
    ADD COLUMN backup_eligible  boolean NOT NULL DEFAULT false,
    ADD COLUMN backup_state     boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT second_factors_credential CHECK ((kind = 'webauthn') = (credential_id IS NOT NULL)),
    ADD CONSTRAINT second_factors_credential_id_length CHECK (octet_length(credential_id) BETWEEN 1 AND 1023);
CREATE UNIQUE INDEX second_factors_credential_id_idx ON second_factors (credential_id);

-- webauthn_handle is the account's WebAuthn user handle: 32 random bytes,
-- drawn at its first passkey, never its id or address, so that an
-- authenticator holds nothing that names the account.
ALTER TABLE users ADD COLUMN webauthn_handle bytea UNIQUE;

-- webauthn_ceremonies are the WebAuthn ceremonies under way, by the
-- SHA-256 of the cookie that binds each to the browser that began it:
-- the challenge and what the library keeps of it (session, JSON). One is
-- deleted, with DELETE ... RETURNING, by the response that finishes it,
-- so a challenge is answered once. purpose says which ceremony: a
-- passkey's registration (user_id the owner), a second step's assertion
-- (user_id and the step's token hash), or a passwordless sign-in (no
-- account yet).
CREATE TABLE webauthn_ceremonies (
    binding_hash  bytea       PRIMARY KEY,
    purpose       text        NOT NULL,
    user_id       bigint      REFERENCES users (id) ON DELETE CASCADE,
    mfa_token_hash bytea,
    session       jsonb       NOT NULL,
    expires_at    timestamptz NOT NULL,
    CONSTRAINT webauthn_ceremonies_purpose CHECK (purpose IN ('register', 'second_step', 'passkey')),
    CONSTRAINT webauthn_ceremonies_binding_hash_sha256 CHECK (octet_length(binding_hash) = 32)
);
CREATE INDEX webauthn_ceremonies_expires_at_idx ON webauthn_ceremonies (expires_at);

-- +goose Down
DROP TABLE webauthn_ceremonies;
ALTER TABLE users DROP COLUMN webauthn_handle;
DROP INDEX second_factors_credential_id_idx;
ALTER TABLE second_factors
    DROP CONSTRAINT second_factors_credential_id_length,
    DROP CONSTRAINT second_factors_credential,
    DROP COLUMN backup_state,
    DROP COLUMN backup_eligible,
    DROP COLUMN user_verified,
    DROP COLUMN attestation_type,
    DROP COLUMN aaguid,
    DROP COLUMN transports,
    DROP COLUMN sign_count,
    DROP COLUMN credential_id;
