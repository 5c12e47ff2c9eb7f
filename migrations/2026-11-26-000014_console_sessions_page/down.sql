-- The log is append-only for posture; going back drops the lines this version added.
ALTER TABLE console_audit DISABLE TRIGGER console_audit_append_only;
DELETE FROM console_audit WHERE action = 'session.ended';
ALTER TABLE console_audit ENABLE TRIGGER console_audit_append_only;
ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out'));
CREATE INDEX api_keys_customer_idx ON api_keys (customer_id, created_at);
DROP INDEX api_keys_customer_page_idx;
DROP INDEX console_sessions_token_idx;
ALTER TABLE console_sessions
    DROP CONSTRAINT console_sessions_pkey,
    ADD PRIMARY KEY (customer_id, token_hash);
ALTER TABLE console_sessions DROP COLUMN id;
ALTER TABLE console_sso DROP COLUMN display_name;
