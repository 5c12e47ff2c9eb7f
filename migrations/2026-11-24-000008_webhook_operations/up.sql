-- Webhook operations (issue 21): the delivery log consumers read, test deliveries,
-- redelivery and recovery; editing, pausing and disabling subscriptions; rotating their
-- signing secret with an overlap.

ALTER TABLE webhook_subscriptions
    -- The secret a rotation replaced, sealed like the current one, and when it stops
    -- signing deliveries: both sign until then.
    ADD COLUMN previous_secret_key_id text,
    ADD COLUMN previous_secret_nonce bytea CHECK (length(previous_secret_nonce) = 12),
    ADD COLUMN previous_secret_ciphertext bytea,
    ADD COLUMN previous_secret_expires_at timestamptz,
    -- Paused by the consumer: new deliveries are queued and held until it resumes.
    ADD COLUMN paused_at timestamptz,
    -- Disabled by the worker after every attempt failed for days (`failing`); the consumer
    -- re-enables it.
    ADD COLUMN disabled_at timestamptz,
    ADD COLUMN disabled_reason text CHECK (disabled_reason IN ('failing')),
    -- The first failed attempt since the last success (null after a success).
    ADD COLUMN failing_since timestamptz,
    -- Bumped by every change a consumer can see: its ETag (If-Match guards edits).
    ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    ADD CONSTRAINT webhook_subscriptions_previous_secret_check CHECK (
        (previous_secret_key_id IS NULL) = (previous_secret_nonce IS NULL)
        AND (previous_secret_key_id IS NULL) = (previous_secret_ciphertext IS NULL)
        AND (previous_secret_key_id IS NULL) = (previous_secret_expires_at IS NULL)),
    ADD CONSTRAINT webhook_subscriptions_disabled_check CHECK (
        (disabled_at IS NULL) = (disabled_reason IS NULL)
        AND (paused_at IS NULL OR disabled_at IS NULL));

-- The version counts the changes a consumer can see (not the worker's failing_since, nor a
-- re-sealing of the secret), and only those bump the customer's data version.
CREATE FUNCTION webhook_subscriptions_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.name, NEW.webhook_url, NEW.event_types, NEW.active, NEW.paused_at,
        NEW.disabled_at, NEW.disabled_reason, NEW.previous_secret_expires_at)
       IS DISTINCT FROM
       (OLD.name, OLD.webhook_url, OLD.event_types, OLD.active, OLD.paused_at,
        OLD.disabled_at, OLD.disabled_reason, OLD.previous_secret_expires_at) THEN
        NEW.version := OLD.version + 1;
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER webhook_subscriptions_version
    BEFORE UPDATE ON webhook_subscriptions
    FOR EACH ROW EXECUTE FUNCTION webhook_subscriptions_version();
DROP TRIGGER webhook_subscriptions_data_version ON webhook_subscriptions;
CREATE TRIGGER webhook_subscriptions_data_version
    AFTER INSERT OR DELETE ON webhook_subscriptions
    FOR EACH ROW EXECUTE FUNCTION bump_data_version_of_row();
CREATE TRIGGER webhook_subscriptions_data_version_on_change
    AFTER UPDATE ON webhook_subscriptions
    FOR EACH ROW WHEN (OLD.version IS DISTINCT FROM NEW.version)
    EXECUTE FUNCTION bump_data_version_of_row();

-- A test delivery (`POST /webhooks/{id}/test`) belongs to no analyzer pass and may carry no
-- finding (a `ping`).
ALTER TABLE webhook_deliveries ALTER COLUMN pass_id DROP NOT NULL;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_type_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                          'finding_resolved', 'finding_reopened', 'finding_severity_changed',
                          'ping'));
-- Lifecycle events (opt-in): changes of findings a customer already had.
ALTER TABLE webhook_subscriptions DROP CONSTRAINT webhook_subscriptions_event_types_check;
ALTER TABLE webhook_subscriptions ADD CONSTRAINT webhook_subscriptions_event_types_check CHECK (
    cardinality(event_types) > 0
    AND event_types <@ ARRAY['finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                             'finding_resolved', 'finding_reopened',
                             'finding_severity_changed']::text[]);
-- For a lifecycle event, how each finding changed ({field, from, to}, in the order of
-- finding_ids).
ALTER TABLE webhook_deliveries ADD COLUMN changes jsonb
    CHECK (changes IS NULL OR (jsonb_typeof(changes) = 'array'
                               AND jsonb_array_length(changes) = cardinality(finding_ids)));
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_finding_ids_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_finding_ids_check
    CHECK (cardinality(finding_ids) BETWEEN 0 AND 100);

ALTER TABLE webhook_deliveries
    -- What queued the delivery's current schedule: a pass's event, a test, a redelivery of
    -- this one, or a recovery of a window.
    ADD COLUMN trigger text NOT NULL DEFAULT 'event'
        CHECK (trigger IN ('event', 'test', 'redelivery', 'recovery')),
    -- Attempts made before the current schedule began (a redelivery or a recovery starts a
    -- fresh schedule; `attempts` keeps counting every attempt).
    ADD COLUMN schedule_start integer NOT NULL DEFAULT 0,
    -- The last attempt, kept on the row so the delivery log reads one table.
    ADD COLUMN last_attempt_at timestamptz,
    ADD COLUMN last_status_code smallint,
    ADD CONSTRAINT webhook_deliveries_schedule_check
        CHECK (schedule_start BETWEEN 0 AND attempts);

UPDATE webhook_deliveries d
   SET last_attempt_at = a.started_at, last_status_code = a.status_code
  FROM (SELECT DISTINCT ON (customer_id, delivery_id) customer_id, delivery_id, started_at,
               status_code
          FROM webhook_attempts
         ORDER BY customer_id, delivery_id, attempt DESC) a
 WHERE d.customer_id = a.customer_id AND d.id = a.delivery_id;

-- The delivery log of a subscription, newest first (`GET /webhooks/{id}/deliveries`).
-- The filters ride along, so a filtered page and its total are read from the index alone.
CREATE INDEX webhook_deliveries_log_idx
    ON webhook_deliveries (customer_id, subscription_id, created_at DESC, id DESC)
    INCLUDE (status, event_type);
-- What the worker's retention sweep deletes: finished deliveries, oldest first.
CREATE INDEX webhook_deliveries_retention_idx
    ON webhook_deliveries (created_at) WHERE status <> 'pending';
