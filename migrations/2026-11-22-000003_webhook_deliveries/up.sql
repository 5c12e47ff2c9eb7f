-- The outbox of webhook deliveries, filled by each analyzer pass in its own transaction and
-- worked by any number of posture-worker processes.

CREATE TABLE webhook_deliveries (
    customer_id      uuid NOT NULL,
    -- Sent as X-Service-Delivery: the same on every attempt.
    id               uuid NOT NULL,
    subscription_id  uuid NOT NULL,
    pass_id          uuid NOT NULL,
    event_type       text NOT NULL CHECK (event_type IN ('finding_critical', 'finding_high',
                                                       'finding_medium', 'finding_low')),
    chunk            integer NOT NULL CHECK (chunk >= 0),
    -- The new findings of this chunk (at most 100), in order.
    finding_ids      text[] NOT NULL CHECK (cardinality(finding_ids) BETWEEN 1 AND 100),
    -- The body rendered at the first attempt: every retry sends the same bytes.
    body             bytea,
    status           text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    -- A worker's claim: nobody else sends it until then.
    lease_until      timestamptz,
    leased_by        text,
    created_at       timestamptz NOT NULL,
    delivered_at     timestamptz,
    last_error       text,
    PRIMARY KEY (customer_id, id),
    -- Fan-out is idempotent: one delivery per pass, subscription, event type and chunk.
    CONSTRAINT webhook_deliveries_fanout_key
        UNIQUE (customer_id, pass_id, subscription_id, event_type, chunk),
    FOREIGN KEY (customer_id, subscription_id)
        REFERENCES webhook_subscriptions (customer_id, id)
);
-- What workers claim: due, pending deliveries.
CREATE INDEX webhook_deliveries_due_idx
    ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_subscription_idx
    ON webhook_deliveries (customer_id, subscription_id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_customer_idx
    ON webhook_deliveries (customer_id, created_at DESC);

-- Every attempt of every delivery.
CREATE TABLE webhook_attempts (
    customer_id       uuid NOT NULL,
    delivery_id       uuid NOT NULL,
    attempt           integer NOT NULL CHECK (attempt >= 1),
    started_at        timestamptz NOT NULL,
    latency_ms        integer NOT NULL,
    status_code       smallint,
    error             text,
    -- At most 1 KiB of the receiver's answer, for operators (never shown to API callers).
    response_excerpt  text,
    worker            text NOT NULL,
    PRIMARY KEY (customer_id, delivery_id, attempt),
    FOREIGN KEY (customer_id, delivery_id) REFERENCES webhook_deliveries (customer_id, id)
);
