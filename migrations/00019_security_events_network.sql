-- The event search by network finds the addresses and networks inside a
-- prefix, not only the events stored with its very text.

-- +goose Up

-- security_event_network is an event's network (its ip: an address, an
-- IPv6 /64, the /24 or /48 of a summary) as inet, or NULL where ip is no
-- network ("unknown"), so that such a row neither fails a search nor
-- fails the COPY that writes it into the index below. It is IMMUTABLE, as
-- inet's input is, which an index expression needs; its EXCEPTION block
-- makes it PARALLEL UNSAFE, the default, which a page of 50 does not miss.
-- Its COST tells the planner what a call costs where the index is not
-- read (a filter on the log read in order): about 2 us, some ten times
-- the default's 100, so that a network's events are read through the
-- index unless they are many of the log's.
-- +goose StatementBegin
CREATE FUNCTION security_event_network(ip text) RETURNS inet
    LANGUAGE plpgsql IMMUTABLE STRICT COST 1000 AS $$
BEGIN
    RETURN ip::inet;
EXCEPTION WHEN data_exception THEN
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- A search by network reads the events whose network overlaps it
-- (security_event_network(ip) && $1) through this index, whichever holds
-- the other. GiST gives them in no order: a network with few events is
-- read whole and sorted, one with many is read in the page's order
-- through security_events_at_id_idx, stopping at the page's end. Which
-- is which the planner tells from the statistics ANALYZE keeps of the
-- index's expression, which it reads only for an index that is not
-- partial: without them it takes 1% of the log for any network, and
-- reads the whole log in order for one of twenty events. It replaces
-- 00009's (ip, at DESC, id DESC), which only the very text matched.
CREATE INDEX security_events_network_idx ON security_events
    USING gist (security_event_network(ip) inet_ops);
DROP INDEX security_events_ip_at_id_idx;

-- +goose Down
CREATE INDEX security_events_ip_at_id_idx ON security_events (ip, at DESC, id DESC)
    WHERE ip IS NOT NULL;
DROP INDEX security_events_network_idx;
DROP FUNCTION security_event_network(text);
