-- A session also ends once it goes unused for XCLOAK_SESSION_IDLE: its
-- expires_at is then the sooner of that and its end.

-- +goose Up

-- ends_at is the latest a session lasts (XCLOAK_SESSION_TTL after its
-- sign-in); expires_at, which every read and the sweep test, is moved
-- towards it as the session is used, never past it. NULL for a session
-- made before this migration, whose expires_at is its end until its next
-- use copies it here.
ALTER TABLE sessions ADD COLUMN ends_at timestamptz;

-- +goose Down
ALTER TABLE sessions DROP COLUMN ends_at;
