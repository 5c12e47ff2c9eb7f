-- Credentials a customer can fence and see (docs/auth.md, docs/audit.md): where each key or
-- OAuth client may be used from, where it was last used from, the addresses it has been
-- used from, and the customer's audit feed (`GET /api/v1/audit-events`) with the address of
-- each action. Additive: the previous version keeps working on this schema during a rollout
-- (its writes leave the new columns empty, which means "from anywhere" and "not recorded").

-- The allow-list (canonical networks; empty: from anywhere) and the last use's origin,
-- written with `last_used_at` (at most once a minute per credential, address and instance).
ALTER TABLE api_keys
    ADD COLUMN allow_from text[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(allow_from) <= 32),
    ADD COLUMN last_used_from text CHECK (length(last_used_from) <= 64),
    ADD COLUMN last_used_user_agent text CHECK (length(last_used_user_agent) <= 200);

-- A change of the allow-list changes where the key is valid: the serving processes forget
-- their cached principals of it, as they do on a revocation.
DROP TRIGGER api_keys_notify_update ON api_keys;
CREATE TRIGGER api_keys_notify_update AFTER UPDATE ON api_keys
    FOR EACH ROW
    WHEN ((OLD.revoked_at, OLD.expires_at, OLD.scopes, OLD.key_hash, OLD.customer_id,
           OLD.allow_from)
          IS DISTINCT FROM (NEW.revoked_at, NEW.expires_at, NEW.scopes, NEW.key_hash,
                            NEW.customer_id, NEW.allow_from))
    EXECUTE FUNCTION api_keys_notify();

-- The addresses each credential was used from, the first time each: the audit feed's
-- `*.used_from_new_address`. Bounded per credential (the store writes at most 1,000) and
-- by the audit retention. Customer data: distributed by customer on Citus, with the rest,
-- after the migrations (`posture_distribute()`).
CREATE TABLE credential_addresses (
    customer_id  uuid NOT NULL REFERENCES customers (id),
    key_id       uuid NOT NULL,
    address      text NOT NULL CHECK (length(address) BETWEEN 2 AND 64),
    first_seen   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (customer_id, key_id, address)
);

-- The audit feed: the address an action came from (an admin's, a credential's; none for an
-- operator's command), and the new kinds of line.
ALTER TABLE console_audit
    ADD COLUMN source_ip text CHECK (length(source_ip) <= 64),
    -- What a SCIM line is about: the user's or group's id and name when it was written.
    ADD COLUMN target_id uuid,
    ADD COLUMN target_name text CHECK (length(target_name) <= 256),
    DROP CONSTRAINT console_audit_actor_kind_check,
    ADD CONSTRAINT console_audit_actor_kind_check
        CHECK (actor_kind IN ('admin', 'operator', 'key', 'system')),
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out', 'session.ended',
                          'session.refused',
                          'scim.user.created', 'scim.user.updated', 'scim.user.deleted',
                          'scim.group.created', 'scim.group.updated', 'scim.group.deleted',
                          'client.issued', 'client.rotated', 'client.revoked',
                          'key.allow_list_changed', 'client.allow_list_changed',
                          'key.used_from_new_address', 'client.used_from_new_address',
                          'key.refused_by_allow_list', 'client.refused_by_allow_list',
                          'client.tokens_issued',
                          'key.inactive_soon', 'client.inactive_soon',
                          'key.expired_inactive', 'client.expired_inactive',
                          'inactivity.set')),
    DROP CONSTRAINT console_audit_key_check,
    ADD CONSTRAINT console_audit_key_check
        CHECK ((action LIKE 'key.%' OR action LIKE 'scim.%' OR action LIKE 'client.%')
               = (key_id IS NOT NULL AND key_name IS NOT NULL AND key_prefix IS NOT NULL));
-- The feed filters by type.
CREATE INDEX console_audit_action_idx ON console_audit (customer_id, action, at);

-- Append-only, but not forever: the worker deletes lines older than the retention
-- (`POSTURE_AUDIT_RETENTION_DAYS`, 30 days at the least). A line younger than 30 days is
-- never changed or deleted, whoever asks; none is ever changed.
CREATE OR REPLACE FUNCTION console_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND OLD.at < now() - interval '30 days' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the console audit log is append-only';
END;
$$;

-- The customer's own setting: credentials unused this many days stop working (NULL: never).
ALTER TABLE customers
    ADD COLUMN inactivity_days integer CHECK (inactivity_days BETWEEN 7 AND 3650);

-- `read:audit` (the audit feed) is new; existing keys keep their scopes (immutable).
ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check CHECK (
    cardinality(scopes) > 0
    AND scopes <@ ARRAY['read:identities', 'read:findings', 'read:roles', 'read:upr',
                        'manage:webhooks', 'provision:scim', 'write:findings',
                        'read:audit']::text[]) NOT VALID;

-- The feed reads lines in the order of `at`, once they are a few seconds old (docs/audit.md):
-- the time of the insert, not of its transaction's start, so that only the moment between a
-- line's insert and its commit can reorder it.
ALTER TABLE console_audit ALTER COLUMN at SET DEFAULT clock_timestamp();
