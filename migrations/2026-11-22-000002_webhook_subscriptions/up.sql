-- Webhook subscriptions. A deleted subscription is deactivated, never removed: the row stays
-- for audit with its deactivation time.

CREATE TABLE webhook_subscriptions (
    customer_id        uuid NOT NULL REFERENCES customers (id),
    id                 uuid NOT NULL,
    name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    webhook_url        text NOT NULL CHECK (length(webhook_url) <= 2048),
    webhook_type       text NOT NULL CHECK (webhook_type IN ('generic', 'slack', 'teams')),
    event_types        text[] NOT NULL CHECK (
        cardinality(event_types) > 0
        AND event_types <@ ARRAY['finding_critical', 'finding_high', 'finding_medium',
                                 'finding_low']::text[]
    ),
    -- The signing secret, sealed with AES-256-GCM (never stored in clear): the id of the
    -- key that sealed it, the nonce, and the ciphertext with its tag.
    secret_key_id      text NOT NULL,
    secret_nonce       bytea NOT NULL CHECK (length(secret_nonce) = 12),
    secret_ciphertext  bytea NOT NULL,
    active             boolean NOT NULL DEFAULT true,
    created_at         timestamptz NOT NULL,
    deactivated_at     timestamptz,
    PRIMARY KEY (customer_id, id),
    CHECK (active = (deactivated_at IS NULL))
);
CREATE INDEX webhook_subscriptions_active_idx
    ON webhook_subscriptions (customer_id, created_at, id) WHERE active;
