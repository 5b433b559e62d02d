-- Which reset links a password change leaves usable.

-- +goose Up

-- A password change spends the account's open reset links, but for those
-- mailed with a notice to the owner (a new device, a changed password, a
-- second factor): such a link is how the owner undoes what they did not
-- do, and whoever did it must not spend it by changing the password
-- again. A reset through any link still spends them all.
ALTER TABLE password_reset_tokens ADD COLUMN notice boolean NOT NULL DEFAULT false;

-- +goose Down

ALTER TABLE password_reset_tokens DROP COLUMN notice;
