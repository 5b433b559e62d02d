-- The batches of security events written, by the id the recorder gives
-- each batch.

-- +goose Up

-- A batch is written in one transaction with its id here. When the answer
-- to that write is lost (the connection drops, or the flush's timeout ends
-- the query after Postgres committed), the recorder writes the same batch
-- again under the same id: the id found here says it was written, and its
-- rows are not written twice. The janitor removes ids a day old, long
-- after any batch is written again.
CREATE TABLE event_batches (
    id         bytea       PRIMARY KEY CHECK (octet_length(id) = 16),
    written_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down

DROP TABLE event_batches;
