ALTER TABLE console_audit ALTER COLUMN at SET DEFAULT now();
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE 'read:audit' = ANY (scopes);
ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check CHECK (
    cardinality(scopes) > 0
    AND scopes <@ ARRAY['read:identities', 'read:findings', 'read:roles', 'read:upr',
                        'manage:webhooks', 'provision:scim', 'write:findings']::text[]) NOT VALID;
ALTER TABLE customers DROP COLUMN inactivity_days;
CREATE OR REPLACE FUNCTION console_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the console audit log is append-only';
END;
$$;
DROP INDEX console_audit_action_idx;
ALTER TABLE console_audit DISABLE TRIGGER console_audit_append_only;
DELETE FROM console_audit
WHERE action NOT IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                     'session.signed_in', 'session.signed_out', 'session.ended',
                     'scim.user.created', 'scim.user.updated', 'scim.user.deleted',
                     'scim.group.created', 'scim.group.updated', 'scim.group.deleted',
                     'client.issued', 'client.rotated', 'client.revoked')
   OR actor_kind NOT IN ('admin', 'operator', 'key');
ALTER TABLE console_audit ENABLE TRIGGER console_audit_append_only;
ALTER TABLE console_audit
    DROP COLUMN source_ip,
    DROP COLUMN target_id,
    DROP COLUMN target_name,
    DROP CONSTRAINT console_audit_actor_kind_check,
    ADD CONSTRAINT console_audit_actor_kind_check
        CHECK (actor_kind IN ('admin', 'operator', 'key')),
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out', 'session.ended',
                          'scim.user.created', 'scim.user.updated', 'scim.user.deleted',
                          'scim.group.created', 'scim.group.updated', 'scim.group.deleted',
                          'client.issued', 'client.rotated', 'client.revoked')),
    DROP CONSTRAINT console_audit_key_check,
    ADD CONSTRAINT console_audit_key_check
        CHECK ((action IN ('key.issued', 'key.revoked') OR action LIKE 'scim.%'
                OR action LIKE 'client.%')
               = (key_id IS NOT NULL AND key_name IS NOT NULL AND key_prefix IS NOT NULL));
DROP TABLE credential_addresses;
DROP TRIGGER api_keys_notify_update ON api_keys;
CREATE TRIGGER api_keys_notify_update AFTER UPDATE ON api_keys
    FOR EACH ROW
    WHEN ((OLD.revoked_at, OLD.expires_at, OLD.scopes, OLD.key_hash, OLD.customer_id)
          IS DISTINCT FROM (NEW.revoked_at, NEW.expires_at, NEW.scopes, NEW.key_hash, NEW.customer_id))
    EXECUTE FUNCTION api_keys_notify();
ALTER TABLE api_keys
    DROP COLUMN last_used_user_agent,
    DROP COLUMN last_used_from,
    DROP COLUMN allow_from;
