-- One body per chunk of events, not one per subscription: the findings a chunk carries,
-- as the first attempt of any of its deliveries read them (JSON, compressed with zstd), kept
-- once and shared by every subscription's delivery of the chunk. Each delivery's body is
-- rendered from it at every attempt (its own id, its subscription's format), byte for byte
-- the same each time. A delivery queued before this migration keeps the body it has.
-- Deleted by the retention sweep once no delivery of the chunk is left.
CREATE TABLE webhook_bodies (
    customer_id  uuid NOT NULL,
    -- The chunk: as webhook_deliveries names it (the pass, or the triage change or expiry
    -- round that stands for one).
    pass_id      uuid NOT NULL,
    event_type   text NOT NULL,
    chunk        integer NOT NULL,
    findings     bytea NOT NULL,
    -- When the chunk was queued (its deliveries' created_at): the retention counts from it.
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (customer_id, pass_id, event_type, chunk)
);
CREATE INDEX webhook_bodies_retention_idx ON webhook_bodies (created_at);
