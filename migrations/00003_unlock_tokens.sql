-- Unlock links: the owner of a locked account asks for one by mail.

-- +goose Up

-- unlock_tokens are keyed by the SHA-256 of the emailed token, as reset
-- tokens are. Spending one (used_at) makes the browser that confirmed it a
-- known device of the account; it clears no lockout.
CREATE TABLE unlock_tokens (
    token_hash bytea       PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    CONSTRAINT unlock_tokens_token_hash_sha256 CHECK (octet_length(token_hash) = 32)
);
CREATE INDEX unlock_tokens_user_id_idx ON unlock_tokens (user_id);

-- +goose Down
DROP TABLE unlock_tokens;
