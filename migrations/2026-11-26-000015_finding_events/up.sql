-- The events feed (GET /api/v1/events): every finding event of every analyzer pass, whether
-- or not the customer has webhook subscriptions. A webhook delivery carries the ids of the
-- events it announces, so a consumer who missed deliveries reads the feed from the last id
-- it saw and gets exactly what it missed.

-- An event's id: a UUID of version 7 whose time is its pass's and whose next 40 bits are its
-- number (then 34 random bits), so that a customer's event ids sort in the feed's order: the
-- last event a consumer saw is the greatest id it holds, whichever deliveries brought them.
-- The random bits only keep ids apart across customers (every read is scoped to one, and an
-- id grants nothing): random() is enough, and an eighth of the cost of gen_random_uuid() in
-- a pass recording 200,000 events.
CREATE FUNCTION posture_event_id(at timestamptz, seq bigint) RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (lpad(to_hex((floor(extract(epoch FROM at) * 1000)::bigint << 16)
                        | 28672 | ((seq >> 28) & 4095)), 16, '0')
         || lpad(to_hex((-9223372036854775808)::bigint | ((seq & 268435455) << 34)
                        | floor(random() * 17179869184)::bigint), 16, '0'))::uuid
$$;

CREATE TABLE finding_events (
    customer_id  uuid NOT NULL REFERENCES customers (id),
    id           uuid NOT NULL,
    -- The customer's events are numbered 1, 2, 3, ... in the order their passes committed
    -- (passes of a customer are serialised by its row lock): the feed's order, so a reader
    -- following it never skips an event committed after it read.
    seq          bigint NOT NULL CHECK (seq > 0),
    event_type   text NOT NULL CHECK (event_type IN ('finding_critical', 'finding_high',
                                                   'finding_medium', 'finding_low',
                                                   'finding_resolved', 'finding_reopened',
                                                   'finding_severity_changed')),
    pass_id      uuid NOT NULL,
    finding_id   text COLLATE "C" NOT NULL,
    -- A lifecycle event's change ({field, from, to}); NULL for a new finding.
    change       jsonb CHECK (change IS NULL OR jsonb_typeof(change) = 'object'),
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (customer_id, id),
    UNIQUE (customer_id, seq)
);
-- `createdSince` finds where to start (the fan-out reads a pass's events by number); the
-- workers' retention sweep deletes the oldest events of every customer.
CREATE INDEX finding_events_age_idx ON finding_events (customer_id, created_at);
CREATE INDEX finding_events_retention_idx ON finding_events (created_at);

-- The events a delivery announces, in the order of finding_ids (NULL for a test delivery
-- and for deliveries queued before the feed existed).
ALTER TABLE webhook_deliveries ADD COLUMN event_ids uuid[]
    CHECK (event_ids IS NULL OR cardinality(event_ids) = cardinality(finding_ids));
