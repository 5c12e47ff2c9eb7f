-- What the delivery log's `meta.total` reads (`GET /webhooks/{id}/deliveries`): how many
-- deliveries each subscription has, by event type and state, so that a page of a log of
-- 100,000 deliveries sums a few rows instead of counting 100,000 (a filter by `createdSince`
-- still counts, over the log index). Kept by statement triggers on `webhook_deliveries`, so
-- every statement that queues, finishes, cancels, requeues or purges deliveries keeps it,
-- including those of a later release that does not know it.
--
-- Each statement adds its rows' +1 (as they are after it) and -1 (as they were before it),
-- summed by key: one upsert per key it changed, in key order. Statements that change
-- no delivery's state (a claim's lease, a release) sum to nothing and write nothing. Each
-- statement takes its keys in the same order, so two of them wait for each other over the
-- totals without deadlocking; a transaction of several statements that also locks its
-- subscription locks the subscription first (as a pass's fan-out and an attempt do).
--
-- Not kept: `TRUNCATE webhook_deliveries` (no statement trigger sees its rows). Truncate
-- `webhook_delivery_totals` with it.
CREATE TABLE webhook_delivery_totals (
    customer_id     uuid NOT NULL,
    subscription_id uuid NOT NULL,
    event_type      text NOT NULL,
    status          text NOT NULL,
    total           bigint NOT NULL,
    PRIMARY KEY (customer_id, subscription_id, event_type, status)
);

-- Run as its owner (the migrating role), so that the runtime role needs no write on the
-- totals: it cannot set a customer's totals itself, and a release writing deliveries works
-- from the moment this migration commits, before `migrate --runtime-role` grants anything.
CREATE FUNCTION count_webhook_deliveries() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    changes public.webhook_delivery_totals[];
    change public.webhook_delivery_totals;
BEGIN
    -- The statement's rows summed by key, in key order, read on their own: on Citus a
    -- statement that names a distributed table runs on Citus's executor, which does not see
    -- a trigger's transition tables. (`total` holds the change here.)
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(ROW(customer_id, subscription_id, event_type, status, n)
                             ::public.webhook_delivery_totals
                         ORDER BY customer_id, subscription_id, event_type, status)
        INTO changes
        FROM (SELECT customer_id, subscription_id, event_type, status, count(*) AS n
              FROM added GROUP BY 1, 2, 3, 4) c;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT array_agg(ROW(customer_id, subscription_id, event_type, status, n)
                             ::public.webhook_delivery_totals
                         ORDER BY customer_id, subscription_id, event_type, status)
        INTO changes
        FROM (SELECT customer_id, subscription_id, event_type, status, sum(n) AS n
              FROM (SELECT customer_id, subscription_id, event_type, status, 1 AS n
                    FROM added
                    UNION ALL
                    SELECT customer_id, subscription_id, event_type, status, -1 FROM removed) r
              GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0) c;
    ELSE
        SELECT array_agg(ROW(customer_id, subscription_id, event_type, status, -n)
                             ::public.webhook_delivery_totals
                         ORDER BY customer_id, subscription_id, event_type, status)
        INTO changes
        FROM (SELECT customer_id, subscription_id, event_type, status, count(*) AS n
              FROM removed GROUP BY 1, 2, 3, 4) c;
    END IF;
    -- One upsert per key (on Citus each runs on the node of the customer's shard).
    FOREACH change IN ARRAY coalesce(changes, '{}') LOOP
        INSERT INTO public.webhook_delivery_totals AS t
            (customer_id, subscription_id, event_type, status, total)
        VALUES (change.customer_id, change.subscription_id, change.event_type, change.status,
                change.total)
        ON CONFLICT (customer_id, subscription_id, event_type, status)
            DO UPDATE SET total = t.total + excluded.total;
    END LOOP;
    RETURN NULL;
END;
$$;

-- On a Citus cluster distributed already (an upgrade), the table joins the others before
-- the triggers exist: they run on the worker nodes, beside the customer's shard of it. On a
-- fresh database (or without Citus) `migrate` distributes everything after the migrations.
DO $$
DECLARE
    distributed boolean := false;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition '
                'WHERE logicalrelid = ''webhook_deliveries''::regclass)' INTO distributed;
    END IF;
    IF distributed THEN
        PERFORM posture_distribute_table('webhook_delivery_totals');
    END IF;
END;
$$;

-- No write may fall between the count below and the triggers.
LOCK TABLE webhook_deliveries IN SHARE ROW EXCLUSIVE MODE;
CREATE TRIGGER webhook_deliveries_count_insert AFTER INSERT ON webhook_deliveries
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION count_webhook_deliveries();
CREATE TRIGGER webhook_deliveries_count_update AFTER UPDATE ON webhook_deliveries
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION count_webhook_deliveries();
CREATE TRIGGER webhook_deliveries_count_delete AFTER DELETE ON webhook_deliveries
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION count_webhook_deliveries();
INSERT INTO webhook_delivery_totals (customer_id, subscription_id, event_type, status, total)
SELECT customer_id, subscription_id, event_type, status, count(*)
FROM webhook_deliveries GROUP BY 1, 2, 3, 4;
