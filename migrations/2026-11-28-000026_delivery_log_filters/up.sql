-- The delivery log filtered by state or by event type (`GET /webhooks/{id}/deliveries`
-- with `status` or `eventType`): each filter leads an index of its own, so a filtered page
-- and its total read the matching entries only, where the log index (migration 8) read the
-- subscription's whole log to find them (a filter matching nothing read all of it). Both
-- filters together use either index and take the other value from it.
CREATE INDEX webhook_deliveries_log_status_idx
    ON webhook_deliveries (customer_id, subscription_id, status, created_at DESC, id DESC)
    INCLUDE (event_type);
CREATE INDEX webhook_deliveries_log_event_idx
    ON webhook_deliveries (customer_id, subscription_id, event_type, created_at DESC, id DESC)
    INCLUDE (status);
