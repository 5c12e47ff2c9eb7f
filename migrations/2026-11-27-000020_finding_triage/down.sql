DELETE FROM api_keys WHERE 'write:findings' = ANY (scopes);
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check CHECK (
    cardinality(scopes) > 0
    AND scopes <@ ARRAY['read:identities', 'read:findings', 'read:roles', 'read:upr',
                        'manage:webhooks', 'provision:scim']::text[]);
DROP TABLE finding_triage_history;
ALTER TABLE findings DROP CONSTRAINT findings_triage_check;
ALTER TABLE findings DROP COLUMN triage_key_name, DROP COLUMN triage_key_id,
    DROP COLUMN triage_updated_at, DROP COLUMN triage_expires_at,
    DROP COLUMN triage_comment, DROP COLUMN triage_reason, DROP COLUMN triage_state;
