-- How many times each account was signed out everywhere.

-- +goose Up

-- A sign-in reads sign_outs with the account and makes its session and
-- its device only while it is unchanged, as it does only while the
-- password hash is: "sign out everywhere" (an administrator's, or the
-- owner's "sign out other browsers") adds one, so that a sign-in that was
-- verifying the password at that moment leaves nothing behind it.
ALTER TABLE users ADD COLUMN sign_outs bigint NOT NULL DEFAULT 0;

-- +goose Down

ALTER TABLE users DROP COLUMN sign_outs;
