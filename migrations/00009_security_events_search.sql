-- The administrators' event search: by account, by network and by kind,
-- newest first, paged by (at, id).

-- +goose Up

-- Each filter reads one index range already in the page's order, so a page
-- costs the same on a million events as on a hundred. The id column lets
-- the (at, id) cursor be an index condition. The account and kind indexes
-- replace those of 00001, which are their prefixes; rows without an
-- account or a network are never searched for, so they are left out.
CREATE INDEX security_events_account_key_at_id_idx ON security_events (account_key, at DESC, id DESC)
    WHERE account_key IS NOT NULL;
CREATE INDEX security_events_ip_at_id_idx ON security_events (ip, at DESC, id DESC)
    WHERE ip IS NOT NULL;
CREATE INDEX security_events_kind_at_id_idx ON security_events (kind, at DESC, id DESC);
CREATE INDEX security_events_at_id_idx ON security_events (at DESC, id DESC);
DROP INDEX security_events_account_key_at_idx;
DROP INDEX security_events_kind_at_idx;
DROP INDEX security_events_at_idx;

-- +goose Down
CREATE INDEX security_events_at_idx ON security_events (at DESC);
CREATE INDEX security_events_kind_at_idx ON security_events (kind, at DESC);
CREATE INDEX security_events_account_key_at_idx ON security_events (account_key, at DESC);
DROP INDEX security_events_at_id_idx;
DROP INDEX security_events_kind_at_id_idx;
DROP INDEX security_events_ip_at_id_idx;
DROP INDEX security_events_account_key_at_id_idx;
