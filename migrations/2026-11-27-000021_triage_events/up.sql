-- Triage events: `finding_triaged` (a key changed a finding's triage) and
-- `finding_triage_expired` (a mark reached its `expiresAt` and the sweep recorded it as
-- `untriaged`), in the events feed and for subscriptions that list them. Each check is
-- replaced by a wider one, as for `finding_suppressed`. Outside a transaction
-- (metadata.toml), each step safe to run again. The statements go to the server in one
-- message, which PostgreSQL runs as one transaction unless blocks say otherwise: in a block
-- of its own, the swap of a check holds its table's lock a moment, and the validation (a
-- read of the table) runs after it under a lock that lets reads and writes go on.
BEGIN;
ALTER TABLE finding_events DROP CONSTRAINT IF EXISTS finding_events_event_type_check;
ALTER TABLE finding_events ADD CONSTRAINT finding_events_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                          'finding_resolved', 'finding_reopened', 'finding_severity_changed',
                          'finding_suppressed', 'finding_triaged', 'finding_triage_expired'))
    NOT VALID;
COMMIT;
BEGIN;
ALTER TABLE finding_events VALIDATE CONSTRAINT finding_events_event_type_check;
COMMIT;
BEGIN;
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_event_type_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_type_check
    CHECK (event_type IN ('finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                          'finding_resolved', 'finding_reopened', 'finding_severity_changed',
                          'finding_suppressed', 'finding_triaged', 'finding_triage_expired',
                          'ping')) NOT VALID;
COMMIT;
BEGIN;
ALTER TABLE webhook_deliveries VALIDATE CONSTRAINT webhook_deliveries_event_type_check;
COMMIT;
BEGIN;
ALTER TABLE webhook_subscriptions DROP CONSTRAINT IF EXISTS webhook_subscriptions_event_types_check;
ALTER TABLE webhook_subscriptions ADD CONSTRAINT webhook_subscriptions_event_types_check CHECK (
    cardinality(event_types) > 0
    AND event_types <@ ARRAY['finding_critical', 'finding_high', 'finding_medium', 'finding_low',
                             'finding_resolved', 'finding_reopened',
                             'finding_severity_changed', 'finding_suppressed',
                             'finding_triaged', 'finding_triage_expired']::text[])
    NOT VALID;
COMMIT;
BEGIN;
ALTER TABLE webhook_subscriptions VALIDATE CONSTRAINT webhook_subscriptions_event_types_check;
COMMIT;
-- What the expiry sweep looks for: the few marks with an expiry, customer first like every
-- index of customer data (the sweep reads this small index whole to find the customers,
-- then each customer's range). Not CONCURRENTLY (which no statement of a message of several
-- may be): building it reads findings once, writes waiting, as migration 18's indexes did.
CREATE INDEX IF NOT EXISTS findings_triage_expiry_idx
    ON findings (customer_id, triage_expires_at) WHERE triage_expires_at IS NOT NULL;
