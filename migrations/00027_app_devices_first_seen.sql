-- +goose NO TRANSACTION

-- How attack mode's start finds the applications' devices first seen in
-- the moments before it (auth.Service.SignOutNewDevices), to forget them.
-- Built concurrently, as 00026: every decision with a device reads the
-- table. A build that failed leaves an invalid index, dropped before the
-- next try.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS app_devices_first_seen_idx;
CREATE INDEX CONCURRENTLY app_devices_first_seen_idx ON app_devices (first_seen_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS app_devices_first_seen_idx;
