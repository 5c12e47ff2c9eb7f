-- posture: foundation schema.
--
-- Rules every table of customer data keeps:
--   * customer_id comes first in the primary key and in every index, so each query is scoped
--     to one customer by its index prefix;
--   * a row's cloud tenant must be a tenant of the same customer (composite foreign key);
--   * analyzer ids are text COLLATE "C": byte order, stable and cheap to compare.

CREATE TABLE customers (
    id          uuid PRIMARY KEY,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tenants (
    customer_id     uuid NOT NULL REFERENCES customers (id),
    cloud_tenant_id uuid NOT NULL,
    display_name    text NOT NULL,
    primary_domain  text,
    connected_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (customer_id, cloud_tenant_id),
    -- A cloud tenant is connected to one customer at most.
    CONSTRAINT tenants_cloud_tenant_id_key UNIQUE (cloud_tenant_id)
);

CREATE TABLE api_keys (
    id            uuid PRIMARY KEY,
    customer_id   uuid NOT NULL REFERENCES customers (id),
    name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    -- "svc_" and the first characters of the key, for operators; never the key.
    prefix        text NOT NULL,
    -- SHA-256 of the whole key: the only form of the key that is stored.
    key_hash      bytea NOT NULL CHECK (length(key_hash) = 32),
    scopes        text[] NOT NULL CHECK (
        cardinality(scopes) > 0
        AND scopes <@ ARRAY['read:identities', 'read:findings', 'read:roles', 'read:upr',
                            'manage:webhooks', 'provision:scim']::text[]
    ),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    revoked_at    timestamptz,
    last_used_at  timestamptz,
    CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash)
);
CREATE INDEX api_keys_customer_idx ON api_keys (customer_id, created_at);

-- Scopes, hash and owner are bound at issue: only revocation and use may change a key.
CREATE FUNCTION api_keys_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.scopes IS DISTINCT FROM OLD.scopes
       OR NEW.key_hash IS DISTINCT FROM OLD.key_hash
       OR NEW.customer_id IS DISTINCT FROM OLD.customer_id
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
        RAISE EXCEPTION 'api key % is immutable apart from revocation', OLD.id;
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER api_keys_immutable BEFORE UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_immutable();

-- One row per committed analyzer pass (one `posture-api ingest`).
CREATE TABLE analyzer_passes (
    customer_id           uuid NOT NULL REFERENCES customers (id),
    id                    uuid NOT NULL,
    started_at            timestamptz NOT NULL,
    finished_at           timestamptz NOT NULL,
    tenants               integer NOT NULL,
    identities            integer NOT NULL,
    findings              integer NOT NULL,
    new_findings          integer NOT NULL,
    role_recommendations  integer NOT NULL,
    upr_scores            integer NOT NULL,
    PRIMARY KEY (customer_id, id)
);

CREATE TABLE identities (
    customer_id      uuid NOT NULL,
    id               text COLLATE "C" NOT NULL,
    cloud_tenant_id  uuid NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('user', 'group', 'servicePrincipal',
                                                   'managedIdentity', 'agentIdentity')),
    display_name     text NOT NULL,
    principal_name   text,
    first_seen_at    timestamptz NOT NULL,
    last_seen_at     timestamptz NOT NULL,
    PRIMARY KEY (customer_id, id),
    FOREIGN KEY (customer_id, cloud_tenant_id) REFERENCES tenants (customer_id, cloud_tenant_id)
);
-- The list is ordered by id; this serves the tenant-filtered list in that order.
CREATE INDEX identities_tenant_idx ON identities (customer_id, cloud_tenant_id, id);

CREATE TABLE role_assignments (
    customer_id      uuid NOT NULL,
    identity_id      text COLLATE "C" NOT NULL,
    position         integer NOT NULL,
    role_name        text NOT NULL,
    scope            text NOT NULL,
    assignment_type  text NOT NULL CHECK (assignment_type IN ('active', 'eligible')),
    PRIMARY KEY (customer_id, identity_id, position),
    FOREIGN KEY (customer_id, identity_id) REFERENCES identities (customer_id, id)
        ON DELETE CASCADE
);

CREATE TABLE findings (
    customer_id      uuid NOT NULL,
    id               text COLLATE "C" NOT NULL,
    cloud_tenant_id  uuid NOT NULL,
    finding_type     text NOT NULL,
    severity         text NOT NULL CHECK (severity IN ('critical', 'high', 'medium', 'low')),
    -- List order: most severe first.
    severity_rank    smallint NOT NULL GENERATED ALWAYS AS (
        CASE severity WHEN 'critical' THEN 1 WHEN 'high' THEN 2 WHEN 'medium' THEN 3 ELSE 4 END
    ) STORED,
    status           text NOT NULL CHECK (status IN ('open', 'resolved', 'suppressed')),
    title            text NOT NULL,
    description      text,
    identity_id      text COLLATE "C",
    detected_at      timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    -- The pass that first reported the finding: its "new findings" are those with its id.
    first_pass_id    uuid NOT NULL,
    last_pass_id     uuid NOT NULL,
    PRIMARY KEY (customer_id, id),
    FOREIGN KEY (customer_id, cloud_tenant_id) REFERENCES tenants (customer_id, cloud_tenant_id),
    FOREIGN KEY (customer_id, identity_id) REFERENCES identities (customer_id, id)
        DEFERRABLE INITIALLY DEFERRED
);
-- List order is (severity_rank, detected_at DESC, id); one index per tenant-filter shape.
-- The filter columns are INCLUDEd so a page's ids come from an index-only scan: skipping
-- `offset` rows never touches the table (the rows of the page are then fetched by key).
CREATE INDEX findings_list_idx
    ON findings (customer_id, severity_rank, detected_at DESC, id)
    INCLUDE (status, finding_type, cloud_tenant_id);
CREATE INDEX findings_tenant_list_idx
    ON findings (customer_id, cloud_tenant_id, severity_rank, detected_at DESC, id)
    INCLUDE (status, finding_type);
CREATE INDEX findings_first_pass_idx ON findings (customer_id, first_pass_id);

-- Row counts per filter combination, recomputed by each pass in its transaction, so
-- `meta.total` is a sum over a few rows instead of a count over the customer's findings.
CREATE TABLE finding_totals (
    customer_id      uuid NOT NULL,
    cloud_tenant_id  uuid NOT NULL,
    severity         text NOT NULL,
    status           text NOT NULL,
    finding_type     text NOT NULL,
    total            integer NOT NULL,
    PRIMARY KEY (customer_id, cloud_tenant_id, severity, status, finding_type)
);

CREATE TABLE identity_totals (
    customer_id      uuid NOT NULL,
    cloud_tenant_id  uuid NOT NULL,
    total            integer NOT NULL,
    PRIMARY KEY (customer_id, cloud_tenant_id)
);

CREATE TABLE role_recommendations (
    customer_id            uuid NOT NULL,
    id                     text COLLATE "C" NOT NULL,
    cloud_tenant_id        uuid NOT NULL,
    identity_id            text COLLATE "C" NOT NULL,
    current_roles          text[] NOT NULL,
    recommended_role_name  text NOT NULL,
    recommended_actions    text[] NOT NULL,
    removed_actions        text[] NOT NULL,
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    PRIMARY KEY (customer_id, id),
    FOREIGN KEY (customer_id, cloud_tenant_id) REFERENCES tenants (customer_id, cloud_tenant_id),
    FOREIGN KEY (customer_id, identity_id) REFERENCES identities (customer_id, id)
        DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX role_recommendations_tenant_idx
    ON role_recommendations (customer_id, cloud_tenant_id, id);

-- UPR history: one score per principal per day (the last recorded that day wins).
CREATE TABLE upr_scores (
    customer_id      uuid NOT NULL,
    identity_id      text COLLATE "C" NOT NULL,
    day              date NOT NULL,
    cloud_tenant_id  uuid NOT NULL,
    score            smallint NOT NULL CHECK (score BETWEEN 0 AND 100),
    factors          jsonb NOT NULL,
    recorded_at      timestamptz NOT NULL,
    pass_id          uuid NOT NULL,
    PRIMARY KEY (customer_id, identity_id, day),
    FOREIGN KEY (customer_id, cloud_tenant_id) REFERENCES tenants (customer_id, cloud_tenant_id),
    FOREIGN KEY (customer_id, identity_id) REFERENCES identities (customer_id, id)
        DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX upr_scores_trend_idx ON upr_scores (customer_id, day) INCLUDE (cloud_tenant_id, score);

-- The latest score of each principal (what the rollup and the principals list read).
CREATE TABLE upr_latest (
    customer_id      uuid NOT NULL,
    identity_id      text COLLATE "C" NOT NULL,
    cloud_tenant_id  uuid NOT NULL,
    score            smallint NOT NULL CHECK (score BETWEEN 0 AND 100),
    factors          jsonb NOT NULL,
    recorded_at      timestamptz NOT NULL,
    PRIMARY KEY (customer_id, identity_id),
    FOREIGN KEY (customer_id, cloud_tenant_id) REFERENCES tenants (customer_id, cloud_tenant_id),
    FOREIGN KEY (customer_id, identity_id) REFERENCES identities (customer_id, id)
        DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX upr_latest_rank_idx ON upr_latest (customer_id, score DESC, identity_id);
