-- posture on Citus (docs/operations.md, "Running on Citus"): every table of customer data is
-- distributed by `customer_id`, so that each customer's rows live on one node and each of
-- its statements runs there. On one PostgreSQL node this migration changes no behaviour:
-- it moves the two rules that spanned customers into tables of their own, and defines the
-- functions that `posture-api migrate` calls when the database has the `citus` extension.
-- Additive: the previous version keeps working on this schema during a rollout.

-- A cloud tenant is connected to one customer at most. The unique index on
-- tenants (cloud_tenant_id) cannot hold across nodes (a distributed table's unique indexes
-- must contain its distribution column), so the rule has a table of its own, written in the
-- transaction that connects the tenant for the first time; on Citus it is distributed by
-- the cloud tenant (so the rule holds on one node, whichever customer asks). On one node the
-- unique index stays until a later release drops it.
CREATE TABLE cloud_tenant_owners (
    cloud_tenant_id  uuid PRIMARY KEY,
    customer_id      uuid NOT NULL REFERENCES customers (id),
    connected_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT cloud_tenant_owners_pair_key UNIQUE (cloud_tenant_id, customer_id)
);
INSERT INTO cloud_tenant_owners (cloud_tenant_id, customer_id, connected_at)
SELECT cloud_tenant_id, customer_id, connected_at FROM tenants;

-- What a pass locks, and the bound of reads by modification (was customers.synced_through):
-- a row per customer, colocated with the customer's data, so that a pass locks and writes
-- only the node of its customer. `customers` is replicated to every node on Citus; a lock
-- or a write there would reach all of them. customers.synced_through is no longer written
-- or read, and goes in a later release.
CREATE TABLE customer_sync (
    customer_id     uuid PRIMARY KEY REFERENCES customers (id),
    synced_through  timestamptz
);
INSERT INTO customer_sync (customer_id, synced_through) SELECT id, synced_through FROM customers;

-- A customer with a data version has its row in customer_sync too (the version and the pass
-- bound are read together, from the customer's node).
CREATE OR REPLACE FUNCTION bump_data_version(customer uuid) RETURNS void LANGUAGE sql AS $$
    INSERT INTO customer_data_versions (customer_id, version) VALUES (customer, 1)
    ON CONFLICT (customer_id) DO UPDATE SET version = customer_data_versions.version + 1;
    INSERT INTO customer_sync (customer_id) VALUES (customer) ON CONFLICT DO NOTHING;
    SELECT pg_notify('posture_data', customer::text);
$$;

-- Planner statistics of one customer's rows after a pass (see migration 000009): on one
-- node the table's customer column; on Citus the function is distributed by its customer,
-- so a call runs on the node holding the customer's shard, and analyzes that shard alone
-- (an ANALYZE of the distributed table would sample every shard on every node).
CREATE FUNCTION posture_analyze(customer uuid, table_name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    target text := format('public.%I', table_name);
BEGIN
    IF table_name NOT IN ('findings', 'identities') THEN
        RAISE EXCEPTION 'posture_analyze: % is not a table posture refreshes', table_name;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        target := format('public.%I', table_name || '_'
                         || get_shard_id_for_distribution_column(target, customer));
        IF to_regclass(target) IS NULL THEN
            RAISE EXCEPTION 'posture_analyze: the shard of customer % in % is not on this node',
                customer, table_name;
        END IF;
    END IF;
    EXECUTE format('ANALYZE %s (customer_id)', target);
END;
$$;
REVOKE EXECUTE ON FUNCTION posture_analyze(uuid, text) FROM PUBLIC;

-- Distributes one table of customer data by `customer_id`, colocated with `tenants` (and so
-- with every other one), on Citus; nothing on PostgreSQL without it, or when the table is
-- distributed already. A migration that adds a table of customer data calls it right after
-- CREATE TABLE, before adding foreign keys to other customer tables (Citus refuses a
-- foreign key from a table that is not distributed to one that is).
CREATE FUNCTION posture_distribute_table(t regclass) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = t AND partmethod = 'h') THEN
        RETURN;
    END IF;
    -- Triggers on shards run on the worker nodes: posture's only touch their own row or the
    -- customer's colocated rows (docs/operations.md, "Running on Citus").
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    IF t = 'tenants'::regclass THEN
        PERFORM create_distributed_table(t, 'customer_id', colocate_with => 'none');
    ELSE
        PERFORM create_distributed_table(t, 'customer_id', colocate_with => 'tenants');
    END IF;
    -- Rows that were on the coordinator were copied to the shards; the shell keeps none.
    PERFORM truncate_local_data_after_distributing_table(t);
END;
$$;

-- Distributes the whole schema on Citus (idempotent; nothing without Citus): `customers`
-- replicated to every node (a reference table); `cloud_tenant_owners` distributed by the
-- cloud tenant; `api_keys` left a plain table of the coordinator (a key is found by its hash
-- before its customer is known, and its triggers must notify where the API instances
-- listen: a table Citus manages on the coordinator would make a revocation a two-phase
-- commit, which PostgreSQL refuses after a NOTIFY); every other table with a `customer_id`
-- distributed by it, in one colocation group. Foreign keys are taken off while the tables
-- move and put back after (Citus cannot move a table that a table not yet distributed
-- points at), but for the key of `api_keys` to `customers` (a plain table cannot point at a
-- reference table; posture checks the customer when it issues a key). So are the triggers:
-- the rows of a single-node database are copied into the shards, and a trigger fired by
-- that copy would run on a worker node for each row, writing tables not distributed yet.
CREATE FUNCTION posture_distribute() RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
    fk record;
    tg record;
    fn record;
    t text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    -- Every table in its place already: nothing to do.
    IF NOT EXISTS (
        SELECT 1 FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
          AND c.relname <> 'api_keys'
          AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
          AND c.relname IN (SELECT table_name FROM information_schema.columns
                            WHERE table_schema = 'public' AND column_name = 'customer_id'
                            UNION ALL SELECT 'customers')) THEN
        RETURN;
    END IF;
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM set_config('citus.enable_local_reference_table_foreign_keys', 'off', true);
    CREATE TEMP TABLE posture_foreign_keys ON COMMIT DROP AS
        SELECT conrelid::regclass::text AS tbl, conname, pg_get_constraintdef(oid) AS def
        FROM pg_constraint
        WHERE contype = 'f' AND connamespace = 'public'::regnamespace;
    FOR fk IN SELECT * FROM posture_foreign_keys LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.tbl, fk.conname);
    END LOOP;
    DELETE FROM posture_foreign_keys WHERE tbl = 'api_keys';
    CREATE TEMP TABLE posture_triggers ON COMMIT DROP AS
        SELECT tr.tgrelid::regclass::text AS tbl, tr.tgname, pg_get_triggerdef(tr.oid) AS def
        FROM pg_trigger tr JOIN pg_class c ON c.oid = tr.tgrelid
        WHERE NOT tr.tgisinternal AND c.relnamespace = 'public'::regnamespace
          AND c.relname <> 'api_keys'
          AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid);
    FOR tg IN SELECT * FROM posture_triggers LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', tg.tgname, tg.tbl);
    END LOOP;
    -- On a worker node a trigger's NOTIFY reaches nobody (the API instances listen on the
    -- coordinator), and PostgreSQL refuses to prepare a transaction that sent one, which a
    -- change across nodes needs: there the data-version triggers only count, and posture
    -- notifies from the coordinator (data_versions.rs, notify_data_changed).
    CREATE OR REPLACE FUNCTION public.bump_data_version_of_row() RETURNS trigger
        LANGUAGE plpgsql AS $f$
    DECLARE
        customer uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.customer_id ELSE NEW.customer_id END;
    BEGIN
        INSERT INTO customer_data_versions (customer_id, version) VALUES (customer, 1)
        ON CONFLICT (customer_id) DO UPDATE SET version = customer_data_versions.version + 1;
        INSERT INTO customer_sync (customer_id) VALUES (customer) ON CONFLICT DO NOTHING;
        RETURN NULL;
    END;
    $f$;
    -- On Citus the owners table alone keeps a tenant to one customer.
    INSERT INTO cloud_tenant_owners (cloud_tenant_id, customer_id, connected_at)
    SELECT cloud_tenant_id, customer_id, connected_at FROM tenants
    ON CONFLICT (cloud_tenant_id) DO NOTHING;
    ALTER TABLE tenants DROP CONSTRAINT IF EXISTS tenants_cloud_tenant_id_key;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'customers'::regclass) THEN
        PERFORM create_reference_table('customers');
        PERFORM truncate_local_data_after_distributing_table('customers');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                   WHERE logicalrelid = 'cloud_tenant_owners'::regclass) THEN
        PERFORM create_distributed_table('cloud_tenant_owners', 'cloud_tenant_id',
                                         colocate_with => 'none');
        PERFORM truncate_local_data_after_distributing_table('cloud_tenant_owners');
    END IF;
    PERFORM posture_distribute_table('tenants');
    FOR t IN
        SELECT c.table_name FROM information_schema.columns c
        JOIN information_schema.tables tb
          ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name
        WHERE c.table_schema = 'public' AND c.column_name = 'customer_id'
          AND tb.table_type = 'BASE TABLE'
          AND c.table_name NOT IN ('customers', 'cloud_tenant_owners', 'api_keys', 'tenants')
        ORDER BY c.table_name
    LOOP
        PERFORM posture_distribute_table(t::regclass);
    END LOOP;
    -- posture's functions made before the extension (a single-node database distributed in
    -- place) exist on the coordinator alone; statements and triggers that run on a worker
    -- node call them there. Citus copies those made after it by itself. After the tables:
    -- a function of SQL is checked against the tables it names where it is made.
    FOR fn IN
        SELECT p.oid::regprocedure::text AS signature FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND p.prokind IN ('f', 'p')
          AND p.oid <> 'public.posture_analyze(uuid, text)'::regprocedure
          AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                            AND d.deptype = 'e')
          AND NOT EXISTS (SELECT 1 FROM pg_dist_object o
                          WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
    LOOP
        PERFORM create_distributed_function(fn.signature::regprocedure);
    END LOOP;
    -- A call of posture_analyze(customer, table) runs where the customer's shards are.
    PERFORM create_distributed_function('public.posture_analyze(uuid, text)', 'customer',
                                        colocate_with => 'tenants');
    FOR fk IN SELECT * FROM posture_foreign_keys LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_constraint
                       WHERE conrelid = fk.tbl::regclass AND conname = fk.conname) THEN
            EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk.tbl, fk.conname, fk.def);
        END IF;
    END LOOP;
    -- Back on the distributed tables, hence on every shard.
    FOR tg IN SELECT * FROM posture_triggers LOOP
        EXECUTE tg.def;
    END LOOP;
END;
$$;
