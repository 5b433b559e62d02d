-- Which reset links a password change leaves usable.

-- +goose Up

-- A password change spends the account's open reset links, but for the
-- one mailed with the notice that the password was changed: that link is
-- how the owner undoes a change they did not make, and whoever made it
-- must not spend it by changing the password again. (The links of the
-- other notices, of a new device or a factor, are spent: an owner who
-- changes the password evicts whoever signed in and read them.) A reset
-- through any link still spends them all.
ALTER TABLE password_reset_tokens ADD COLUMN change_notice boolean NOT NULL DEFAULT false;

-- +goose Down

ALTER TABLE password_reset_tokens DROP COLUMN change_notice;
