ALTER TABLE console_audit DISABLE TRIGGER console_audit_append_only;
DELETE FROM console_audit WHERE action LIKE 'client.%';
ALTER TABLE console_audit ENABLE TRIGGER console_audit_append_only;
ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out', 'session.ended',
                          'scim.user.created', 'scim.user.updated', 'scim.user.deleted',
                          'scim.group.created', 'scim.group.updated', 'scim.group.deleted')),
    DROP CONSTRAINT console_audit_key_check,
    ADD CONSTRAINT console_audit_key_check
        CHECK ((action IN ('key.issued', 'key.revoked') OR action LIKE 'scim.%')
               = (key_id IS NOT NULL AND key_name IS NOT NULL AND key_prefix IS NOT NULL));
DROP TABLE client_assertions;
DROP TABLE client_credentials;
DELETE FROM api_keys WHERE kind = 'client';
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
ALTER TABLE api_keys
    DROP CONSTRAINT api_keys_kind_hash_check,
    ALTER COLUMN key_hash SET NOT NULL,
    DROP COLUMN kind;
