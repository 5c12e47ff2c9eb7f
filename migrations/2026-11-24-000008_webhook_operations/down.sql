DROP TRIGGER webhook_subscriptions_data_version_on_change ON webhook_subscriptions;
DROP TRIGGER webhook_subscriptions_data_version ON webhook_subscriptions;
CREATE TRIGGER webhook_subscriptions_data_version
    AFTER INSERT OR UPDATE OR DELETE ON webhook_subscriptions
    FOR EACH ROW EXECUTE FUNCTION bump_data_version_of_row();
DROP TRIGGER webhook_subscriptions_version ON webhook_subscriptions;
DROP FUNCTION webhook_subscriptions_version();
DROP INDEX webhook_deliveries_retention_idx;
DROP INDEX webhook_deliveries_log_idx;
DELETE FROM webhook_attempts a USING webhook_deliveries d
 WHERE a.customer_id = d.customer_id AND a.delivery_id = d.id AND d.event_type = 'ping';
DELETE FROM webhook_attempts a USING webhook_deliveries d
 WHERE a.customer_id = d.customer_id AND a.delivery_id = d.id AND d.changes IS NOT NULL;
DELETE FROM webhook_deliveries WHERE event_type = 'ping' OR pass_id IS NULL OR changes IS NOT NULL;
ALTER TABLE webhook_deliveries DROP COLUMN changes;
UPDATE webhook_subscriptions
   SET event_types = ARRAY(SELECT e FROM unnest(event_types) e WHERE e LIKE 'finding\_%'
                           AND e NOT IN ('finding_resolved', 'finding_reopened',
                                         'finding_severity_changed'));
DELETE FROM webhook_subscriptions s WHERE cardinality(event_types) = 0
   AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                   WHERE d.customer_id = s.customer_id AND d.subscription_id = s.id);
ALTER TABLE webhook_subscriptions DROP CONSTRAINT webhook_subscriptions_event_types_check;
ALTER TABLE webhook_subscriptions ADD CONSTRAINT webhook_subscriptions_event_types_check CHECK (
    cardinality(event_types) > 0
    AND event_types <@ ARRAY['finding_critical', 'finding_high', 'finding_medium',
                             'finding_low']::text[]) NOT VALID;
ALTER TABLE webhook_deliveries
    DROP CONSTRAINT webhook_deliveries_schedule_check,
    DROP COLUMN last_status_code,
    DROP COLUMN last_attempt_at,
    DROP COLUMN schedule_start,
    DROP COLUMN trigger;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_finding_ids_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_finding_ids_check
    CHECK (cardinality(finding_ids) BETWEEN 1 AND 100);
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_type_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low'));
ALTER TABLE webhook_deliveries ALTER COLUMN pass_id SET NOT NULL;
ALTER TABLE webhook_subscriptions
    DROP CONSTRAINT webhook_subscriptions_disabled_check,
    DROP CONSTRAINT webhook_subscriptions_previous_secret_check,
    DROP COLUMN version,
    DROP COLUMN failing_since,
    DROP COLUMN disabled_reason,
    DROP COLUMN disabled_at,
    DROP COLUMN paused_at,
    DROP COLUMN previous_secret_expires_at,
    DROP COLUMN previous_secret_ciphertext,
    DROP COLUMN previous_secret_nonce,
    DROP COLUMN previous_secret_key_id;
