-- Webhook operations (issue 21): the delivery log consumers read, test deliveries,
-- redelivery and recovery.

-- A test delivery (`POST /webhooks/{id}/test`) belongs to no analyzer pass and may carry no
-- finding (a `ping`).
ALTER TABLE webhook_deliveries ALTER COLUMN pass_id DROP NOT NULL;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_type_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                          'ping'));
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
CREATE INDEX webhook_deliveries_log_idx
    ON webhook_deliveries (customer_id, subscription_id, created_at DESC, id DESC);
-- What the worker's retention sweep deletes: finished deliveries, oldest first.
CREATE INDEX webhook_deliveries_retention_idx
    ON webhook_deliveries (created_at) WHERE status <> 'pending';
