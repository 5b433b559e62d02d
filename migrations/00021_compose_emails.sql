-- Addresses are composed (NFC) as they are normalised, so that an accent
-- typed apart from its letter is the same account as the composed letter.
-- An account stored before under a decomposed address would no longer be
-- found by it: each is stored composed, unless its composed address is
-- another account's, or another decomposed address composes to it too.
-- Such an account keeps its address (the account the composed address
-- names is the one a sign-in finds), as its lockout records keep theirs.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    -- normalize() needs a UTF8 database (a default install's); another
    -- is left as it is.
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RETURN;
    END IF;
    WITH composed AS (
        SELECT id, normalize(email, NFC) AS nfc FROM users WHERE email IS NOT NFC NORMALIZED
    ), alone AS (
        SELECT c.id, c.nfc FROM composed c
        WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.email = c.nfc)
            AND (SELECT count(*) FROM composed d WHERE d.nfc = c.nfc) = 1
    )
    UPDATE users u SET email = alone.nfc FROM alone WHERE u.id = alone.id;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Composed addresses stay composed: nothing to undo.
SELECT 1;
