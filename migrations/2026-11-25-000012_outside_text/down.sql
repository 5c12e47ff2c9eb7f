ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_key_check,
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check CHECK (action IN ('key.issued', 'key.revoked')),
    DROP COLUMN detail,
    ALTER COLUMN key_id SET NOT NULL,
    ALTER COLUMN key_name SET NOT NULL,
    ALTER COLUMN key_prefix SET NOT NULL;
CREATE OR REPLACE FUNCTION posture_analyze(table_name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF table_name NOT IN ('findings', 'identities') THEN
        RAISE EXCEPTION 'posture_analyze: % is not a table posture refreshes', table_name;
    END IF;
    EXECUTE format('ANALYZE %I (customer_id)', table_name);
END;
$$;
REVOKE EXECUTE ON FUNCTION posture_analyze(text) FROM PUBLIC;
ALTER TABLE webhook_attempts DROP COLUMN detail;
