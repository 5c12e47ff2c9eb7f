DROP INDEX webhook_deliveries_leased_idx;
CREATE INDEX webhook_deliveries_subscription_idx
    ON webhook_deliveries (customer_id, subscription_id) WHERE status = 'pending';
DROP INDEX webhook_deliveries_queue_idx;
DROP TABLE webhook_latency;
