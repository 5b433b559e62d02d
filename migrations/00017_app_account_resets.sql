-- When each application account was last reset.

-- +goose Up

-- A reset the application reports completed forgets the account's known
-- devices; a sign-in decided before it whose success is reported after
-- it must not make its device known again. account_hash is the HMAC
-- app_devices keys an account by, so this table too names no account.
-- A row matters only while an attempt decided before it may still be
-- reported (10 minutes); the janitor removes it after a day.
CREATE TABLE app_account_resets (
    account_hash bytea       PRIMARY KEY,
    reset_at     timestamptz NOT NULL,
    CONSTRAINT app_account_resets_account_hash_sha256 CHECK (octet_length(account_hash) = 32)
);
CREATE INDEX app_account_resets_reset_at_idx ON app_account_resets (reset_at);

-- +goose Down

DROP TABLE app_account_resets;
