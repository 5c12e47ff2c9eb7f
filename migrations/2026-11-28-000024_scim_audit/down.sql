ALTER TABLE console_audit DISABLE TRIGGER console_audit_append_only;
DELETE FROM console_audit WHERE action LIKE 'scim.%';
ALTER TABLE console_audit ENABLE TRIGGER console_audit_append_only;
ALTER TABLE console_audit
    DROP CONSTRAINT console_audit_actor_kind_check,
    ADD CONSTRAINT console_audit_actor_kind_check CHECK (actor_kind IN ('admin', 'operator')),
    DROP CONSTRAINT console_audit_action_check,
    ADD CONSTRAINT console_audit_action_check
        CHECK (action IN ('key.issued', 'key.revoked', 'sso.set', 'sso.cleared',
                          'session.signed_in', 'session.signed_out', 'session.ended')),
    DROP CONSTRAINT console_audit_key_check,
    ADD CONSTRAINT console_audit_key_check
        CHECK ((action IN ('key.issued', 'key.revoked')) = (key_id IS NOT NULL
               AND key_name IS NOT NULL AND key_prefix IS NOT NULL));
