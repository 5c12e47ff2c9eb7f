-- `Idempotency-Key` on the POSTs that create or act: each key of an API key, the request it
-- was first used for (a SHA-256 of method, path and body), and its answer once kept (the
-- body sealed: a created subscription's answer holds its signing secret). A key is
-- forgotten at `kept_until` (24 h); one still `running` past `running_until` may be taken
-- by a retry (its first request stopped without an answer). `claim` names the request that
-- holds the key (random, one per claim): only it keeps an answer or frees the key.
CREATE TABLE idempotency_keys (
    customer_id     uuid NOT NULL,
    api_key_id      uuid NOT NULL,
    idempotency_key text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint     bytea NOT NULL,
    claim           uuid NOT NULL,
    running_until   timestamptz,
    kept_until      timestamptz NOT NULL,
    status          smallint,
    headers         jsonb,
    body_key_id     text,
    body_nonce      bytea,
    body            bytea,
    PRIMARY KEY (customer_id, api_key_id, idempotency_key)
);

-- The retention sweep finds a customer's keys to forget without reading the others.
CREATE INDEX idempotency_keys_kept_until_idx ON idempotency_keys (customer_id, kept_until);
