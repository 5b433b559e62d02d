-- The application each API key speaks for.

-- +goose Up

-- A key's accounts, their limits, lockouts and known devices are its
-- application's. Until now the application was the key's name, so a key
-- made under another name to replace one (shop-2 for shop) started the
-- application afresh; a key made for another key's application names it
-- here. NULL: the key's own name.
ALTER TABLE api_keys ADD COLUMN app text
    CONSTRAINT api_keys_app_format CHECK (app ~ '^[A-Za-z0-9._-]{1,64}$');

-- +goose Down

ALTER TABLE api_keys DROP COLUMN app;
