ALTER TABLE webhook_deliveries DROP COLUMN event_ids;
DROP TABLE finding_events;
DROP FUNCTION posture_event_id(timestamptz, bigint);
