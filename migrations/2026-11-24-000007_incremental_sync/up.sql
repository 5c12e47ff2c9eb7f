-- Incremental sync: `modified_at` is the time of the analyzer pass that last changed anything
-- the API serves of a row (a re-report with nothing changed leaves it; `updated_at` and
-- `last_seen_at` keep moving with every report). A pass's rows all share one value, and
-- within one customer it never goes backwards: a pass takes
-- greatest(now, customers.synced_through + 1 µs) while it holds the customer's row lock,
-- and stores it in `customers.synced_through` as it commits. Readers serve rows up to
-- `synced_through`, which every committed pass has reached and no running pass can reach.

ALTER TABLE customers ADD COLUMN synced_through timestamptz;

ALTER TABLE analyzer_passes ADD COLUMN modified_at timestamptz;
UPDATE analyzer_passes SET modified_at = started_at;
ALTER TABLE analyzer_passes ALTER COLUMN modified_at SET NOT NULL;

ALTER TABLE findings ADD COLUMN modified_at timestamptz;
UPDATE findings SET modified_at = updated_at;
ALTER TABLE findings ALTER COLUMN modified_at SET NOT NULL;

ALTER TABLE identities ADD COLUMN modified_at timestamptz;
UPDATE identities SET modified_at = last_seen_at;
ALTER TABLE identities ALTER COLUMN modified_at SET NOT NULL;

ALTER TABLE role_recommendations ADD COLUMN modified_at timestamptz;
UPDATE role_recommendations SET modified_at = updated_at;
ALTER TABLE role_recommendations ALTER COLUMN modified_at SET NOT NULL;

UPDATE customers c SET synced_through = (
    SELECT max(t) FROM (
        SELECT max(modified_at) FROM analyzer_passes WHERE customer_id = c.id
        UNION ALL SELECT max(modified_at) FROM findings WHERE customer_id = c.id
        UNION ALL SELECT max(modified_at) FROM identities WHERE customer_id = c.id
        UNION ALL SELECT max(modified_at) FROM role_recommendations WHERE customer_id = c.id
    ) AS m(t)
);

-- `order=modified` and `modifiedSince`: a range of (modified_at, id), with the filter columns
-- included so the page's ids and `meta.total` come from index-only scans.
CREATE INDEX findings_modified_idx ON findings (customer_id, modified_at, id)
    INCLUDE (severity_rank, status, finding_type, cloud_tenant_id);
CREATE INDEX identities_modified_idx ON identities (customer_id, modified_at, id)
    INCLUDE (cloud_tenant_id);
CREATE INDEX role_recommendations_modified_idx
    ON role_recommendations (customer_id, modified_at, id) INCLUDE (cloud_tenant_id);

-- Conditional requests: a per-customer data version, bumped in the same transaction as
-- every change the read routes can show (a pass, a webhook subscription change, a tenant
-- connected). Serving processes cache versions and forget one when `posture_data` names
-- its customer (delivered at commit). Its own table, so that bumping it never waits for the
-- row lock a running pass holds on `customers`.
CREATE TABLE customer_data_versions (
    customer_id  uuid PRIMARY KEY REFERENCES customers (id),
    version      bigint NOT NULL
);

CREATE FUNCTION bump_data_version(customer uuid) RETURNS void LANGUAGE sql AS $$
    INSERT INTO customer_data_versions (customer_id, version) VALUES (customer, 1)
    ON CONFLICT (customer_id) DO UPDATE SET version = customer_data_versions.version + 1;
    SELECT pg_notify('posture_data', customer::text);
$$;

CREATE FUNCTION bump_data_version_of_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bump_data_version(CASE WHEN TG_OP = 'DELETE' THEN OLD.customer_id
                                   ELSE NEW.customer_id END);
    RETURN NULL;
END;
$$;

CREATE TRIGGER webhook_subscriptions_data_version
    AFTER INSERT OR UPDATE OR DELETE ON webhook_subscriptions
    FOR EACH ROW EXECUTE FUNCTION bump_data_version_of_row();
CREATE TRIGGER tenants_data_version
    AFTER INSERT OR UPDATE OR DELETE ON tenants
    FOR EACH ROW EXECUTE FUNCTION bump_data_version_of_row();
