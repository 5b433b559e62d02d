-- The folded account of each application device.

-- +goose Up

-- A known device is the device of the account as the application sent it
-- (account_hash): spellings that fold alike (another case, a zero-width
-- space) may be accounts of their own, and one's device must not relax
-- another's limits. Forgetting relaxes nothing, so a completed reset
-- forgets the devices of every spelling that folds alike: folded_hash is
-- the HMAC of the application and the folded account, under account_hash's
-- key, by which they are found (its index: migration 00026). Rows written
-- before it keyed account_hash by the folded account already: NULL here.
ALTER TABLE app_devices ADD COLUMN folded_hash bytea
    CONSTRAINT app_devices_folded_hash_sha256 CHECK (octet_length(folded_hash) = 32);

-- +goose Down

ALTER TABLE app_devices DROP COLUMN folded_hash;
