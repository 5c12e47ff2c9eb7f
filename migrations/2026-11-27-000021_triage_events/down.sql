DROP INDEX IF EXISTS findings_triage_expiry_idx;
DELETE FROM finding_events WHERE event_type IN ('finding_triaged', 'finding_triage_expired');
DELETE FROM webhook_deliveries
    WHERE event_type IN ('finding_triaged', 'finding_triage_expired');
UPDATE webhook_subscriptions
    SET event_types = array_remove(array_remove(event_types, 'finding_triaged'),
                                   'finding_triage_expired');
ALTER TABLE finding_events DROP CONSTRAINT finding_events_event_type_check;
ALTER TABLE finding_events ADD CONSTRAINT finding_events_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                          'finding_resolved', 'finding_reopened', 'finding_severity_changed',
                          'finding_suppressed'));
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_type_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                          'finding_resolved', 'finding_reopened', 'finding_severity_changed',
                          'finding_suppressed', 'ping'));
ALTER TABLE webhook_subscriptions DROP CONSTRAINT webhook_subscriptions_event_types_check;
ALTER TABLE webhook_subscriptions ADD CONSTRAINT webhook_subscriptions_event_types_check CHECK (
    cardinality(event_types) > 0
    AND event_types <@ ARRAY['finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                             'finding_resolved', 'finding_reopened',
                             'finding_severity_changed', 'finding_suppressed']::text[]);
