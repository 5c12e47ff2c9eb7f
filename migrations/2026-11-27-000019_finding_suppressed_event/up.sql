-- `finding_suppressed`: a known finding's status became `suppressed` (a lifecycle event like
-- `finding_resolved`), in the events feed and for subscriptions that list it. Each check is
-- replaced by a wider one (adding it reads the table's rows once, under the migration's
-- lock: writers wait that long).
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
