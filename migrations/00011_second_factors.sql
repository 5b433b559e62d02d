-- Second factors: authenticator apps (TOTP) now, passkeys (WebAuthn) later,
-- recovery codes, and the second step of a sign-in.

-- +goose Up

-- second_factors are an account's factors, of a kind. A TOTP factor's
-- secret is its shared key, sealed with AES-256-GCM when XCLOAK_MFA_KEY is
-- set (a leading version byte says which); a passkey's will be its public
-- credential. A factor counts only once confirmed: a TOTP factor by a
-- first valid code, so that a QR code scanned wrong locks no one out.
-- last_step is the last TOTP time step a code was accepted for: a code of
-- that step or an earlier one is refused, by a conditional UPDATE, so a
-- code works once however many requests race with it.
CREATE TABLE second_factors (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind         text        NOT NULL,
    name         text        NOT NULL,
    secret       bytea       NOT NULL,
    created_at   timestamptz NOT NULL,
    confirmed_at timestamptz,
    last_used_at timestamptz,
    last_step    bigint,
    CONSTRAINT second_factors_kind CHECK (kind IN ('totp', 'webauthn')),
    CONSTRAINT second_factors_name_length CHECK (char_length(name) BETWEEN 1 AND 64)
);
CREATE INDEX second_factors_user_id_idx ON second_factors (user_id);

-- recovery_codes are an account's ten single-use codes, by their SHA-256:
-- 80 random bits each, so a fast hash is enough (no one can try 2^80
-- guesses against it). Using one sets used_at by a conditional UPDATE, so
-- a code works once however many requests race with it.
CREATE TABLE recovery_codes (
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    hash       bytea       NOT NULL,
    created_at timestamptz NOT NULL,
    used_at    timestamptz,
    PRIMARY KEY (user_id, hash),
    CONSTRAINT recovery_codes_hash_sha256 CHECK (octet_length(hash) = 32)
);

-- mfa_challenges are the second steps of sign-ins whose password was
-- right, by the SHA-256 of their token (mfa_token). Each belongs to the
-- browser that got it (binding_hash: the SHA-256 of a cookie set with the
-- answer) and to the password hash verified; it is deleted, with
-- DELETE ... RETURNING, by the code that finishes it, so it signs in once.
CREATE TABLE mfa_challenges (
    token_hash    bytea       PRIMARY KEY,
    user_id       bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    binding_hash  bytea       NOT NULL,
    password_hash text        NOT NULL,
    must_change   boolean     NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    CONSTRAINT mfa_challenges_token_hash_sha256 CHECK (octet_length(token_hash) = 32),
    CONSTRAINT mfa_challenges_binding_hash_sha256 CHECK (octet_length(binding_hash) = 32)
);
CREATE INDEX mfa_challenges_user_id_idx ON mfa_challenges (user_id);

-- A known device whose owner ticked "remember this browser" at the second
-- step skips it until then; the mark goes with the device's row.
ALTER TABLE devices ADD COLUMN mfa_remembered_until timestamptz;

-- +goose Down
ALTER TABLE devices DROP COLUMN mfa_remembered_until;
DROP TABLE mfa_challenges;
DROP TABLE recovery_codes;
DROP TABLE second_factors;
