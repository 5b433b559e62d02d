-- +goose NO TRANSACTION

-- How a completed reset finds the devices of every spelling of its
-- account (migration 00025). Built concurrently, so that the devices stay
-- readable and writable while it is: every decision with a device reads
-- them. A build that failed leaves an invalid index, dropped before the
-- next try.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS app_devices_folded_idx;
CREATE INDEX CONCURRENTLY app_devices_folded_idx ON app_devices (folded_hash) WHERE folded_hash IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS app_devices_folded_idx;
