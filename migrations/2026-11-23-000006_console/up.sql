-- posture: the customer console (docs/console.md). Customer admins sign in with their own
-- OpenID Connect provider and issue and revoke their organisation's API keys; every
-- issuance and revocation, from the console or the operator's CLI, is audited.

-- Who issued a key: an admin's display name (subject in the audit log), or "operator".
ALTER TABLE api_keys ADD COLUMN created_by text NOT NULL DEFAULT 'operator'
    CHECK (length(created_by) BETWEEN 1 AND 200);

CREATE OR REPLACE FUNCTION api_keys_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.scopes IS DISTINCT FROM OLD.scopes
       OR NEW.key_hash IS DISTINCT FROM OLD.key_hash
       OR NEW.customer_id IS DISTINCT FROM OLD.customer_id
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
       OR NEW.created_by IS DISTINCT FROM OLD.created_by THEN
        RAISE EXCEPTION 'api key % is immutable apart from revocation', OLD.id;
    END IF;
    RETURN NEW;
END;
$$;

-- A customer's identity provider, set by the operator (`posture-api customers sso set`).
-- The client secret is sealed like webhook signing secrets (AES-256-GCM under
-- POSTURE_SECRET_KEY, bound to the customer).
CREATE TABLE console_sso (
    customer_id        uuid PRIMARY KEY REFERENCES customers (id),
    issuer             text NOT NULL CHECK (length(issuer) BETWEEN 1 AND 2048),
    client_id          text NOT NULL CHECK (length(client_id) BETWEEN 1 AND 1024),
    secret_key_id      text NOT NULL,
    secret_nonce       bytea NOT NULL,
    secret_ciphertext  bytea NOT NULL,
    -- Admins: identities whose ID token's `admin_claim` holds one of `admin_values`, or
    -- whose subject is one of `admin_subjects`.
    admin_claim        text CHECK (length(admin_claim) BETWEEN 1 AND 200),
    admin_values       text[] NOT NULL DEFAULT '{}',
    admin_subjects     text[] NOT NULL DEFAULT '{}',
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (cardinality(admin_values) > 0 OR cardinality(admin_subjects) > 0),
    CHECK ((admin_claim IS NULL) = (cardinality(admin_values) = 0))
);

-- A sign-in between the redirect to the identity provider and its callback: bound to the
-- browser by a cookie holding `binding` (only its SHA-256 is stored), single use, ten
-- minutes at most.
CREATE TABLE console_sign_ins (
    customer_id    uuid NOT NULL REFERENCES customers (id),
    binding_hash   bytea NOT NULL CHECK (length(binding_hash) = 32),
    state          text NOT NULL,
    nonce          text NOT NULL,
    pkce_verifier  text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (customer_id, binding_hash)
);
CREATE INDEX console_sign_ins_age_idx ON console_sign_ins (customer_id, created_at);

-- A signed-in admin. The cookie holds the token; only its SHA-256 is stored.
CREATE TABLE console_sessions (
    customer_id   uuid NOT NULL REFERENCES customers (id),
    token_hash    bytea NOT NULL CHECK (length(token_hash) = 32),
    subject       text NOT NULL,
    display_name  text NOT NULL,
    csrf_token    text NOT NULL,
    created_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    ended_at      timestamptz,
    PRIMARY KEY (customer_id, token_hash)
);
CREATE INDEX console_sessions_expiry_idx ON console_sessions (customer_id, expires_at);

-- What happened to a customer's keys, and who did it. Append-only.
CREATE TABLE console_audit (
    customer_id    uuid NOT NULL REFERENCES customers (id),
    id             uuid NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    actor_kind     text NOT NULL CHECK (actor_kind IN ('admin', 'operator')),
    actor_subject  text NOT NULL,
    actor_name     text NOT NULL,
    action         text NOT NULL CHECK (action IN ('key.issued', 'key.revoked')),
    key_id         uuid NOT NULL,
    key_name       text NOT NULL,
    key_prefix     text NOT NULL,
    PRIMARY KEY (customer_id, id)
);
CREATE INDEX console_audit_at_idx ON console_audit (customer_id, at);

CREATE FUNCTION console_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the console audit log is append-only';
END;
$$;
CREATE TRIGGER console_audit_append_only BEFORE UPDATE OR DELETE ON console_audit
    FOR EACH ROW EXECUTE FUNCTION console_audit_append_only();
