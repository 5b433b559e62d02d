-- +goose NO TRANSACTION

-- What the replicas ask, once a minute each: is any session of the older
-- token shape live (migration 00023)? Built concurrently, so that the
-- sessions stay readable and writable while it is: every page, every
-- forward-auth miss and every sign-in reads or writes them. A build that
-- failed leaves an invalid index, dropped before the next try.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS sessions_legacy_token_idx;
CREATE INDEX CONCURRENTLY sessions_legacy_token_idx ON sessions (expires_at) WHERE legacy_token;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS sessions_legacy_token_idx;
