-- Passkeys that sign in alone, and those a password reset stopped.

-- +goose Up

-- A passkey signs in alone (passwordless) while signs_in_alone is true:
-- from its registration until the account's password is replaced (a
-- reset, an operator's new password, a change by its owner), and again
-- once it has served as the second step after the new password. One
-- registered by whoever had the password would otherwise outlive the
-- reset that ended that person's sessions. Other factors need the
-- password first anyway.
ALTER TABLE second_factors ADD COLUMN signs_in_alone boolean NOT NULL DEFAULT true;

-- +goose Down

ALTER TABLE second_factors DROP COLUMN signs_in_alone;
