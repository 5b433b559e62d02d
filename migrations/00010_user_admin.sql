-- Account administration: disabled accounts, and the administrators'
-- search of accounts by email.

-- +goose Up

-- disabled_at is when an administrator disabled the account; NULL while
-- it is enabled. A disabled account keeps its row, its password and its
-- history: it signs in nowhere (its sign-ins fail as a wrong password
-- does), gets no mail, and no session or link of it works.
ALTER TABLE users ADD COLUMN disabled_at timestamptz;

-- The administrators' list of accounts searches a prefix of the
-- normalised email and pages by email. Ordered byte by byte (COLLATE
-- "C"), one index range holds both the prefix (email >= prefix AND email
-- < the prefix's successor) and the page's order, whatever the
-- database's own collation, whose order a prefix need not be a range of.
-- Emails are stored lower-cased, so byte order is the order an
-- administrator expects.
CREATE INDEX users_email_c_idx ON users (email COLLATE "C");

-- +goose Down
DROP INDEX users_email_c_idx;
ALTER TABLE users DROP COLUMN disabled_at;
