-- The events feed keeps one index, its primary key (customer_id, id): an event's id begins
-- with its pass's time and then its number, and a customer's passes take ever later times,
-- so the key's order is the feed's order and its time prefix finds `createdSince`, a pass's
-- own events and the retention cutoff. The three other indexes made a first pass of 200,000
-- new findings write each event four times (docs/performance.md, "What the events feed
-- costs a pass").
DROP INDEX finding_events_age_idx;
DROP INDEX finding_events_retention_idx;
ALTER TABLE finding_events DROP CONSTRAINT finding_events_customer_id_seq_key;

-- The least event id of the millisecond of `at`: the feed's ids of events created at or
-- after `at` are at least this one.
CREATE FUNCTION posture_event_floor(at timestamptz) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT encode(int8send((floor(extract(epoch FROM at) * 1000)::bigint << 16) | 28672)
                  || int8send((-9223372036854775808)::bigint), 'hex')::uuid
$$;

-- No foreign key to customers either: events are written only by a pass, which holds its
-- customer's row lock, and customers are never deleted; the key's check cost a first pass
-- of 200,000 events half a second.
ALTER TABLE finding_events DROP CONSTRAINT finding_events_customer_id_fkey;

-- The same ids as before, made by a function PostgreSQL can inline: a `SET` clause (the
-- search_path of migration 000015's version) prevents inlining, and the call then cost
-- 3.7 µs per event (0.75 s of a first pass of 200,000) against 0.6 µs. pg_catalog, which
-- every name here comes from, is searched before any schema of the search_path.
CREATE OR REPLACE FUNCTION posture_event_id(at timestamptz, seq bigint) RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(int8send((floor(extract(epoch FROM at) * 1000)::bigint << 16)
                           | 28672 | ((seq >> 28) & 4095))
                  || int8send((-9223372036854775808)::bigint | ((seq & 268435455) << 34)
                              | floor(random() * 17179869184)::bigint), 'hex')::uuid
$$;
