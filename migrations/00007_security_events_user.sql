-- An account's own security events, for its owner's activity list.

-- +goose Up

-- The activity list reads one account's events by user_id, newest first;
-- without this index it would scan the whole log. Rows without an account
-- are never listed, so they are left out of it.
CREATE INDEX security_events_user_id_at_idx ON security_events (user_id, at DESC, id DESC)
    WHERE user_id IS NOT NULL;

-- +goose Down
DROP INDEX security_events_user_id_at_idx;
