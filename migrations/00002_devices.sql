-- Known devices: the browsers each account signed in from.

-- +goose Up

-- devices are the browsers an account signed in from. A browser's device
-- cookie carries a random nonce and a MAC; a row holds only the nonce's
-- SHA-256, so a copy of this table makes no cookie. A cookie counts as a
-- known device only while its row exists: a password reset or change and
-- "sign out everywhere" delete the account's rows in the transaction that
-- changes the password or ends the sessions, and an account keeps a bounded
-- number of rows (the least recently used are deleted first).
CREATE TABLE devices (
    nonce_hash   bytea       PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    CONSTRAINT devices_nonce_hash_sha256 CHECK (octet_length(nonce_hash) = 32)
);
CREATE INDEX devices_user_id_last_seen_idx ON devices (user_id, last_seen_at DESC);

-- +goose Down
DROP TABLE devices;
