DROP TABLE console_audit;
DROP FUNCTION console_audit_append_only();
DROP TABLE console_sessions;
DROP TABLE console_sign_ins;
DROP TABLE console_sso;
CREATE OR REPLACE FUNCTION api_keys_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
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
ALTER TABLE api_keys DROP COLUMN created_by;
