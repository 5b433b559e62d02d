-- Session tokens carry a tag under a key derived from XCLOAK_SECRET, so
-- that a made-up cookie is refused before it costs a query. The sessions
-- whose tokens have none, made before this migration or by a replica of an
-- earlier version during a rolling upgrade, last their time: they are
-- marked legacy_token, and while any of them is live a token of their
-- shape is looked up. The index the replicas ask it through is built by
-- the next migration, outside a transaction.

-- +goose Up

-- True by default, so that every session stored now, and every one an
-- earlier version stores, is marked; this version stores false. The
-- default is the catalog's, so no row is rewritten and the table is held
-- only for a moment.
ALTER TABLE sessions ADD COLUMN legacy_token boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE sessions DROP COLUMN legacy_token;
