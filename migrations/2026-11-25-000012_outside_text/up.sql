-- What the network said when a delivery attempt failed (connection refused, a TLS error, a
-- name that does not resolve) is kept for operators only, apart from the coarse `error` the
-- delivery log shows customers (which must not map what lies behind a receiver's address).
ALTER TABLE webhook_attempts ADD COLUMN detail text;

-- The planner-statistics function of migration 000009 runs as its owner: every name it
-- uses is qualified, and pg_temp comes last in its search path, so that a temporary table
-- of the caller cannot stand in for one of posture's.
CREATE OR REPLACE FUNCTION posture_analyze(table_name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF table_name NOT IN ('findings', 'identities') THEN
        RAISE EXCEPTION 'posture_analyze: % is not a table posture refreshes', table_name;
    END IF;
    EXECUTE format('ANALYZE public.%I (customer_id)', table_name);
END;
$$;
REVOKE EXECUTE ON FUNCTION posture_analyze(text) FROM PUBLIC;

-- The customer's audit log tells of its sign-in settings too: who changed the identity
-- provider or the admin rule (an operator), and how many console sessions that ended. Such
-- lines name no key.
ALTER TABLE console_audit
    ALTER COLUMN key_id DROP NOT NULL,
    ALTER COLUMN key_name DROP NOT NULL,
    ALTER COLUMN key_prefix DROP NOT NULL,
    ADD COLUMN detail text,
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared')),
    ADD CONSTRAINT console_audit_key_check
        CHECK ((action IN ('key.issued', 'key.revoked')) = (key_id IS NOT NULL
               AND key_name IS NOT NULL AND key_prefix IS NOT NULL));
