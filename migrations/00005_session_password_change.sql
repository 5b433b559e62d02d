-- Sessions that can only change the password: a known device signed in
-- with a password found in a breach corpus.

-- +goose Up

-- must_change_password marks a session that may only show the
-- change-password page, change the password and sign out. Changing the
-- password lifts it, in the transaction that stores the new hash.
ALTER TABLE sessions ADD COLUMN must_change_password boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE sessions DROP COLUMN must_change_password;
