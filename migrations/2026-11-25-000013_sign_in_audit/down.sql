-- The log is append-only for posture; going back drops the lines this version added.
ALTER TABLE console_audit DISABLE TRIGGER console_audit_append_only;
DELETE FROM console_audit WHERE action IN ('session.signed_in', 'session.signed_out');
ALTER TABLE console_audit ENABLE TRIGGER console_audit_append_only;
ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared'));
