-- Serving processes cache authenticated keys and forget them when told (NOTIFY on
-- `posture_keys`): any change that can end a key's validity notifies, whoever makes it
-- (`posture-api keys revoke`, or SQL typed by an operator). The payload is the key's id.
CREATE FUNCTION api_keys_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_LEVEL = 'STATEMENT' THEN
        PERFORM pg_notify('posture_keys', '');
    ELSE
        PERFORM pg_notify('posture_keys', OLD.id::text);
    END IF;
    RETURN NULL;
END;
$$;

-- `last_used_at` changes every minute per key and notifies nothing.
CREATE TRIGGER api_keys_notify_update AFTER UPDATE ON api_keys
    FOR EACH ROW
    WHEN ((OLD.revoked_at, OLD.expires_at, OLD.scopes, OLD.key_hash, OLD.customer_id)
          IS DISTINCT FROM (NEW.revoked_at, NEW.expires_at, NEW.scopes, NEW.key_hash, NEW.customer_id))
    EXECUTE FUNCTION api_keys_notify();
CREATE TRIGGER api_keys_notify_delete AFTER DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_notify();
CREATE TRIGGER api_keys_notify_truncate AFTER TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION api_keys_notify();
