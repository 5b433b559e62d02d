-- Known devices that proved more than the password.

-- +goose Up

-- A device added by a sign-in that proved more than the password (a
-- mailed sign-in or unlock link, a second factor) is verified. Attack
-- mode's start forgets the devices first seen since it began, to catch
-- the sign-ins decided before every replica knew; those are never
-- verified ones, which it keeps.
ALTER TABLE devices ADD COLUMN verified boolean NOT NULL DEFAULT false;

-- +goose Down

ALTER TABLE devices DROP COLUMN verified;
