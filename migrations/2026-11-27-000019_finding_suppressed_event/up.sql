-- `finding_suppressed`: a known finding's status became `suppressed` (a lifecycle event like
-- `finding_resolved`), in the events feed and for subscriptions that list it. Each check is
-- replaced by a wider one. Outside a transaction (metadata.toml), statement by statement:
-- adding a check NOT VALID locks its table for an instant, and validating it reads the rows
-- already stored under a lock that lets reads and writes go on. Safe to run again.
ALTER TABLE finding_events DROP CONSTRAINT IF EXISTS finding_events_event_type_check;
ALTER TABLE finding_events ADD CONSTRAINT finding_events_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                          'finding_resolved', 'finding_reopened', 'finding_severity_changed',
                          'finding_suppressed')) NOT VALID;
ALTER TABLE finding_events VALIDATE CONSTRAINT finding_events_event_type_check;
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_event_type_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                          'finding_resolved', 'finding_reopened', 'finding_severity_changed',
                          'finding_suppressed', 'ping')) NOT VALID;
ALTER TABLE webhook_deliveries VALIDATE CONSTRAINT webhook_deliveries_event_type_check;
ALTER TABLE webhook_subscriptions DROP CONSTRAINT IF EXISTS webhook_subscriptions_event_types_check;
ALTER TABLE webhook_subscriptions ADD CONSTRAINT webhook_subscriptions_event_types_check CHECK (
    cardinality(event_types) > 0
    AND event_types <@ ARRAY['finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                             'finding_resolved', 'finding_reopened',
                             'finding_severity_changed', 'finding_suppressed']::text[])
    NOT VALID;
ALTER TABLE webhook_subscriptions VALIDATE CONSTRAINT webhook_subscriptions_event_types_check;
