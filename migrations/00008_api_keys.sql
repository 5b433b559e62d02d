-- The decision API: the keys applications call it with, and the devices
-- their users signed in from.

-- +goose Up

-- api_keys are the applications allowed to ask POST /api/v1/attempts. A key
-- is 256 random bits; a row holds only its SHA-256, so a copy of this table
-- calls nothing (a fast hash is right for a secret that cannot be guessed).
-- A revoked key stays listed, and its name may then be given to a new key:
-- the new key is the same application, whose accounts keep their limits,
-- lockouts and known devices (they are keyed by the name).
CREATE TABLE api_keys (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL,
    hash         bytea       NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    last_used_at timestamptz,
    CONSTRAINT api_keys_name_format CHECK (name ~ '^[A-Za-z0-9._-]{1,64}$'),
    CONSTRAINT api_keys_hash_sha256 CHECK (octet_length(hash) = 32)
);
CREATE UNIQUE INDEX api_keys_live_name_idx ON api_keys (name) WHERE revoked_at IS NULL;

-- app_devices are the devices an application's accounts signed in from,
-- as the application reported them (an opaque id, with a "success"
-- outcome). A row holds only an HMAC of the application, the account and
-- the device id under a key derived from the service secret, and
-- account_hash, an HMAC of the application and the account under a key of
-- its own, by which an account's devices are found (to forget them after a
-- reset, to keep only the most recently used), so a copy of this table
-- names neither accounts nor devices.
CREATE TABLE app_devices (
    hash          bytea       PRIMARY KEY,
    app           text        NOT NULL,
    account_hash  bytea       NOT NULL,
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    CONSTRAINT app_devices_hash_sha256 CHECK (octet_length(hash) = 32),
    CONSTRAINT app_devices_account_hash_sha256 CHECK (octet_length(account_hash) = 32)
);
CREATE INDEX app_devices_last_seen_idx ON app_devices (last_seen_at);
CREATE INDEX app_devices_account_idx ON app_devices (account_hash, last_seen_at);

-- +goose Down
DROP TABLE app_devices;
DROP TABLE api_keys;
