-- The customer's audit log tells who signed in to its console and who signed out: a line
-- each, by the admin, naming no key.
ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out'));
