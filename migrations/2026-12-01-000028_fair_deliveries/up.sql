-- Fair deliveries: the worker's claim shares its slots out between customers and their
-- subscriptions, bounds what each subscription has in flight, and serves subscriptions
-- recognised slow by their latency on a lane of their own (docs/operations.md, "Fair
-- shares").

-- Each subscription's moving average latency (ms) over its attempts, written with each
-- attempt (a table of its own: a subscription's row is locked by a pass's fan-out, which an
-- attempt must never wait for). On Citus, distributed by customer with the rest.
CREATE TABLE webhook_latency (
    customer_id      uuid NOT NULL,
    subscription_id  uuid NOT NULL,
    latency_ms       integer NOT NULL CHECK (latency_ms >= 0),
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (customer_id, subscription_id)
);
-- On a Citus cluster distributed already (an upgrade), the table joins the others before
-- its foreign key: Citus refuses a key from a table of the coordinator to a distributed one.
-- On a fresh database (or without Citus) `migrate` distributes everything after the
-- migrations.
DO $$
DECLARE
    distributed boolean := false;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition '
                'WHERE logicalrelid = ''webhook_subscriptions''::regclass)' INTO distributed;
    END IF;
    IF distributed THEN
        PERFORM posture_distribute_table('webhook_latency');
    END IF;
END;
$$;
ALTER TABLE webhook_latency ADD FOREIGN KEY (customer_id, subscription_id)
    REFERENCES webhook_subscriptions (customer_id, id);

-- A subscription's queue, oldest due first (a pass's chunks in order): the claim finds the
-- subscriptions with deliveries pending by a skip scan of it and reads each one's due head.
-- It replaces the index of pending deliveries by subscription (its first two columns).
CREATE INDEX webhook_deliveries_queue_idx
    ON webhook_deliveries (customer_id, subscription_id, next_attempt_at, chunk)
    WHERE status = 'pending';
DROP INDEX webhook_deliveries_subscription_idx;

-- What a subscription has in flight: its leased deliveries (a lease ends with its attempt,
-- so this index holds the deliveries being sent and those of a crashed worker).
CREATE INDEX webhook_deliveries_leased_idx
    ON webhook_deliveries (customer_id, subscription_id)
    WHERE status = 'pending' AND lease_until IS NOT NULL;
