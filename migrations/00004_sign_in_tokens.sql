-- New-device verification: the links that finish a held sign-in.

-- +goose Up

-- sign_in_tokens are keyed by the SHA-256 of the emailed token, as reset
-- and unlock tokens are. A token is bound to the password hash the held
-- sign-in verified: it signs in only while that is still the account's, so
-- a password changed since makes it useless. Spending one (used_at) signs
-- in the browser that confirmed it and makes it a known device.
CREATE TABLE sign_in_tokens (
    token_hash    bytea       PRIMARY KEY,
    user_id       bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz,
    CONSTRAINT sign_in_tokens_token_hash_sha256 CHECK (octet_length(token_hash) = 32)
);
CREATE INDEX sign_in_tokens_user_id_idx ON sign_in_tokens (user_id);

-- +goose Down
DROP TABLE sign_in_tokens;
