-- What the account page shows of each session and known device: an
-- opaque public id to name it by (never the token or its hash), and for a
-- session the network it signed in from and a short description of its
-- browser.

-- +goose Up

-- public_id names a session or a device in the account page and its API:
-- 128 random bits, hex, made by the service for a new session and by the
-- default here for rows that predate it and for new devices. It says
-- nothing of the token or the nonce.
ALTER TABLE sessions ADD COLUMN public_id text;
UPDATE sessions SET public_id = replace(gen_random_uuid()::text, '-', '');
ALTER TABLE sessions ALTER COLUMN public_id SET NOT NULL,
    ALTER COLUMN public_id SET DEFAULT replace(gen_random_uuid()::text, '-', ''),
    ADD CONSTRAINT sessions_public_id_key UNIQUE (public_id);

-- network is the client's network as events name it (auth.Client.Source);
-- browser a short description of its User-Agent ("Firefox on Linux"),
-- never the raw header. Both at most 64 bytes.
ALTER TABLE sessions ADD COLUMN network text NOT NULL DEFAULT '',
    ADD COLUMN browser text NOT NULL DEFAULT '',
    ADD CONSTRAINT sessions_details_bounded CHECK (octet_length(network) <= 64 AND octet_length(browser) <= 64);

ALTER TABLE devices ADD COLUMN public_id text;
UPDATE devices SET public_id = replace(gen_random_uuid()::text, '-', '');
ALTER TABLE devices ALTER COLUMN public_id SET NOT NULL,
    ALTER COLUMN public_id SET DEFAULT replace(gen_random_uuid()::text, '-', ''),
    ADD CONSTRAINT devices_public_id_key UNIQUE (public_id);

-- +goose Down
ALTER TABLE sessions DROP COLUMN public_id, DROP COLUMN network, DROP COLUMN browser;
ALTER TABLE devices DROP COLUMN public_id;
